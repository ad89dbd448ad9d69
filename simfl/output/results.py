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
    <algorithm>/seed<k>/federated.csv  only for a Flower strategy that evaluates on clients: one row per
                                     round (round, update, nodes, the aggregated metrics)
    <algorithm>/seed<k>/train.csv    only for a Flower strategy whose aggregation returns metrics: one row per
                                     round (round, update, nodes, the aggregated training metrics)

A run writes into ``<out>.partial`` and renames it to ``<out>`` when every
file is in place; while a run goes, its metrics.csv and events.csv grow there at each
evaluation (:class:`GrowingRun`), so ``tail -f <out>.partial/<algorithm>/seed<k>/metrics.csv``
follows it; an interrupted run leaves only the ``.partial`` folder. The
rules of :mod:`simfl.outdir` decide what may be replaced: only folders simfl
wrote, and of those only the files simfl put there.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import pandas as pd

from simfl import outdir
from simfl.errors import InputError
from simfl.output.recording import LAYER_CHANGES, LayerRecorder
from simfl.sim.state import SimState

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
                raise InputError(str(self.stage), f"holds an unfinished run: continue it with `simfl run --resume {out}` "
                                 f"(a Flower App's: `simfl flwr run APP_DIR --resume {out}`), or pass --force to "
                                 "discard it and start afresh")
            kept = not outdir.remove(self.stage)  # a user's files in it stay
        else:
            kept = False
        outdir.make_dir(self.stage, exist_ok=kept)

    def path(self, *parts: str) -> Path:
        target = outdir.writable(self.stage, "/".join(parts))
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def discard(self) -> None:
        """Remove the staged folder (after a user mistake: nothing is left behind), if it is simfl's."""
        if outdir.is_ours(self.stage):
            with contextlib.suppress(OSError, InputError):
                outdir.remove(self.stage)

    def publish(self) -> Path:
        """Move the finished folder into place, keeping any file in an old ``<out>`` that simfl did not write."""
        outdir.mark_complete(self.stage)
        outdir.replace(self.stage, self.out)
        return self.out


DIALECT = "excel"
"""The one CSV dialect of every result table (shared by the final and the growing files): commas, minimal
quoting, CRLF line ends; None is an empty cell."""


def _csv_writer(fh: IO[str], columns: Sequence[str]) -> csv.DictWriter[str]:
    return csv.DictWriter(fh, fieldnames=list(columns), dialect=DIALECT, extrasaction="raise")


def _cells(row: dict[str, Any]) -> dict[str, Any]:
    return {k: "" if v is None else v for k, v in row.items()}


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> None:
    """Write rows to ``path`` through a temporary file and an atomic rename."""
    tmp = path.with_name(path.name + ".tmp")
    with outdir.room(path, tmp), tmp.open("w", newline="") as fh:
        writer = _csv_writer(fh, columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(_cells(row))
    os.replace(tmp, path)


def metric_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """metrics.csv's columns: those of the first row (every row has the same), or the four basic ones."""
    return list(rows[0]) if rows else ["virtual_time", "updates", "accuracy", "loss"]


def csv_text(columns: Sequence[str], rows: Iterable[dict[str, Any]], header: bool = True) -> str:
    """Rows as CSV text in the dialect of every result table (the same bytes :func:`write_csv` writes)."""
    buffer = io.StringIO(newline="")
    writer = _csv_writer(buffer, columns)
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow(_cells(row))
    return buffer.getvalue()


def csv_values_text(columns: Sequence[str], rows: Iterable[Sequence[Any]], header: bool = True) -> str:
    """Rows given as their values in ``columns``' order as CSV text: the bytes :func:`csv_text` writes for the same
    rows as dicts, without a dict per row (events.csv has a row per arrival)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, dialect=DIALECT)
    if header:
        writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


Append = Callable[[str, str, bool], None]
"""Receives (file name, CSV text, fresh): append the text to the run's file, or start the file anew when fresh."""


class GrowingRun:
    """metrics.csv and events.csv of one run, grown at each evaluation while the run goes.

    Called as the engine's ``progress`` callback: it hands the rows added since the last call,
    as CSV text, to ``append`` (which writes them wherever the run's files are kept: the
    staging folder, or the machine that launched a run sent elsewhere), so ``tail -f`` shows
    a run as it goes. The rows are written exactly as :func:`run_files` writes them, which
    replace both files when the run ends; the first call starts both files anew (a resumed
    run's history included, dropping rows an interrupted run wrote after its checkpoint).
    The text is kept, so that :func:`run_files` need not write a row per arrival twice
    (:meth:`handed_on`).
    """

    def __init__(self, append: Append) -> None:
        self.append = append
        self.written: dict[str, int | None] = {"metrics": None, "events": None}
        """Rows handed on per file; None until the file is started."""
        self.pieces: dict[str, list[bytes]] = {"metrics": [], "events": []}
        """Each file as handed on so far, in pieces (bytes: the whole file is then one more copy, not two)."""

    def __call__(self, state: SimState) -> None:
        """Hand on the new metrics and events rows of ``state``."""
        metrics, events = state.metrics, state.events
        if metrics:
            columns = metric_columns([metrics[0].row()])
            self._grow("metrics", len(metrics), lambda start, header: csv_text(
                columns, (m.row() for m in metrics[start:]), header))
        self._grow("events", len(events), lambda start, header: csv_values_text(
            state.event_columns(), state.event_rows(start), header))

    def _grow(self, name: str, count: int, text: Callable[[int, bool], str]) -> None:
        """Hand on rows ``start`` to ``count`` of file ``name`` (``text(start, header)``: them as CSV text)."""
        done = self.written[name]
        if done is None or count > done:
            piece = text(done or 0, done is None)
            self.append(f"{name}.csv", piece, done is None)
            self.pieces[name].append(piece.encode())
        self.written[name] = count

    def handed_on(self, state: SimState) -> dict[str, bytes]:
        """The files of ``state`` whose every row was handed on, as handed on, by name (``metrics.csv``,
        ``events.csv``): :func:`run_files` need not write them again. Given once (the pieces are let go)."""
        rows = {"metrics": len(state.metrics), "events": len(state.events)}
        pieces, self.pieces = self.pieces, {name: [] for name in self.pieces}
        return {f"{name}.csv": b"".join(text) for name, text in pieces.items() if text and self.written[name] == rows[name]}


def append_to(folder: Path) -> Append:
    """An :data:`Append` writing into ``folder`` (the run's folder in the staging folder)."""

    def append(name: str, text: str, fresh: bool) -> None:
        stage = folder.parent.parent  # <stage>/<algorithm>/seed<k>
        target = outdir.writable(stage, f"{folder.parent.name}/{folder.name}/{name}")
        with outdir.room(target, size=None if fresh or not target.is_file() else target.stat().st_size):
            folder.mkdir(parents=True, exist_ok=True)
            with target.open("w" if fresh else "a", newline="") as fh:
                fh.write(text)

    return append


def run_files(state: SimState, tables: Mapping[str, Sequence[dict[str, Any]]] | None = None,
              written: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """The files of one run, by name: metrics.csv, events.csv (and layer_changes.npy when a layer is recorded,
    ``<name>.csv`` for each of the algorithm's non-empty ``tables``, their columns in order of appearance).
    ``written``: those of them already written for ``state`` (:meth:`GrowingRun.handed_on`), taken as they are."""
    files = dict(written or {})
    if "metrics.csv" not in files:
        metric_rows = [m.row() for m in state.metrics]
        files["metrics.csv"] = csv_text(metric_columns(metric_rows), metric_rows).encode()
    if "events.csv" not in files:
        files["events.csv"] = csv_values_text(state.event_columns(), state.event_rows()).encode()
    for name, rows in (tables or {}).items():
        if rows:
            columns = list(dict.fromkeys(key for row in rows for key in row))
            files[f"{name}.csv"] = csv_text(columns, rows).encode()
    changes = LayerRecorder.stacked(state)
    if changes is not None:
        buffer = io.BytesIO()
        np.save(buffer, changes)
        files[LAYER_CHANGES + ".npy"] = buffer.getvalue()
    return files


def write_run(folder: OutputFolder, algorithm: str, seed: int, files: dict[str, bytes]) -> None:
    """Write one run's files (:func:`run_files`) into ``<algorithm>/seed<k>/`` of ``folder``, each atomically."""
    for name, data in files.items():
        path = folder.path(algorithm, f"seed{seed}", name)
        tmp = path.with_name(path.name + ".tmp")
        with outdir.room(path, tmp):
            tmp.write_bytes(data)
        os.replace(tmp, path)


def summary_row(algorithm: str, seed: int, state: SimState, wall_seconds: float) -> dict[str, Any]:
    """The summary.csv row of one run (time_to_target is filled in by :func:`simfl.output.report.add_time_to_target`)."""
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
    from simfl.output.tables import read_table

    return read_table(out / algorithm / f"seed{seed}" / "metrics.csv", {"virtual_time": "finite", "accuracy": "number"},
                      "evaluations")


def nonfinite_losses(metrics: pd.DataFrame) -> list[float]:
    """The evaluation times at which a run's loss is not finite (NaN or infinite) after a finite one: the model's
    outputs were not finite there, so its accuracy there is not a trained model's. A loss never reported (NaN
    throughout) says nothing."""
    finite = _finite_losses(metrics)
    return [float(t) for t in metrics["virtual_time"].to_numpy()[~finite & (finite.cumsum() > 0)]]


def _finite_losses(metrics: pd.DataFrame) -> np.ndarray:
    """Per evaluation, whether its loss is finite (all False when no loss is reported)."""
    if "loss" not in metrics:
        return np.zeros(len(metrics), dtype=bool)
    return np.isfinite(pd.to_numeric(metrics["loss"], errors="coerce").to_numpy(dtype=float))


def broken_at(metrics: pd.DataFrame) -> float | None:
    """The time from which a run's loss is not finite through its last evaluation, after a finite one: the model
    broke for the rest of the run (NaN weights, whose accuracy is a constant guess's); None if its last loss is
    finite. Losses not finite for a while and finite again (:func:`nonfinite_losses`) do not count: the weights
    were finite (e.g. a batch-norm running variance stepped below zero, and stepped back above it)."""
    finite = _finite_losses(metrics)
    if not finite.any() or finite[-1]:
        return None
    return float(metrics["virtual_time"].iloc[int(np.flatnonzero(finite)[-1]) + 1])


def loss_note(metrics: pd.DataFrame) -> str | None:
    """What a run's not-finite evaluation losses say, in a phrase (``simfl run``'s line per finished run and
    ``simfl report``'s notes): the model broke, from when; or at how many of its evaluations, over which times,
    the loss was not finite and finite again. None when it always was finite."""
    times = nonfinite_losses(metrics)
    if not times:
        return None
    broke = broken_at(metrics)
    if broke is not None and times[0] == broke:
        return f"the model broke, its loss is not finite from {broke:g} s to the end"
    span = f"{times[0]:g} s" if len(times) == 1 else f"{times[0]:g}-{times[-1]:g} s"
    return (f"the loss is not finite at {len(times)} of {len(metrics)} evaluations ({span})"
            + ("" if broke is None else f"; the model broke from {broke:g} s to the end"))


def state_loss_note(state: SimState) -> str | None:
    """:func:`loss_note` of a finished simulation's evaluations."""
    return loss_note(pd.DataFrame([m.row() for m in state.metrics]))
