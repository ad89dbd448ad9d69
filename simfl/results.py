"""Result files of a scenario run, written so that a folder is never left half-written.

Layout of ``<out>/``::

    .simfl                           marker: simfl wrote this folder; lists the files it put there
    scenario.yaml                    the resolved scenario (defaults filled in)
    summary.csv                      one row per (algorithm, seed)
    accuracy.png                     accuracy vs virtual time, mean and band over seeds
    <algorithm>/seed<k>/metrics.csv  virtual_time, updates, accuracy, loss[, more scores]
    <algorithm>/seed<k>/events.csv   time, update, client, staleness, latency, dispatch_time, weight, event
    <algorithm>/seed<k>/layer_changes.npy  only with ``record: {layer: ...}``: change of that global
                                     tensor per aggregation, shape (aggregations, *layer shape)

A run writes into ``<out>.partial`` and renames it to ``<out>`` when every
file is in place; while a run goes, its metrics.csv and events.csv grow there at each
evaluation (:class:`GrowingRun`), so ``tail -f <out>.partial/<algorithm>/seed<k>/metrics.csv``
follows it; an interrupted run leaves only the ``.partial`` folder. The
rules of :mod:`simfl.outdir` decide what may be replaced: only folders simfl
wrote, and of those only the files simfl put there.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from simfl import outdir
from simfl.errors import InputError
from simfl.recording import LAYER_CHANGES, LayerRecorder
from simfl.sim.state import Event, SimState

SUMMARY_COLUMNS = [
    "algorithm", "seed", "final_accuracy", "best_accuracy", "updates", "virtual_time", "wall_seconds",
    "time_to_target",
]


class OutputFolder:
    """A results folder staged under ``<out>.partial`` and published atomically by :meth:`publish`."""

    def __init__(self, out: Path, force: bool = False, reopen: bool = False) -> None:
        """Stage a fresh ``<out>.partial``; with ``reopen``, continue the existing one (``--resume``).

        The folder rules of :mod:`simfl.outdir` apply: ``force`` replaces only a folder simfl
        wrote, and an unfinished ``.partial`` that ``--resume`` could continue only with ``force``.
        """
        self.out = out
        self.stage = out.with_name(out.name + ".partial") if out.name not in ("", ".", "..") else out / ".partial"
        outdir.check_path(self.stage, str(out))
        if reopen:
            outdir.check_path(out)
            if not (self.stage / "scenario.yaml").is_file():
                raise InputError(str(self.stage), "nothing to resume: no unfinished run's scenario.yaml here")
            return
        outdir.claim(out, force)
        if self.stage.exists() or self.stage.is_symlink():
            if (self.stage / "scenario.yaml").is_file() and not force:
                raise InputError(str(self.stage), f"holds an unfinished run: continue it with `simfl run --resume {out}`, "
                                 "or pass --force to discard it and start afresh")
            outdir.remove(self.stage)
        outdir.make_dir(self.stage)

    def path(self, *parts: str) -> Path:
        target = self.stage.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def discard(self) -> None:
        """Remove the staged folder (after a user mistake: nothing is left behind), if it is simfl's."""
        if outdir.is_ours(self.stage):
            shutil.rmtree(self.stage, ignore_errors=True)

    def publish(self) -> Path:
        """Move the finished folder into place, keeping any file in an old ``<out>`` that simfl did not write."""
        outdir.mark_complete(self.stage)
        outdir.replace(self.stage, self.out)
        return self.out


def _csv_writer(fh: IO[str], columns: Sequence[str]) -> csv.DictWriter[str]:
    """The one CSV dialect of every result table (shared by the final and the growing files)."""
    return csv.DictWriter(fh, fieldnames=list(columns), extrasaction="raise")


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: "" if v is None else v for k, v in row.items()}


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to ``path`` through a temporary file and an atomic rename."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as fh:
        writer = _csv_writer(fh, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(_cells(row))
    os.replace(tmp, path)


def metric_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """metrics.csv's columns: those of the first row (every row has the same), or the four basic ones."""
    return list(rows[0]) if rows else ["virtual_time", "updates", "accuracy", "loss"]


class GrowingRun:
    """metrics.csv and events.csv of one run, appended in the staging folder at each evaluation.

    Called as the engine's ``progress`` callback: it appends the rows added since the last call
    and flushes, so ``tail -f`` shows a run as it goes. The rows are written exactly as
    :func:`write_run` writes them, which replaces both files when the run ends; the first call
    rewrites the files from the start (a resumed run's history included, dropping rows an
    interrupted run wrote after its checkpoint).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.files: dict[str, tuple[IO[str], csv.DictWriter[str]]] = {}
        self.written = {"metrics": 0, "events": 0}

    def _writer(self, name: str, columns: Sequence[str]) -> csv.DictWriter[str]:
        if name not in self.files:
            self.folder.mkdir(parents=True, exist_ok=True)
            fh = (self.folder / f"{name}.csv").open("w", newline="")
            writer = _csv_writer(fh, columns)
            writer.writeheader()
            self.files[name] = (fh, writer)
        return self.files[name][1]

    def __call__(self, state: SimState) -> None:
        """Append the new metrics and events rows of ``state`` and flush both files."""
        metrics, events = state.metrics, state.events
        if metrics:
            writer = self._writer("metrics", metric_columns([metrics[0].row()]))
            writer.writerows(_cells(m.row()) for m in metrics[self.written["metrics"] :])
            self.written["metrics"] = len(metrics)
        writer = self._writer("events", Event.columns())
        writer.writerows(_cells(e.row()) for e in events[self.written["events"] :])
        self.written["events"] = len(events)
        for fh, _ in self.files.values():
            fh.flush()

    def close(self) -> None:
        """Close both files (before :func:`write_run` replaces them)."""
        for fh, _ in self.files.values():
            fh.close()
        self.files.clear()


def write_run(folder: OutputFolder, algorithm: str, seed: int, state: SimState) -> None:
    """metrics.csv and events.csv of one run (and layer_changes.npy when the scenario records a layer)."""
    metric_rows = [m.row() for m in state.metrics]
    columns = metric_columns(metric_rows)
    write_csv(folder.path(algorithm, f"seed{seed}", "metrics.csv"), columns, metric_rows)
    write_csv(
        folder.path(algorithm, f"seed{seed}", "events.csv"), Event.columns(), (e.row() for e in state.events)
    )
    changes = LayerRecorder.stacked(state)
    if changes is not None:
        np.save(folder.path(algorithm, f"seed{seed}", LAYER_CHANGES + ".npy"), changes)


def summary_row(algorithm: str, seed: int, state: SimState, wall_seconds: float) -> dict[str, Any]:
    """The summary.csv row of one run (time_to_target is filled in by :func:`simfl.report.add_time_to_target`)."""
    accs = [m.accuracy for m in state.metrics]
    return {
        "algorithm": algorithm, "seed": seed,
        "final_accuracy": accs[-1] if accs else float("nan"),
        "best_accuracy": max(accs) if accs else float("nan"),
        "updates": state.updates, "virtual_time": state.now, "wall_seconds": round(wall_seconds, 3),
        "time_to_target": None,
    }


def read_metrics(out: Path, algorithm: str, seed: int) -> pd.DataFrame:
    """metrics.csv of one run as a DataFrame."""
    from simfl.tables import read_table

    return read_table(out / algorithm / f"seed{seed}" / "metrics.csv", {"virtual_time": "finite", "accuracy": "number"},
                      "evaluations")
