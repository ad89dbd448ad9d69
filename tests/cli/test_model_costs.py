"""The table of built-in model costs equals what measuring gives, covers every shipped scenario, and keeps torch
out of ``simfl validate``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simfl.latency.base import counted
from simfl.models import measured
from simfl.schema import plugins
from simfl.schema.estimate import data_facts
from simfl.schema.scenario import load

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("entry", sorted(json.loads(measured.TABLE.read_text())))
def test_every_entry_is_what_measuring_gives(entry: str) -> None:
    config, shape, classes = json.loads(entry)
    model = plugins.KINDS["model"].configs()[config["name"]].model_validate(config)
    cost = measured.measure(plugins.lookup("model", model.name).build, model, tuple(shape), classes)
    assert measured.key(model, shape, classes) == entry
    listed = measured.known(model, shape, classes)
    assert listed == measured.ModelCost(cost.params, cost.bytes, counted(cost.flops), cost.tensors,
                                        activations=measured.activations_of(cost))
    assert listed is not None and cost.tensors is not None
    assert list(listed.tensors or ()) == list(cost.tensors)  # the tensors in layout order
    assert model.cost(tuple(shape), classes) == listed  # what the model's config states


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_scenario_is_listed(path: Path) -> None:
    scenario = load(path)
    data = data_facts(scenario.data)
    assert data is not None
    stated = measured.stated(scenario.model, data.shape, data.classes)
    assert stated is not None, f"run python -m simfl.schema.measure_models {path}"


@pytest.mark.parametrize("name", ["quickstart.yaml", "paper/mnist.yaml", "studies/cross_device.yaml"])
def test_validate_of_a_shipped_scenario_loads_no_torch(name: str) -> None:
    """``simfl validate`` of a scenario of built-in components reads configs and the table only: no torch, no
    numba, no pandas or matplotlib (its CPU time: ``python -m benchmarks.imports``)."""
    code = ("import sys; from simfl.cli import main; rc = main(['validate', sys.argv[1]]); "
            "print(rc, sorted(m for m in ('torch', 'numba', 'matplotlib', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(ROOT / "scenarios" / name)],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 []"


def test_validate_of_an_unlisted_model_loads_no_compiler(tmp_path: Path) -> None:
    """A model the table does not list is built and checked on the CPU, and in pure-latency mode its FLOPs are not
    counted: neither loads PyTorch's compiler (torch._dynamo, about 1.5 s), which the meta device's kernels and the
    FLOP counter import."""
    path = tmp_path / "unlisted.yaml"
    path.write_text(json.dumps({
        "name": "unlisted", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 200, "test_size": 10, "features": 5, "classes": 3,
                 "partition": {"kind": "iid", "clients": 10}},
        "model": {"name": "mlp", "hidden": [7]}, "latency": {"model": "lognormal", "mean": 5.0, "std": 2.0},
        "budget": {"updates": 100}, "eval": {"every": 10.0}, "algorithms": [{"name": "fedasync"}],
        "executor": {"kind": "none"}}))
    code = ("import sys; from simfl.cli import main; rc = main(['validate', sys.argv[1]]); "
            "print(rc, 'torch' in sys.modules, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 True False"
