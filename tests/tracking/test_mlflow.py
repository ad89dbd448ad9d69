"""MLflow's local store holds the values of metrics.csv, the scenario as parameters, and the artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.tracking.conftest import events_of, metrics_of, tracked_scenario

pytest.importorskip("mlflow")

from mlflow.tracking import MlflowClient  # noqa: E402


def test_mlflow_local_store_read_back(run_tracked, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = run_tracked(tracked_scenario(tmp_path, mlflow={"experiment": "tiny-tracked"}))
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # the default: beside the output folder
    experiment = client.get_experiment_by_name("tiny-tracked")
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"fedasync-seed0", "fedavg-seed0", "comparison"}
    summary = {row["algorithm"]: row for row in __import__("pandas").read_csv(out / "summary.csv").to_dict("records")}
    for algorithm in ("fedasync", "fedavg"):
        run = runs[f"{algorithm}-seed0"]
        assert run.info.status == "FINISHED"
        params = run.data.params
        assert params["algorithm.name"] == algorithm and params["seed"] == "0"
        assert params["data.dataset"] == "synthetic" and params["train.lr"] == "0.1"
        assert params["latency.seconds"] == "[1.0, 2.5, 4.0]" and params["eval.every"] == "2.0"
        metrics = metrics_of(out, algorithm)
        for column in ("accuracy", "loss", "virtual_time"):
            history = client.get_metric_history(run.info.run_id, f"eval/{column}")
            assert [h.step for h in history] == metrics["virtual_time"].round().astype(int).tolist()  # virtual seconds
            assert [h.value for h in history] == metrics[column].tolist()
        arrivals = events_of(out, algorithm).query("event == 'arrival'")
        history = client.get_metric_history(run.info.run_id, "update/staleness")
        assert [h.step for h in history] == arrivals["update"].astype(int).tolist()
        files = {f.path for f in client.list_artifacts(run.info.run_id)}
        assert files == {"scenario.yaml", "summary.json"}
        scenario = yaml.safe_load(Path(client.download_artifacts(run.info.run_id, "scenario.yaml", str(tmp_path)))
                                  .read_text())
        assert scenario["name"] == "tiny" and "mlflow" in scenario["tracking"]
        row = json.loads(Path(client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))).read_text())
        assert row["final_accuracy"] == summary[algorithm]["final_accuracy"]
        assert row["updates"] == summary[algorithm]["updates"]
        assert Path(client.get_run(run.info.run_id).info.artifact_uri.removeprefix("file://")).is_relative_to(
            tmp_path / "mlartifacts")
    # the comparison of the complete folder: one more run, its numbers those of comparison.csv
    run = runs["comparison"]
    assert run.info.status == "FINISHED" and run.data.params["baseline"] == "fedavg"
    for row in __import__("pandas").read_csv(out / "comparison.csv").to_dict("records"):
        for column in ("final_accuracy", "time_to_target", "ratio", "reached"):
            assert run.data.metrics[f"comparison/{row['entry']}/{column}"] == row[column]
    assert {f.path for f in client.list_artifacts(run.info.run_id)} == {"scenario.yaml", "comparison.md",
                                                                         "comparison.csv", "summary.json"}
    summary = json.loads(Path(client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))).read_text())
    assert summary["verdict"] in (out / "comparison.md").read_text()


def test_mlflow_file_store_and_several_trackers(run_tracked, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "store").as_uri()
    out = run_tracked(tracked_scenario(tmp_path, mlflow={"uri": uri}, tensorboard={}))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("tiny")  # default: the scenario name
    assert experiment is not None
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    history = client.get_metric_history(runs["fedavg-seed0"].info.run_id, "eval/accuracy")
    assert [h.value for h in history] == metrics_of(out, "fedavg")["accuracy"].tolist()
    assert not (tmp_path / "mlflow.db").exists() and (tmp_path / "tensorboard" / "out" / "fedasync").is_dir()


def test_mlflow_refusal_is_one_line(write_scenario, tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from simfl.cli import main

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    path = write_scenario(tracked_scenario(tmp_path, mlflow={"uri": (tmp_path / "store").as_uri()}))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("simfl: tracking.mlflow.uri: MLflow refuses file://")
    assert not (tmp_path / "out.partial").exists()


def test_parallel_sweep_cells_share_one_store(write_scenario, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Two worker processes write their cells' runs into one new SQLite store, each run finished."""
    from simfl.cli import main

    raw = tracked_scenario(tmp_path, mlflow={})
    raw["sweep"] = {"train.lr": [0.05, 0.1, 0.2]}
    out = tmp_path / "sweep"
    assert main(["sweep", str(write_scenario(raw)), "--out", str(out), "--workers", "2"]) == 0
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    runs = [r for r in runs if r.info.run_name != "comparison"]  # each cell's comparison, one per cell
    assert sorted((r.data.params["train.lr"], r.info.run_name, r.info.status) for r in runs) == [
        (lr, f"{a}-seed0", "FINISHED") for lr in ("0.05", "0.1", "0.2") for a in ("fedasync", "fedavg")
    ]
