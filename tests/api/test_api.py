"""The Python API: simfl.run and simfl.sweep give tidy tables with the same numbers as the commands."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import pandas as pd
import pytest
import yaml

import simfl
from simfl.cli import main
from simfl.output.results import SUMMARY_COLUMNS
from simfl.sim.state import Event
from tests.conftest import tiny_scenario

ALGORITHMS = [{"name": "fedasync", "alpha": 0.6}, {"name": "fedavg", "clients_per_round": 2}]


def scenario() -> dict:
    return tiny_scenario(seeds=[0, 1], algorithms=ALGORITHMS)


def test_run_returns_tidy_tables_equal_to_simfl_run(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario(), sort_keys=False))
    assert main(["run", str(path), "--out", str(tmp_path / "cli"), "--quiet"]) == 0
    res = simfl.run(scenario())  # a dict, into a temporary folder
    assert res.out.is_dir() and (res.out / "summary.csv").is_file()
    assert list(res.summary.columns) == SUMMARY_COLUMNS
    assert list(res.events.columns) == ["algorithm", "seed", *Event.columns()]
    assert list(res.metrics.columns)[:4] == ["algorithm", "seed", "virtual_time", "updates"]
    assert set(zip(res.metrics["algorithm"], res.metrics["seed"], strict=True)) == {
        (a, s) for a in ("fedasync", "fedavg") for s in (0, 1)}
    cli_summary = pd.read_csv(tmp_path / "cli" / "summary.csv")
    drop = ["wall_seconds"]
    pd.testing.assert_frame_equal(res.summary.drop(columns=drop), cli_summary.drop(columns=drop))
    for (algorithm, seed), frame in res.events.groupby(["algorithm", "seed"]):
        cli = pd.read_csv(tmp_path / "cli" / algorithm / f"seed{seed}" / "events.csv")
        pd.testing.assert_frame_equal(frame.drop(columns=["algorithm", "seed"]).reset_index(drop=True), cli)
    for (algorithm, seed), frame in res.metrics.groupby(["algorithm", "seed"]):
        cli = pd.read_csv(tmp_path / "cli" / algorithm / f"seed{seed}" / "metrics.csv")
        pd.testing.assert_frame_equal(frame.drop(columns=["algorithm", "seed"]).reset_index(drop=True), cli)
    # the answer: comparison.csv as a table, its verdict in words, as simfl run wrote and printed them
    pd.testing.assert_frame_equal(res.comparison, pd.read_csv(tmp_path / "cli" / "comparison.csv"))
    assert res.comparison["entry"].tolist() == ["fedasync", "fedavg"] and set(res.comparison["baseline"]) == {"fedavg"}
    assert res.verdict and f"**{res.verdict}**" in (tmp_path / "cli" / "comparison.md").read_text()
    # a path and a Scenario give the same numbers
    again = simfl.run(path, tmp_path / "again")
    pd.testing.assert_frame_equal(again.events, res.events)


def test_sweep_returns_cell_columns_equal_to_simfl_sweep(tmp_path: Path) -> None:
    raw = tiny_scenario(algorithms=[{"name": "fedasync", "alpha": 0.6}], budget={"time": 4.0})
    over = {"algorithms[0].alpha": [0.3, 0.6]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw | {"sweep": over}, sort_keys=False))
    assert main(["sweep", str(path), "--out", str(tmp_path / "cli")]) == 0
    res = simfl.sweep(raw, over=over, out=tmp_path / "api")
    assert list(res.summary.columns)[:4] == ["algorithm", "seed", "cell", "algorithms[0].alpha"]
    assert list(res.events.columns)[:4] == ["algorithm", "seed", "cell", "algorithms[0].alpha"]
    assert sorted(res.metrics["algorithms[0].alpha"].unique()) == [0.3, 0.6]
    cells = sorted(p.name for p in (tmp_path / "cli").iterdir() if p.is_dir())
    assert cells == sorted(p.name for p in (tmp_path / "api").iterdir() if p.is_dir())
    for cell in cells:
        for name in ("summary.csv", "fedasync/seed0/metrics.csv", "fedasync/seed0/events.csv"):
            a, b = pd.read_csv(tmp_path / "cli" / cell / name), pd.read_csv(tmp_path / "api" / cell / name)
            pd.testing.assert_frame_equal(a.drop(columns=["wall_seconds"], errors="ignore"),
                                          b.drop(columns=["wall_seconds"], errors="ignore"))
    # one comparison per grid point, the swept key a column, as simfl sweep wrote it
    pd.testing.assert_frame_equal(res.comparison, pd.read_csv(tmp_path / "cli" / "comparison.csv"))
    assert res.comparison["algorithms[0].alpha"].tolist() == [0.3, 0.6]
    assert res.verdict.splitlines()[1].startswith("tiny[alpha=0.6]: fedasync (the baseline) reaches ")
    for alpha, frame in res.events.groupby("algorithms[0].alpha"):
        label = "0.3" if alpha == 0.3 else "0.6"
        cell = next(c for c in cells if f"alpha={label}" in c)
        cli = pd.read_csv(tmp_path / "cli" / cell / "fedasync" / "seed0" / "events.csv")
        pd.testing.assert_frame_equal(frame[list(cli.columns)].reset_index(drop=True), cli)


def test_plot_draws_on_the_current_figure() -> None:
    import matplotlib.pyplot as plt

    res = simfl.run(tiny_scenario(budget={"time": 4.0}))
    fig = plt.figure()
    ax = res.plot()
    assert ax.figure is fig and [line.get_label() for line in ax.get_lines()] == ["fedasync"]
    plt.close(fig)


def test_importing_simfl_changes_no_matplotlib_state() -> None:
    import subprocess
    import sys

    code = ("import matplotlib; before = matplotlib.get_backend(); import simfl, simfl.output.plots, simfl.launch.api, "
            "simfl.latency.plots, simfl.studies.motivation; assert matplotlib.get_backend() == before; "
            "assert 'matplotlib.pyplot' not in __import__('sys').modules")
    subprocess.run([sys.executable, "-c", code], check=True, env={"MPLBACKEND": "svg", "PATH": ""})
    assert matplotlib  # imported in this process for the plot test


def test_a_scenario_files_mistake_names_the_file(tmp_path: Path) -> None:
    """simfl.run of a file names the file in its one line, as `simfl run` does (a plugin that does not import, in a
    notebook), and a mapping stays "scenario"."""
    from simfl.errors import InputError

    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(tiny_scenario(algorithms=[{"name": "nosuchmodule:Algo"}])))
    with pytest.raises(InputError) as info:
        simfl.run(path, allow_imports=True, quiet=True, out=tmp_path / "o")
    assert str(info.value).startswith(f"{path}: algorithms[0].name: cannot import module 'nosuchmodule'")
    with pytest.raises(InputError, match=r"^scenario: algorithms\[0\].name"):
        simfl.run(tiny_scenario(algorithms=[{"name": "nosuchmodule:Algo"}]), allow_imports=True, quiet=True,
                  out=tmp_path / "o")
    assert not (tmp_path / "o").exists()
