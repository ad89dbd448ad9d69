"""Flower's wrapper strategies named in YAML with their inner strategy by name (DP with fixed server clipping)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("flwr")

import simfl  # noqa: E402
from simfl.errors import InputError  # noqa: E402
from simfl.schema import scenario as scenario_mod  # noqa: E402
from tests.flower.test_flower import events, metrics, scenario  # noqa: E402

DP = "DifferentialPrivacyServerSideFixedClipping"


def test_the_dp_wrapper_by_name_without_noise_or_clipping_is_its_inner_strategy(tmp_path: Path) -> None:
    """Noise 0 and a clipping norm no update reaches: the wrapper changes nothing, so its runs equal FedAvg's
    (the inner strategy given by name, then with its own options), the same clients in the same rounds."""
    raw = scenario([
        {"name": "flower", "strategy": "FedAvg", "options": {"fraction_train": 0.5}},
        {"name": "flower", "strategy": DP, "label": "dp_by_name",
         "options": {"strategy": {"strategy": "FedAvg", "options": {"fraction_train": 0.5}},
                     "noise_multiplier": 0.0, "clipping_norm": 1e9, "num_sampled_clients": 3}},
    ], budget={"time": 80})
    simfl.run(raw, out=tmp_path / "out")
    out = tmp_path / "out"
    pd.testing.assert_frame_equal(events(out, "FedAvg"), events(out, "dp_by_name"))
    a, b = metrics(out, "FedAvg"), metrics(out, "dp_by_name")
    assert (a["accuracy"] - b["accuracy"]).abs().max() <= 1 / 150
    assert (a["loss"] - b["loss"]).abs().max() < 1e-4


def test_the_dp_wrapper_with_noise_changes_the_model(tmp_path: Path) -> None:
    raw = scenario([
        {"name": "flower", "strategy": "FedAvg"},
        {"name": "flower", "strategy": DP, "label": "dp",
         "options": {"strategy": "FedAvg", "noise_multiplier": 1.0, "clipping_norm": 0.5, "num_sampled_clients": 6}},
    ], budget={"time": 60})
    simfl.run(raw, out=tmp_path / "out")
    assert not metrics(tmp_path / "out", "FedAvg")["loss"].equals(metrics(tmp_path / "out", "dp")["loss"])


@pytest.mark.parametrize(("inner", "words"), [
    ("NoSuchStrategy", "is not a strategy of flwr.serverapp.strategy"),
    ("flwr.server.strategy:FedAvg", "wraps a Strategy, and flwr.server.strategy:FedAvg is not one"),
    ({"strategy": "FedAvg", "options": {"fraction_train": "half"}}, "fraction_train"),
    ({"strategy": "FedAvg", "options": ["x"]}, "must be a mapping"),
    (3, "strategy"),
])
def test_a_bad_inner_strategy_is_one_line_at_validation(inner: Any, words: str) -> None:
    raw = scenario([{"name": "flower", "strategy": DP,
                     "options": {"strategy": inner, "noise_multiplier": 0.1, "clipping_norm": 1.0,
                                 "num_sampled_clients": 3}}])
    with pytest.raises(InputError) as info:
        scenario_mod.validate(raw)
    assert words in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_a_wrapped_strategy_resumes_byte_identical(tmp_path: Path) -> None:
    """The wrapper's and its inner FedYogi's state (moments) go into the checkpoint and come back: a run stopped
    after its second round and resumed gives the files of one that never stopped."""
    import yaml

    from tests.reliability.helpers import interrupted_run

    raw = scenario([{"name": "fedavg", "clients_per_round": 6},
                    {"name": "flower", "strategy": DP, "label": "dp",
                     "options": {"strategy": {"strategy": "FedYogi", "options": {"eta": 0.05}}, "noise_multiplier": 0.5,
                                 "clipping_norm": 2.0, "num_sampled_clients": 6}}], budget={"time": 60})
    _, partial = interrupted_run(tmp_path, raw)
    assert (partial / "running" / "dp" / "seed0.pt").exists()  # stopped mid-way, from its checkpoint
    from simfl.cli import main

    assert main(["run", "--resume", str(tmp_path / "out"), "--quiet"]) == 0
    (tmp_path / "full.yaml").write_text(yaml.safe_dump(raw))
    assert main(["run", str(tmp_path / "full.yaml"), "--out", str(tmp_path / "full"), "--quiet"]) == 0
    for name in ("metrics.csv", "events.csv"):
        assert (tmp_path / "out" / "dp" / "seed0" / name).read_bytes() == \
            (tmp_path / "full" / "dp" / "seed0" / name).read_bytes()
