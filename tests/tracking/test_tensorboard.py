"""TensorBoard event files hold the values of metrics.csv and events.csv."""

from __future__ import annotations

from pathlib import Path

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
            assert [s for s, _ in logged] == list(range(len(metrics)))
            assert [v for _, v in logged] == pytest.approx(metrics[column].tolist(), rel=1e-6)
        wall = [v for _, v in scalars["eval/wall_seconds"]]
        assert wall == sorted(wall) and wall[0] >= 0
        arrivals = events_of(out, algorithm).query("event == 'arrival'")
        staleness = scalars["update/staleness"]
        assert [s for s, _ in staleness] == arrivals["update"].astype(int).tolist()
        assert [v for _, v in staleness] == arrivals["staleness"].astype(float).tolist()
        assert len(scalars["update/in_flight"]) == len(arrivals)
        if algorithm == "fedasync":  # 3 clients: the 2 others train while one arrival is aggregated
            assert {v for _, v in scalars["update/in_flight"]} == {2.0}
            assert [v for _, v in scalars["update/weight"]] == pytest.approx(arrivals["weight"].tolist(), rel=1e-6)
        else:
            assert "update/weight" not in scalars


def test_tensorboard_dir_given(run_tracked, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    run_tracked(tracked_scenario(tmp_path, tensorboard={"dir": "logs/tb"}))
    assert list((tmp_path / "logs" / "tb" / "fedavg" / "seed0").glob("events.out.tfevents.*"))
    assert not (tmp_path / "tensorboard").exists() and not list((tmp_path / "out").rglob("*tfevents*"))
