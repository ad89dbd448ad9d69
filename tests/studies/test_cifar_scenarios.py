"""The CIFAR-10/100 paper and study scenarios run end to end on generated CIFAR files at tiny scale.

CIFAR data is not available offline, so the shipped scenario files are run as
written (model, partition, delays, every algorithm) with only the data root,
the training length and the budget overridden.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from simfl.cli import main
from tests.data.helpers import write_cifar

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--seeds", "0", "--set", "train.epochs=1", "--set", "train.batch_size=4", "--set", "eval.every=1000"]


def finished_runs(folder: Path) -> pd.DataFrame:
    summary = pd.read_csv(folder / "summary.csv")
    assert all(0.0 <= a <= 1.0 for a in summary["final_accuracy"]) and not summary["final_accuracy"].isna().any()
    return summary


EVERY = ["orthofl", "fedasync", "fedbuff", "ca2fl", "fedavg", "fedprox", "fedadam"]


@pytest.mark.parametrize(("name", "classes", "per_batch", "entries"), [
    ("cifar10", 10, 8, EVERY),  # VGG11: every entry of the file
    ("cifar100", 100, 400, ["orthofl", "fedavg"]),  # MobileNetV2 (batch norm kept local or averaged): one async, one sync
])
def test_paper_cifar_scenario_runs_every_algorithm(tmp_path: Path, name: str, classes: int, per_batch: int,
                                                   entries: list[str]) -> None:
    """The whole file is validated; the entries run are every one on VGG11 and two on MobileNetV2, whose
    training step costs about ten times VGG11's at this scale under the portable kernels."""
    write_cifar(tmp_path / "data", classes, per_batch=per_batch, test_rows=20)
    out = tmp_path / "out"
    scenario = ROOT / "scenarios" / "paper" / f"{name}.yaml"
    only = [] if entries == EVERY else ["--only", ",".join(entries)]
    batch = [] if name == "cifar10" else ["--set", "train.batch_size=64"]  # MobileNetV2: few steps of many samples
    assert main(["run", str(scenario), "--set", f"data.root={tmp_path / 'data'}", *TINY, *batch, *only,
                 "--set", "budget={time: 5000, updates: 10}", "--out", str(out), "--quiet"]) == 0
    summary = finished_runs(out)
    assert summary["algorithm"].tolist() == entries
    assert (summary["updates"] == 10).all()  # async: 10 arrivals; sync: one round of 10 clients


def test_cifar10_heterogeneity_sweep_runs_every_cell(tmp_path: Path) -> None:
    write_cifar(tmp_path / "data", 10, per_batch=8, test_rows=20)
    out = tmp_path / "sweep"
    scenario = ROOT / "scenarios" / "studies" / "heterogeneity_cifar10.yaml"
    keep_two = "algorithms=[{name: orthofl}, {name: fedavg, clients_per_round: 2}]"
    assert main(["sweep", str(scenario), "--set", f"data.root={tmp_path / 'data'}", *TINY,
                 "--set", "budget={time: 5000, updates: 4}", "--set", keep_two, "--out", str(out)]) == 0
    cells = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert cells == [f"alpha={a}__seed=0" for a in ("0.01", "0.1", "0.5", "10000")]
    for cell in cells:
        summary = finished_runs(out / cell)
        assert summary["algorithm"].tolist() == ["orthofl", "fedavg"] and (summary["updates"] == 4).all()
        assert not any(math.isnan(t) for t in summary["virtual_time"])
