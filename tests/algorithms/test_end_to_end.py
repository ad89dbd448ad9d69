"""Every registered algorithm runs end to end in the quickstart scenario (tiny budget)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simfl.algorithms import ALGORITHMS
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod

QUICKSTART = Path(__file__).resolve().parents[2] / "scenarios" / "quickstart.yaml"


@pytest.mark.parametrize("name", [n for n in ALGORITHMS if n != "serverapp"])  # a ServerApp needs a Flower App:
# tests/flower/test_flwr_run.py runs one end to end
def test_algorithm_runs_in_quickstart(name: str) -> None:
    extra = {"fedavg": ", clients_per_round: 4", "fedprox": ", clients_per_round: 4", "fedadam": ", clients_per_round: 4",
             "scaffold": ", clients_per_round: 4",
             "fedbuff": ", buffer: 3", "ca2fl": ", buffer: 3",
             "flower": ", strategy: FedAvg, options: {fraction_train: 0.4}"}.get(name, "")
    if name == "flower":
        pytest.importorskip("flwr")
    scn = scenario_mod.load(QUICKSTART, ["budget.time=60", "seeds=[0]", "train.epochs=1", "tune=null",
                                         f"algorithms=[{{name: {name}{extra}}}]"])
    fed = federation(scn, load_dataset(scn), 0)
    state = run_one(scn, fed, 0).state
    assert state.updates >= 4 and state.now == 60.0
    accs = [m.accuracy for m in state.metrics]
    assert all(0.0 <= a <= 1.0 for a in accs) and len(accs) == 4
    # The global model moved: its accuracy is not frozen at the initial model's.
    assert len({round(a, 6) for a in accs}) > 1
