"""W&B in offline mode writes a run folder holding the run's values and summary; nothing goes over the network."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.tracking.conftest import metrics_of, tracked_scenario

pytest.importorskip("wandb")

from wandb.proto import wandb_internal_pb2  # noqa: E402

BLOCK = 32768


def records(path: Path) -> Iterator[Any]:
    """The records of an offline run file (``run-<id>.wandb``): a 7-byte file header, then records in a
    block-framed log (each chunk: CRC 4 bytes, length 2, type 1 = whole, 2/3/4 = first/middle/last)."""
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, parts = 7, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a chunk header is padding
            pos += BLOCK - pos % BLOCK
            continue
        length, kind = int.from_bytes(data[pos + 4 : pos + 6], "little"), data[pos + 6]
        parts += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(parts)
            parts = b""
            yield record


def _key(item: Any) -> str:
    return str(item.key or "/".join(item.nested_key))


def read_run(path: Path) -> tuple[str, dict[str, Any], list[dict[str, Any]]]:
    """(run name, final summary, history rows) of one offline run file."""
    name, summary, history = "", {}, []
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            name = record.run.display_name
        elif kind == "summary":
            summary.update({_key(i): json.loads(i.value_json) for i in record.summary.update})
        elif kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
    return name, summary, history


def test_wandb_offline_run_folder(run_tracked, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-env"))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = run_tracked(tracked_scenario(tmp_path, wandb={"project": "tiny-project"}))
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))  # the default: beside the output folder
    assert len(folders) == 3  # a run per (entry, seed), and the comparison
    runs = {}
    for folder in folders:
        (file,) = folder.glob("run-*.wandb")
        name, summary, history = read_run(file)
        runs[name] = (summary, history)
    assert set(runs) == {"fedasync-seed0", "fedavg-seed0", "comparison"}
    for row in pd.read_csv(out / "summary.csv").to_dict("records"):
        summary, history = runs[f"{row['algorithm']}-seed0"]
        for key in ("final_accuracy", "best_accuracy", "updates", "virtual_time"):
            assert summary[key] == pytest.approx(row[key])
        evaluations = [h for h in history if "eval/virtual_time" in h]  # the x-axis of eval/* (virtual seconds)
        metrics = metrics_of(out, row["algorithm"])
        assert [h["eval/virtual_time"] for h in evaluations] == metrics["virtual_time"].tolist()
        assert [h["eval/accuracy"] for h in evaluations] == metrics["accuracy"].tolist()
        assert [h["update/t"] for h in history if "update/t" in h] == list(range(1, row["updates"] + 1))
    summary, history = runs["comparison"]
    assert summary["verdict"] in (out / "comparison.md").read_text()
    for row in pd.read_csv(out / "comparison.csv").to_dict("records"):
        assert history[0][f"comparison/{row['entry']}/final_accuracy"] == pytest.approx(row["final_accuracy"])
    assert not (tmp_path / "wandb-env").exists()
