"""Hostile input, class 10: the judgement calls, settled (docs/errors.md).

``true``/``false`` where only a number belongs is refused in one line by validate and run alike (pydantic
read ``concurrency: true`` as 1); numeric text stays a number (YAML 1.1 reads ``1e-3`` as text).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from simfl.schema import scenario as scenario_mod
from simfl.schema.scenario import set_path
from tests.conftest import tiny_scenario
from tests.reliability.hostile import cli

NUMBERS = [
    "train.epochs", "train.batch_size", "train.lr", "train.momentum", "budget.time", "budget.updates", "eval.every",
    "data.partition.clients", "data.train_size", "algorithms[0].alpha", "server.concurrency", "server_time",
    "rounds.deadline", "availability.p", "availability.rejoin_delay", "latency.seconds[1]",
]
"""Scenario keys that hold a number (or a number or null)."""


def _raw(key: str, value: Any) -> dict[str, Any]:
    raw = tiny_scenario()
    if key.startswith("rounds."):
        raw["algorithms"] = [{"name": "fedavg", "clients_per_round": 2}]
    if key.startswith("server."):
        raw["server"] = {"concurrency": 2}
    if key.startswith("availability."):
        raw["availability"] = {"p": 0.1}
    if key.startswith("rounds."):
        raw["rounds"] = {"deadline": 3.0}
    set_path(raw, key, value, "test", create=True)
    return raw


@pytest.mark.parametrize("key", NUMBERS)
@pytest.mark.parametrize("value", [True, False])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_boolean_where_a_number_belongs_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str,
                                                     value: bool, command: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(_raw(key, value)))
    argv: list[Any] = [command, path] + (["--out", tmp_path / "out", "--quiet"] if command == "run" else [])
    _, err = cli(capsys, argv, "10 judgement calls", expect=2)
    assert f"must be a number, got {'true' if value else 'false'}" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["1e-3", "5e-2", "0.1", "1E-2"])
def test_numeric_text_is_the_number(text: str) -> None:
    """YAML 1.1 reads these as text; they stay numbers, as users write them."""
    raw = yaml.safe_load(yaml.safe_dump(tiny_scenario()).replace("lr: 0.1", f"lr: {text}"))
    assert isinstance(raw["train"]["lr"], str) or text == "0.1"
    assert scenario_mod.validate(raw).train.lr == pytest.approx(float(text))
