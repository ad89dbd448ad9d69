"""simfl's own rules over a Flower user's ClientApp score the global model through the app's evaluate handler.

The apps are :mod:`tests.flower.eval_apps`: a model of four numbers, from zeros; each train call adds 0.1 to every
number; node i + 1 (partition i) evaluates to ``eval_acc = mean(w) + 0.1 i`` on ``i + 1`` examples. Three nodes
with constant latencies 10, 12 and 20 s, FedBuff of buffer 2, the grid every 20 s:

- t = 0: w = 0. Flower's weighted mean over the nodes (examples 1, 2, 3, total 6):
  accuracy = (0 * 1 + 0.1 * 2 + 0.2 * 3) / 6 = 0.8 / 6 = 0.1333..., loss = 1 - that = 0.8666...
- t = 10 and 12: clients 0 and 1 arrive (deltas 0.1, staleness weight 1): w = 0.5 * (0.1 + 0.1) = 0.1.
  t = 20: clients 2 and 0 arrive, each dispatched before that flush (weight 1 / sqrt(2)):
  w = 0.1 + 0.5 * 2 * 0.1 / sqrt(2) = 0.1707107 (float32: 0.17071068286895752); the row, after those arrivals
  (4 updates): accuracy = 0.17071068286895752 + 0.1333... = 0.30404401620229...
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("flwr")

from simfl.algorithms.fedbuff import FedBuff  # noqa: E402
from simfl.cli import main  # noqa: E402
from simfl.train import app_evaluation  # noqa: E402
from simfl.train.app_evaluation import pick, weighted  # noqa: E402
from tests.flower.eval_apps import app_folder  # noqa: E402

SETS = ("--set", "latency={model: constant, seconds: [10, 12, 20]}", "--set", "eval.every=20",
        "--set", "algorithms=[{name: fedbuff, buffer: 2}]")
W20 = 0.17071068286895752
"""The global model's mean at t = 20 s (module docstring), as float32 gives it."""


def flwr(folder: Path, out: Path, *extra: str) -> int:
    return main(["flwr", "run", str(folder), "--out", str(out), "--quiet", "--workers", "1", *SETS, *extra])


def test_weighted_is_flowers_aggregation_by_examples() -> None:
    """Examples 1 and 3 (factors 1/4 and 3/4): acc 0.2 * 0.25 + 0.6 * 0.75 = 0.5; a metric only the second reply
    holds is that reply's value (its factor over the replies holding it: 1)."""
    out = weighted([{"num-examples": 1, "acc": 0.2}, {"num-examples": 3, "acc": 0.6, "eval_loss": 2.0}])
    assert out == {"acc": pytest.approx(0.5, abs=1e-15), "eval_loss": 2.0}
    assert pick(out, app_evaluation.ACCURACY_KEYS) == ("acc", out["acc"])
    assert pick(out, app_evaluation.LOSS_KEYS) == ("eval_loss", 2.0)
    assert pick({"mse": 1.0}, app_evaluation.ACCURACY_KEYS)[0] is None


def test_fedbuff_over_a_clientapp_scores_through_its_evaluate_handler(tmp_path: Path) -> None:
    """FedBuff over the ClientApp (its ServerApp gives no evaluate_fn, simfl holds no test set): every row of
    metrics.csv is the app's federated evaluation, as the module docstring computes; every node is asked, with
    server-round the model's update count; a row whose weights did not change is not asked again; two runs of the
    seed give byte-identical files."""
    log = tmp_path / "seen.jsonl"
    folder = app_folder(tmp_path / "app", "client_app", config=f'log = "{log}"\n')
    assert flwr(folder, tmp_path / "a") == 0
    metrics = pd.read_csv(tmp_path / "a" / "fedbuff" / "seed0" / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 30.0] and list(metrics["updates"]) == [0, 4, 6]
    assert metrics["accuracy"].iloc[0] == pytest.approx(0.8 / 6, abs=1e-15)
    assert metrics["loss"].iloc[0] == pytest.approx(1 - 0.8 / 6, abs=1e-15)
    assert metrics["accuracy"].iloc[1] == pytest.approx(W20 + 0.8 / 6, abs=1e-12)
    assert metrics["accuracy"].notna().all() and metrics["accuracy"].is_monotonic_increasing
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(s["node"], s["server-round"]) for s in seen] == [(n, u) for u in (0, 4, 6) for n in (1, 2, 3)]
    assert seen[3]["mean"] == pytest.approx(W20, abs=1e-15)
    log.unlink()
    assert flwr(folder, tmp_path / "b") == 0
    for name in ("metrics.csv", "events.csv"):
        assert (tmp_path / "a" / "fedbuff" / "seed0" / name).read_bytes() == \
            (tmp_path / "b" / "fedbuff" / "seed0" / name).read_bytes(), name
    comparison = pd.read_csv(tmp_path / "a" / "comparison.csv")  # the verdict reads the app's accuracy
    assert comparison["final_accuracy"].iloc[0] == metrics["accuracy"].iloc[-1] and comparison["reached"].iloc[0] == 1


def test_a_legacy_client_evaluates_too(tmp_path: Path) -> None:
    """A NumPyClient's evaluate (loss 1 - mean(w), accuracy mean(w) + 0.1 i on i + 1 examples): at t = 0 accuracy
    0.8 / 6 and loss 1 (its loss arrives as eval_loss, the row's loss)."""
    folder = app_folder(tmp_path / "app", "legacy_app")
    assert flwr(folder, tmp_path / "o") == 0
    metrics = pd.read_csv(tmp_path / "o" / "fedbuff" / "seed0" / "metrics.csv")
    assert metrics["accuracy"].iloc[0] == pytest.approx(0.8 / 6, abs=1e-15) and metrics["loss"].iloc[0] == 1.0
    assert metrics["accuracy"].iloc[1] == pytest.approx(W20 + 0.8 / 6, abs=1e-12)


def test_an_app_reporting_no_accuracy_fills_the_loss_and_says_so_once(tmp_path: Path,
                                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """Replies of eval_loss only: the loss column is 1 - mean(w) (1 at t = 0, 1 - W20 at 20 s), accuracy NaN, and
    one line on stderr names the app and the keys simfl reads."""
    app_evaluation._TOLD.clear()
    folder = app_folder(tmp_path / "app", "loss_only_app")
    capfd.readouterr()
    assert flwr(folder, tmp_path / "o") == 0
    err = [line for line in capfd.readouterr().err.splitlines() if "evaluate replies" in line]
    metrics = pd.read_csv(tmp_path / "o" / "fedbuff" / "seed0" / "metrics.csv")
    assert metrics["accuracy"].isna().all()
    assert metrics["loss"].iloc[0] == 1.0 and metrics["loss"].iloc[1] == pytest.approx(1 - W20, abs=1e-15)
    assert len(err) == 1, err
    assert "tests.flower.eval_apps:loss_only_app" in err[0] and "no accuracy (none of 'accuracy'" in err[0], err
    assert "'eval_loss'" in err[0] and "accuracy stays empty (NaN)" in err[0], err


def test_a_resumed_run_scores_as_one_that_never_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Interrupted at its 5th update (a checkpoint after every update) and resumed: the same metrics.csv and
    events.csv, byte for byte, as a run that never stopped."""
    folder = app_folder(tmp_path / "app", "client_app")
    assert flwr(folder, tmp_path / "full", "--checkpoint-every", "1") == 0
    original = FedBuff.on_arrival

    def interrupted(self: FedBuff, arrival: object) -> object:
        if arrival.update == 5:  # type: ignore[attr-defined]
            raise KeyboardInterrupt
        return original(self, arrival)  # type: ignore[arg-type]

    monkeypatch.setattr(FedBuff, "on_arrival", interrupted)
    assert flwr(folder, tmp_path / "cut", "--checkpoint-every", "1") == 130
    monkeypatch.undo()
    assert main(["flwr", "run", str(folder), "--resume", str(tmp_path / "cut"), "--quiet", "--workers", "1"]) == 0
    for name in ("metrics.csv", "events.csv"):
        full = (tmp_path / "full" / "fedbuff" / "seed0" / name).read_bytes()
        assert full == (tmp_path / "cut" / "fedbuff" / "seed0" / name).read_bytes(), name
    assert not math.isnan(pd.read_csv(tmp_path / "cut" / "fedbuff" / "seed0" / "metrics.csv")["accuracy"].iloc[-1])
