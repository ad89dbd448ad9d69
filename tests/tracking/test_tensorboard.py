"""TensorBoard event files hold the values of metrics.csv and events.csv."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.tracking.conftest import events_of, metrics_of, tracked_scenario

pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_tensorboard_logs_read_back(run_tracked, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_tracked(tracked_scenario(tmp_path, tensorboard={}))
    root = tmp_path / "tensorboard" / "out"  # the default: beside the output folder
    for algorithm in ("fedasync", "fedavg"):
        scalars = _scalars(root / algorithm / "seed0")
        metrics = metrics_of(out, algorithm)
        for column in ("accuracy", "loss", "virtual_time", "updates"):
            logged = scalars[f"eval/{column}"]
            assert [s for s, _ in logged] == metrics["virtual_time"].round().astype(int).tolist()  # virtual seconds
            assert [v for _, v in logged] == pytest.approx(metrics[column].tolist(), rel=1e-6)
        wall = [v for _, v in scalars["eval/wall_seconds"]]
        assert wall == sorted(wall) and wall[0] >= 0
        arrivals = events_of(out, algorithm).query("event == 'arrival'")
        staleness = scalars["update/staleness"]
        assert [s for s, _ in staleness] == arrivals["update"].astype(int).tolist()
        assert [v for _, v in staleness] == arrivals["staleness"].astype(float).tolist()
        assert len(scalars["update/in_flight"]) == len(arrivals)
        if algorithm == "fedasync":
            # 3 clients: the 2 others train while an arrival is aggregated, less those arriving at the same instant
            times = arrivals["time"].tolist()
            expected = [2.0 - times[i + 1 :].count(t) for i, t in enumerate(times)]
            assert [v for _, v in scalars["update/in_flight"]] == expected and min(expected) == 1.0
            assert [v for _, v in scalars["update/weight"]] == pytest.approx(arrivals["weight"].tolist(), rel=1e-6)
        else:
            assert "update/weight" not in scalars
    # the comparison of the complete folder: one more run, its numbers those of comparison.csv
    comparison = pd.read_csv(out / "comparison.csv")
    scalars = _scalars(root / "comparison")
    for row in comparison.to_dict("records"):
        for column in ("final_accuracy", "time_to_target", "ratio", "reached"):
            assert scalars[f"comparison/{row['entry']}/{column}"] == [(0, pytest.approx(row[column], rel=1e-6))]
    acc = EventAccumulator(str(root / "comparison"), size_guidance={"tensors": 0})
    acc.Reload()
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in acc.Tags()["tensors"]}
    assert "verdict" in texts["summary/text_summary"] and "# Comparison: tiny" in texts["comparison.md/text_summary"]


def test_tensorboard_dir_given(run_tracked, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path / "..")
    run_tracked(tracked_scenario(tmp_path, tensorboard={"dir": "logs/tb"}))  # relative to the scenario file
    assert list((tmp_path / "logs" / "tb" / "fedavg" / "seed0").glob("events.out.tfevents.*"))
    assert not (tmp_path / "tensorboard").exists() and not list((tmp_path / "out").rglob("*tfevents*"))


def test_resumed_run_logs_its_whole_history(tmp_path: Path, write_scenario) -> None:  # type: ignore[no-untyped-def]
    """Stopped after a checkpoint and resumed: the tracker run of the resumed run holds every evaluation."""
    from simfl.cli import main
    from tests.reliability.helpers import interrupted_run

    raw = tracked_scenario(tmp_path, tensorboard={"dir": str(tmp_path / "tb")})
    raw["latency"] = {"model": "exponential", "mean": 1.5}
    raw["budget"] = {"time": 12.0}
    interrupted_run(tmp_path, raw)
    assert main(["run", "--resume", str(tmp_path / "out"), "--quiet"]) == 0
    ref = tmp_path / "ref"
    raw["tracking"] = None
    assert main(["run", str(write_scenario(raw, "ref.yaml")), "--out", str(ref), "--quiet"]) == 0
    for name in ("metrics.csv", "events.csv"):
        assert (tmp_path / "out" / "fedavg" / "seed0" / name).read_bytes() == (ref / "fedavg" / "seed0" / name).read_bytes()
    folder = tmp_path / "tb" / "fedavg" / "seed0"
    assert len(list(folder.glob("events.out.tfevents.*"))) == 2  # the stopped run's, then the resumed run's
    scalars = _scalars(folder)
    assert [v for _, v in scalars["eval/accuracy"]] == pytest.approx(metrics_of(ref, "fedavg")["accuracy"].tolist())
    assert [s for s, _ in scalars["update/staleness"]] == events_of(ref, "fedavg").query("event == 'arrival'")["update"].tolist()
