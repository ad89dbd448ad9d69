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
file is in place; an interrupted run leaves only the ``.partial`` folder. The
rules of :mod:`simfl.outdir` decide what may be replaced: only folders simfl
wrote, and of those only the files simfl put there.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

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


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to ``path`` through a temporary file and an atomic rename."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns), extrasaction="raise")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if v is None else v for k, v in row.items()})
    os.replace(tmp, path)


def write_run(folder: OutputFolder, algorithm: str, seed: int, state: SimState) -> None:
    """metrics.csv and events.csv of one run (and layer_changes.npy when the scenario records a layer)."""
    metric_rows = [m.row() for m in state.metrics]
    columns = list(metric_rows[0]) if metric_rows else ["virtual_time", "updates", "accuracy", "loss"]
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
