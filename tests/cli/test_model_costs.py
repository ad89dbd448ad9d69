"""The table of built-in model costs equals what measuring gives, covers every shipped scenario, and keeps torch
out of ``simfl validate``."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from simfl.schema import estimate, model_costs, plugins
from simfl.schema.scenario import load

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").rglob("*.yaml"))


@pytest.mark.parametrize("entry", sorted(json.loads(model_costs.TABLE.read_text())))
def test_every_entry_is_what_measuring_gives(entry: str) -> None:
    config, shape, classes = json.loads(entry)
    model = plugins.KINDS["model"].configs()[config["name"]].model_validate(config)
    scenario = SimpleNamespace(model=model, data=SimpleNamespace(dataset="the table's"))
    measured = estimate.measure_model(scenario, estimate.DataShape(tuple(shape), classes, 1, 1))
    assert model_costs.key(model, shape, classes) == entry
    assert model_costs.known(model, shape, classes) == measured
    assert list(model_costs.known(model, shape, classes)[3]) == list(measured[3])  # the tensors in layout order


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_scenario_is_listed(path: Path) -> None:
    scenario = load(path)
    data = estimate.data_shape(scenario.data)
    listed = model_costs.known(scenario.model, data.shape, data.classes)
    assert listed is not None or scenario.model.name == "text", f"run python -m simfl.schema.measure_models {path}"

