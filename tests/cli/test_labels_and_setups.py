"""Labelled algorithm entries and explicit set-ups (label counts, index files, devices) through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from simfl.cli import main
from tests.conftest import tiny_scenario

TWO_ORTHOFL = [
    {"name": "orthofl", "beta": 0.6, "a": 0.5, "shift_source": "global", "label": "orthofl_global"},
    {"name": "orthofl", "beta": 0.6, "a": 0.5, "shift_source": "chain", "label": "orthofl_chain"},
]


def test_two_orthofl_entries_run_and_report_side_by_side(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(algorithms=TWO_ORTHOFL, budget={"time": 12.0}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary["algorithm"].tolist() == ["orthofl_global", "orthofl_chain"]
    for label in ("orthofl_global", "orthofl_chain"):
        assert (out / label / "seed0" / "metrics.csv").is_file()
    # same delays, different rule: the first update differs (chain mixes it at weight 1)
    ev = {lab: pd.read_csv(out / lab / "seed0" / "events.csv") for lab in ("orthofl_global", "orthofl_chain")}
    assert ev["orthofl_global"]["time"].tolist() == ev["orthofl_chain"]["time"].tolist()
    assert ev["orthofl_global"]["weight"].iloc[0] == pytest.approx(0.6)
    assert ev["orthofl_chain"]["weight"].iloc[0] == 1.0
    report = tmp_path / "report"
    assert main(["report", str(out), "--out", str(report), "--baseline", "orthofl_global"]) == 0
    table = (report / "table.md").read_text()
    assert "| OrthoFL (global) |" in table and "| OrthoFL (chain) |" in table
    rows = pd.read_csv(report / "table.csv")
    assert rows["algorithm"].tolist() == ["orthofl_global", "orthofl_chain"]


@pytest.mark.parametrize(
    ("algorithms", "message"),
    [
        ([{"name": "orthofl"}, {"name": "orthofl", "shift_source": "chain"}],
         "algorithms: 'orthofl' names two entries; give each entry of one algorithm a distinct label"),
        ([{"name": "fedasync"}, {"name": "orthofl", "label": "fedasync"}], "'fedasync' names two entries"),
        ([{"name": "orthofl", "label": "a/b"}], "algorithms[0].label: must be 1-64 letters, digits"),
    ],
)
def test_label_mistakes_are_one_line(write_scenario, capsys, algorithms, message: str) -> None:  # type: ignore[no-untyped-def]
    path = write_scenario(tiny_scenario(algorithms=algorithms))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_counts_partition_from_a_scenario(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    counts = [[5, 3, 0], [0, 4, 6], [2, 2, 2]]
    raw = tiny_scenario(data={"dataset": "synthetic", "train_size": 120, "test_size": 60, "features": 8, "classes": 3,
                              "partition": {"kind": "counts", "counts": counts, "clients": 3}})
    path = write_scenario(raw)
    from simfl.launch.experiment import federation, load_dataset
    from simfl.schema import scenario as scenario_mod

    scn = scenario_mod.load(path)
    fed = federation(scn, load_dataset(scn), 0)
    got = [torch_bincount(y, 3) for _, y in fed.shards]
    assert got == counts


def torch_bincount(y, n: int) -> list[int]:  # type: ignore[no-untyped-def]
    import torch

    return torch.bincount(y, minlength=n).tolist()


def test_indices_partition_relative_to_the_scenario_file(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "parts.json").write_text(json.dumps([[0, 1, 2], [3, 4], [5, 6, 7, 8]]))
    data = {"dataset": "synthetic", "train_size": 120, "test_size": 60, "features": 8, "classes": 3,
            "partition": {"kind": "indices", "path": "parts.json"}}
    path = write_scenario(tiny_scenario(data=data, budget={"time": 4.0}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    # a bad file: one line naming it, exit 2, nothing written
    (tmp_path / "parts.json").write_text(json.dumps([[0, 1], [1, 2], [3]]))
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "bad"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parts.json" in err and "index 1 is listed on clients 0 and 1" in err
    assert not (tmp_path / "bad").exists() and not (tmp_path / "bad.partial").exists()


def test_counts_over_a_class_is_one_line(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    data = {"dataset": "synthetic", "train_size": 30, "test_size": 30, "features": 8, "classes": 3,
            "partition": {"kind": "counts", "counts": [[50, 0, 0], [0, 1, 1], [1, 1, 1]]}}
    path = write_scenario(tiny_scenario(data=data))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "data.partition.counts: class 0: the clients ask for 51 samples" in err


def test_only_runs_the_named_entries(write_scenario, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    algorithms = [*TWO_ORTHOFL, {"name": "fedasync", "alpha": 0.6}]
    path = write_scenario(tiny_scenario(algorithms=algorithms, budget={"time": 4.0}))
    out = tmp_path / "out"
    assert main(["run", str(path), "--only", "fedasync,orthofl_chain", "--out", str(out), "--quiet"]) == 0
    assert pd.read_csv(out / "summary.csv")["algorithm"].tolist() == ["orthofl_chain", "fedasync"]
    capsys.readouterr()
    assert main(["run", str(path), "--only", "orthofl", "--out", str(tmp_path / "o2"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("simfl: --only: no entry named orthofl; the scenario has: orthofl_global, orthofl_chain, fedasync")
