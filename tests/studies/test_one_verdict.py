"""One verdict everywhere: comparison.csv, the verdict, comparison.md, sweep.png and ``simfl report`` take the same
baseline, the same paired ratio and the same rule of a winner from :mod:`simfl.output.comparison`.

Every folder here is written by hand (metrics.csv files whose accuracy steps from 10% to its final value at a chosen
time, against a stated target of 50%), so nothing is simulated.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd
import pytest
import yaml

from simfl.cli import main
from simfl.launch import grid
from simfl.launch.runner import comparison_of
from simfl.output import comparison as comparing
from simfl.output.plots import WINNER_EDGE, sweep_figure
from simfl.schema import scenario as scenario_mod
from tests.conftest import tiny_scenario

EVERY = 10.0
END = 120.0


def curve(hit: float, final: float) -> pd.DataFrame:
    """Evaluations every 10 s to 120 s: 10% before ``hit``, ``final`` from it on."""
    times = [EVERY * i for i in range(int(END / EVERY) + 1)]
    return pd.DataFrame({"virtual_time": times, "updates": range(len(times)),
                         "accuracy": [final if t >= hit else 0.1 for t in times], "loss": 1.0})


def scenario(entries: list[dict[str, Any]], **changes: Any) -> dict[str, Any]:
    """A valid scenario of ``entries`` over seeds 0-2 whose target is 50% accuracy."""
    return tiny_scenario(seeds=[0, 1, 2], algorithms=entries, eval={"every": EVERY, "target": 0.5},
                         budget={"time": END}, **changes)


def write_folder(folder: Path, raw: dict[str, Any], runs: dict[tuple[str, int], pd.DataFrame]) -> Path:
    """A result folder as ``simfl run`` leaves it: scenario.yaml, summary.csv, each run's metrics.csv, and the
    comparison the runner writes (:func:`simfl.launch.runner.comparison_of`)."""
    folder.mkdir(parents=True)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    for (entry, seed), metrics in runs.items():
        (folder / entry / f"seed{seed}").mkdir(parents=True)
        metrics.to_csv(folder / entry / f"seed{seed}" / "metrics.csv", index=False)
    pd.DataFrame([{"algorithm": e, "seed": s, "final_accuracy": float(m["accuracy"].iloc[-1])}
                  for (e, s), m in runs.items()]).to_csv(folder / "summary.csv", index=False)
    comparing.write(folder, [({}, comparison_of(scenario_mod.validate(raw), runs))])
    return folder


def runs_of(hits: dict[str, list[float]], finals: dict[str, list[float]]) -> dict[tuple[str, int], pd.DataFrame]:
    """Each entry's runs, seeds in order, entries in the order given (the scenario's)."""
    return {(e, s): curve(hits[e][s], finals[e][s]) for s in range(3) for e in hits}


TWINS = [{"name": "fedavg", "clients_per_round": 2}, {"name": "fedasync", "label": "copy_a"},
         {"name": "fedasync", "label": "copy_b"}]


def test_two_identical_entries_are_level_in_the_table_the_verdict_and_the_report(tmp_path: Path) -> None:
    hits = {"fedavg": [90, 100, 110], "copy_a": [30, 40, 40], "copy_b": [30, 40, 40]}
    finals = {"fedavg": [0.6, 0.62, 0.58], "copy_a": [0.8, 0.82, 0.85], "copy_b": [0.8, 0.82, 0.85]}
    folder = write_folder(tmp_path / "twins", scenario(TWINS), runs_of(hits, finals))
    table = pd.read_csv(folder / "comparison.csv").set_index("entry")
    # both at the best value carry the mark; neither is named, since a tie is no lead
    assert table["fastest"].to_dict() == {"fedavg": False, "copy_a": True, "copy_b": True}
    assert table["most_accurate"].to_dict() == {"fedavg": False, "copy_a": True, "copy_b": True}
    assert not table["fastest_clear"].any() and not table["most_accurate_clear"].any()
    verdict = (folder / "comparison.md").read_text().splitlines()[2]
    # 30/90, 40/100, 40/110: 0.36x; finals .80 .82 .85
    assert verdict.startswith("**copy_a and copy_b are level at the smallest time to 50.0%, 0.36x fedavg's time "
                              "[0.29, 0.46] (3 of 3 seeds reach it)")
    assert "; copy_a and copy_b end level at the highest accuracy, 82.3% [76.1, 88.6]**" in verdict
    assert "ends most accurate" not in verdict
    # simfl report of the folder: the same marks in bold, the same verdict
    out = tmp_path / "report"
    assert main(["report", str(folder), "--out", str(out)]) == 0
    md = (out / "table.md").read_text()
    assert "| copy_a | **82.3±2.1** | **0.36×** |" in md and "| copy_b | **82.3±2.1** | **0.36×** |" in md
    assert verdict in (out / "comparison.md").read_text()


def test_a_lead_over_the_baseline_is_no_win_over_the_runner_up(tmp_path: Path) -> None:
    # copy_a is far ahead of fedavg but not of copy_b (per seed 30/40, 30/30, 40/40): the verdict names no one
    hits = {"fedavg": [90, 100, 110], "copy_a": [30, 30, 40], "copy_b": [40, 30, 40]}
    finals = {"fedavg": [0.6, 0.62, 0.58], "copy_a": [0.8, 0.82, 0.85], "copy_b": [0.79, 0.83, 0.84]}
    c = comparison_of(scenario_mod.validate(scenario(TWINS)), runs_of(hits, finals))
    row = c.row("copy_a")
    assert row["fastest"] and not row["fastest_clear"] and row["fastest_over"] == "copy_b"
    logs = [math.log(30 / 40), 0.0, 0.0]
    assert row["fastest_by"] == pytest.approx(math.exp(sum(logs) / 3))
    assert row["fastest_by_low"] < 1.0 < row["fastest_by_high"] and row["ratio_high"] < 1.0
    assert c.fastest is None and c.verdict.startswith("not clear which reaches 50.0% first: copy_a is ahead, in ")
    assert ", 0.91x [0.60, 1.37] of copy_b's, the next fastest; the interval includes 1x;" in c.verdict
    assert "not clear which ends most accurate: copy_a is ahead" in c.verdict


def test_a_time_interval_finer_than_the_evaluation_grid_says_so() -> None:
    same = {(e, s): curve(hit, 0.8) for s in range(2) for e, hit in (("a", 20.0), ("b", 40.0 + 10 * s))}
    c = comparing.compare(same, (), 0.5, "b")
    assert comparing.time_cell(c.row("a")) == "20 s [20, 20] (within one evaluation step of 10 s)"
    assert comparing.time_cell(c.row("b")) == "45 s [0, 109]"  # cut at 0 s, as the method note says
    assert "time to target at 0 s" in c.text()


ENTRIES = [{"name": "orthofl"}, {"name": "fedbuff", "buffer": 2}, {"name": "fedasync"}]
"""No synchronous entry, and not in the paper's order: the scenario's first entry, orthofl, is the baseline."""


def test_simfl_report_gives_the_ratio_of_the_folders_comparison(tmp_path: Path) -> None:
    # paired by seed fedbuff takes (40/40 * 60/50 * 100/120) ** (1/3) = 1.0x orthofl's time, level with it (in floating
    # point 1 - 1e-16); the paper's ratio of mean times would be 200/210 = 0.95x, and its order would make fedasync the
    # baseline
    hits = {"orthofl": [40, 50, 120], "fedbuff": [40, 60, 100], "fedasync": [60, 70, 110]}
    finals = {"orthofl": [0.8, 0.8, 0.7], "fedbuff": [0.7, 0.8, 0.75], "fedasync": [0.7, 0.7, 0.72]}
    folder = write_folder(tmp_path / "run", scenario(ENTRIES), runs_of(hits, finals))
    own = pd.read_csv(folder / "comparison.csv").set_index("entry")
    assert set(own["baseline"]) == {"orthofl"} and own.loc["fedbuff", "ratio"] == pytest.approx(1.0)
    out = tmp_path / "report"
    assert main(["report", str(folder), "--out", str(out)]) == 0
    table = pd.read_csv(out / "table.csv").set_index("algorithm")
    rebuilt = pd.read_csv(out / "comparison.csv").set_index("entry")
    shared = [c for c in own.columns if c in rebuilt.columns]
    pd.testing.assert_frame_equal(rebuilt.loc[own.index, shared], own[shared])
    assert table["relative_time"].to_dict() == pytest.approx(own["ratio"].to_dict())
    md = (out / "table.md").read_text()
    assert "| FedBuff | 75.0±4.1 | **1.00×** |" in md and "| OrthoFL | **76.7±4.7** | **1×** |" in md
    assert "relative to OrthoFL (1×)" in md
    assert "**fedbuff and orthofl are level at the smallest time to 50.0% (3 of 3 seeds reach it)" in \
        (out / "comparison.md").read_text()


def sweep_folder(out: Path) -> tuple[dict[str, Any], list[grid.Cell]]:
    """A finished sweep of two latency settings written by hand: at the first, copy_a's lead over copy_b is not clear
    (30/40, 30/30, 40/40); at the second it is (20/40, 20/50, 20/40). fedavg is far behind at both."""
    raw = scenario(TWINS, sweep={"latency.seconds": [[1.0, 2.5, 4.0], [1.0, 1.0, 8.0]]})
    cells = grid.plan_raw(raw, out)
    hits = [{"fedavg": [90, 100, 110], "copy_a": [30, 30, 40], "copy_b": [40, 30, 40]},
            {"fedavg": [90, 100, 110], "copy_a": [20, 20, 20], "copy_b": [40, 50, 40]}]
    finals = {"fedavg": [0.6, 0.62, 0.58], "copy_a": [0.8, 0.82, 0.85], "copy_b": [0.8, 0.8, 0.8]}
    for cell in cells:
        point = 0 if cell.labels["latency.seconds"].startswith("1.0-2.5") else 1
        runs = {(e, cell.seed): curve(hits[point][e][cell.seed], finals[e][cell.seed]) for e in hits[point]}
        write_folder(out / cell.name, cell.raw, runs)
    return raw, cells


def test_a_sweep_names_and_draws_a_winner_only_where_the_comparison_does(tmp_path: Path) -> None:
    matplotlib.use("Agg")
    out = tmp_path / "sweep"
    raw, cells = sweep_folder(out)
    items = grid.write_comparison(out, raw, cells)
    (unclear, clear) = (c for _, c in items)
    assert unclear.fastest is None and clear.fastest == "copy_a"
    table = pd.read_csv(out / "comparison.csv")
    assert table.groupby("scenario", sort=False)["fastest_clear"].sum().tolist() == [0, 1]
    fig = sweep_figure([("1.0-2.5-4.0", unclear), ("1.0-1.0-8.0", clear)], grid.key_words("latency.seconds"), "t")
    fig.canvas.draw()
    top, bottom = fig.axes
    assert [t.get_text() for t in top.texts if t.get_text().startswith(("fastest", "level"))] == \
        ["fastest: not clear", "fastest: copy_a"]
    edged = [line for line in top.get_lines() if line.get_markeredgecolor() == WINNER_EDGE]
    assert len(edged) == 1 and edged[0].get_xdata()[0] > 1.0 - 0.5  # at the second value only
    ticks = [t.get_text() for t in top.get_yticklabels(which="both") if t.get_text()]
    assert ticks and all(set(t) <= set("0123456789.") for t in ticks), ticks  # 0.5, 1, 2: no 2x10^0
    assert bottom.get_xlabel() == "latency seconds (latency.seconds)"
    assert [t.get_text() for t in bottom.get_xticklabels()] == ["1.0-2.5-4.0\ntarget 50.0%", "1.0-1.0-8.0\ntarget 50.0%"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(t.startswith("black edge: named fastest") for t in legend) and "1x: fedavg's time" in legend
    # simfl report of the sweep folder: each grid point's ratios are the sweep's own
    report = tmp_path / "report"
    assert main(["report", str(out), "--out", str(report)]) == 0
    mine = table.set_index(["scenario", "entry"])["ratio"]
    theirs = pd.read_csv(report / "table.csv").set_index(["dataset", "algorithm"])["relative_time"]
    assert theirs.loc[mine.index].tolist() == pytest.approx(mine.tolist())
