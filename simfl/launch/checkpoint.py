"""Checkpoints of ``simfl run`` and the markers of an unfinished output folder.

Everything lives in the staging folder ``<out>.partial`` (see :mod:`simfl.output.results`):

``checkpoint.pt``
    The folder's own record, written only by the process that launched the runs,
    atomically (temporary file, fsync, rename) with ``torch.save`` and read back
    with ``torch.load(weights_only=True)``: plain dicts, lists, numbers, strings
    and tensors only. It holds the ``--checkpoint-every``, ``--checkpoint-wall`` and
    ``--verify`` settings and the summary rows of the (algorithm, seed) runs already
    finished (their metrics.csv and events.csv are already in the folder).
``running/<algorithm>/seed<k>.pt``
    One per run under way that has reached a checkpoint (by default every
    :data:`WALL_DEFAULT` wall seconds, see :mod:`simfl.sim.checkpoints`; also on the
    ``--checkpoint-every`` schedule), replaced at each one
    (same writing and reading rules): that run's simulation data
    (:meth:`simfl.sim.engine.Simulation.data`: virtual clock, clients with their
    rounds and start weights, the pending wake-ups as ``[kind, order, time, index]``
    rows, algorithm state, latency and failure random-stream states, evaluation
    cache, metrics and events so far) and the wall seconds it had cost. Runs go on
    side by side (:mod:`simfl.launch.units`), so each keeps its own file; it is removed
    when the run finishes. A folder of the first format (one ``current`` run inside
    ``checkpoint.pt``) is still read.
``INCOMPLETE``
    Present for as long as the folder is unfinished (also after a SIGKILL):
    what finished, which runs have a checkpoint, how it ended (e.g. interrupted
    by SIGINT) and the command that continues it.
``FAILED``
    In a published folder whose run was stopped by ``--verify`` (which run and
    which invariant) or could make no progress (which run and why); the files
    of the runs finished before it are complete and
    the stopped run's metrics.csv and events.csv hold its results so far.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simfl import outdir
from simfl.errors import InputError
from simfl.sim.clock import PRIORITY

CHECKPOINT_FILE = "checkpoint.pt"
RUNNING_DIR = "running"
INCOMPLETE_FILE = "INCOMPLETE"
FAILED_FILE = "FAILED"
FORMAT = "simfl-checkpoint/2"
FORMATS = ("simfl-checkpoint/1", FORMAT)
"""Formats of checkpoint.pt that are read (the first held one run under way as ``current``)."""
RUN_FORMAT = "simfl-run/1"
"""Format of a run's own checkpoint file under ``running/``."""

_EVERY_RE = re.compile(r"^\s*(?P<n>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>s?)\s*$")
_WALL_RE = re.compile(r"^\s*(?P<n>[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*(?P<unit>[smh]?)\s*$")
_WALL_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0}

WALL_DEFAULT = 300.0
"""Wall seconds between a run's checkpoints unless ``--checkpoint-wall`` says otherwise: a Ctrl-C or a kill loses
at most about this much of each run under way."""


@dataclass(frozen=True)
class Every:
    """A checkpoint schedule: every ``updates`` processed updates or every ``seconds`` of virtual time."""

    text: str
    updates: int | None = None
    seconds: float | None = None


def parse_every(text: str) -> Every:
    """``500`` (every 500 updates) or ``300s`` (every 300 virtual seconds)."""
    where = "--checkpoint-every"
    m = _EVERY_RE.match(text)
    if m is None:
        raise InputError(where, f"expected N (updates) or Ns (virtual seconds), e.g. 500 or 300s, got {text!r}")
    number = float(m.group("n"))
    if m.group("unit") == "s":
        if not math.isfinite(number) or number <= 0:
            raise InputError(where, f"the interval must be a positive number of seconds, got {text!r}")
        return Every(text.strip(), seconds=number)
    if not number.is_integer() or number < 1 or number > 2**62:
        raise InputError(where, f"the update count must be a whole number >= 1, got {text!r}")
    return Every(text.strip(), updates=int(number))


def parse_wall(text: str, where: str = "--checkpoint-wall") -> float | None:
    """``5m``, ``90s``, ``90`` (seconds), ``1h``: wall seconds between checkpoints; ``off``: None (no such checkpoints)."""
    if text.strip().lower() == "off":
        return None
    m = _WALL_RE.match(text)
    seconds = float(m.group("n")) * _WALL_UNITS[m.group("unit")] if m is not None else math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(where, f"expected a wall-clock interval > 0 such as 90s, 5m or 1h, or off, got {text!r}")
    return seconds


def wall_text(seconds: float | None) -> str:
    """A wall-clock interval as :func:`parse_wall` reads it."""
    return "off" if seconds is None else f"{seconds:g}s"


def write_atomic(path: Path, data: bytes | None = None, obj: Any = None) -> None:
    """Write ``data`` (or ``torch.save(obj)``) to ``path`` via a temporary file, fsync and rename."""
    tmp = path.with_name(path.name + ".tmp")
    with outdir.room(path, tmp), tmp.open("wb") as fh:
        if data is not None:
            fh.write(data)
        else:
            import torch  # here, not at the top: validate and estimates load no torch

            torch.save(obj, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    try:
        fd = os.open(path.parent, os.O_RDONLY)
    except OSError:  # some platforms cannot open folders; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FRESH = "start afresh with `simfl run FILE --out OUT --force`"


def _read(path: Path) -> Any:
    """``torch.load`` of plain data and tensors only; a damaged or hostile file is an InputError.

    Code or objects other than plain data and tensors are never loaded (``weights_only``),
    and torch's own warnings and advice stay off the terminal.
    """
    where = str(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import torch

            return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as exc:  # torch raises many types for damaged files
        text = str(exc)
        if "GLOBAL" in text or "Unsupported global" in text:
            raise InputError(where, "refused: it holds objects other than plain data and tensors (a simfl checkpoint "
                             f"never does; it was not loaded); {FRESH}") from None
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        if lines and lines[0].startswith("Weights only load failed"):  # keep torch's detail, not its advice
            lines = [ln for ln in lines[1:] if not ln.startswith(("Please file", "Check the documentation"))]
        first = (lines or [type(exc).__name__])[0][:160]
        raise InputError(where, f"unreadable checkpoint ({first}); {FRESH}") from None


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a folder's ``checkpoint.pt`` safely and check its structure."""
    data = _read(path)
    if not isinstance(data, dict) or data.get("format") not in FORMATS:
        raise InputError(str(path), f"not a simfl checkpoint (expected format {FORMAT}); {FRESH}")
    check_saved(data, str(path))
    return data


def load_run(path: Path) -> dict[str, Any]:
    """Read one run's checkpoint (``running/<algorithm>/seed<k>.pt``) safely and check its structure."""
    data = _read(path)
    if not isinstance(data, dict) or data.get("format") != RUN_FORMAT:
        raise InputError(str(path), f"not a simfl run checkpoint (expected format {RUN_FORMAT}); {FRESH}")
    check_run(data, str(path))
    return data


def run_blob(algorithm: str, seed: int, wall_seconds: float, sim: dict[str, Any]) -> bytes:
    """The bytes of one run's checkpoint file (made where the run goes, written where its folder is)."""
    import torch

    buffer = io.BytesIO()
    torch.save({"format": RUN_FORMAT, "algorithm": algorithm, "seed": seed, "wall_seconds": wall_seconds,
                "sim": sim}, buffer)
    return buffer.getvalue()


def keep_run(folder: Path, algorithm: str, seed: int, blob: bytes) -> None:
    """Keep a run as its time budget stopped it (:attr:`simfl.launch.units.Done.kept`) in ``folder``, as
    ``<algorithm>/seed<k>.pt`` (same writing rules as a checkpoint), for a run with a later budget to continue."""
    outdir.make_dir(folder, exist_ok=True)
    path = outdir.writable(folder, f"{algorithm}/seed{seed}.pt")
    path.parent.mkdir(exist_ok=True)
    write_atomic(path, blob)


def kept_run(folder: Path, algorithm: str, seed: int, at: float) -> tuple[dict[str, Any] | None, float]:
    """The simulation :func:`keep_run` kept in ``folder`` of this run, stopped at virtual time ``at``, and the wall
    seconds it had cost; (None, 0.0) when there is none, or none that reads as such (damaged, another run's: it saves
    time, it decides nothing, and the run then starts at time 0, to the same end)."""
    path = folder / algorithm / f"seed{seed}.pt"
    if not path.is_file():
        return None, 0.0
    try:
        cur = load_run(path)
    except InputError:
        return None, 0.0
    if (cur["algorithm"], cur["seed"]) != (algorithm, seed) or cur["sim"]["state"]["now"] != at:
        return None, 0.0
    return cur["sim"], float(cur["wall_seconds"])


def _need(ok: bool, where: str, what: str) -> None:
    if not ok:
        raise InputError(where, f"damaged checkpoint: {what}; {FRESH}")


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63


def _is_time(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def check_saved(data: dict[str, Any], where: str) -> None:
    """Check the checkpoint's structure and value types (the simulation data is checked on restore)."""
    every = data.get("every")
    _need(every is None or isinstance(every, str), where, "'every' must be text or empty")
    if isinstance(every, str):
        try:
            parse_every(every)
        except InputError as exc:
            _need(False, where, f"'every' {exc.message}")
    _need(isinstance(data.get("verify"), bool), where, "'verify' must be true or false")
    wall = data.get("wall", WALL_DEFAULT)
    _need(wall is None or (_is_time(wall) and wall > 0), where, "'wall' must be a number of seconds > 0 or empty")
    _need(isinstance(data.get("spare_pool", False), bool), where, "'spare_pool' must be true or false")
    finished = data.get("finished")
    _need(isinstance(finished, list), where, "'finished' must be a list")
    for i, f in enumerate(finished or []):
        _need(isinstance(f, dict) and isinstance(f.get("algorithm"), str) and _is_int(f.get("seed"))
              and isinstance(f.get("row"), dict), where, f"finished[{i}] needs algorithm (text), seed (>= 0), row")
    cur = data.get("current")  # the first format's run under way
    if cur is not None:
        _need(isinstance(cur, dict), where, "'current' must be a mapping")
        check_run(cur, where, "current.")


def check_run(cur: dict[str, Any], where: str, prefix: str = "") -> None:
    """Check a run's saved simulation data (a run checkpoint, or the first format's ``current``)."""
    _need(isinstance(cur.get("algorithm"), str) and _is_int(cur.get("seed")) and _is_time(cur.get("wall_seconds")),
          where, f"{prefix or 'the run '}needs algorithm (text), seed (>= 0) and wall_seconds (>= 0)")
    sim: Any = cur.get("sim")
    _need(isinstance(sim, dict) and all(k in sim for k in ("state", "algorithm", "latency", "availability",
                                                             "last_eval")),
          where, f"{prefix}sim needs state, algorithm, latency, availability, last_eval")
    state = sim["state"]
    _need(isinstance(state, dict) and _is_time(state.get("now")) and _is_int(state.get("updates"))
          and isinstance(state.get("clients"), list) and isinstance(state.get("events"), list)
          and isinstance(state.get("metrics"), list), where,
          f"{prefix}sim.state needs now (>= 0), updates (>= 0), clients, events and metrics lists")
    pending = state.get("pending")
    _need(isinstance(pending, list) and all(_is_wake(w, state["now"]) for w in pending), where,
          f"{prefix}sim.state.pending needs [kind, order, time >= now, index] wake-ups")


def _is_wake(row: Any, now: float) -> bool:
    """A saved pending wake-up: [kind, order, time >= now, client or round or None]."""
    return (isinstance(row, list | tuple) and len(row) == 4 and isinstance(row[0], str) and row[0] in PRIORITY
            and _is_int(row[1]) and _is_time(row[2]) and row[2] >= now and (row[3] is None or _is_int(row[3])))


def scenario_digest(stage: Path) -> str | None:
    """SHA-256 (hex) of ``stage/scenario.yaml``; None when it cannot be read."""
    try:
        return hashlib.sha256((stage / "scenario.yaml").read_bytes()).hexdigest()
    except OSError:
        return None


class Session:
    """The bookkeeping of one result folder in its staging folder: finished runs, run checkpoints, markers.

    Only the launching process writes here; runs going on elsewhere send their checkpoints as
    bytes (:func:`run_blob`), which :meth:`save_run` writes.
    """

    def __init__(self, stage: Path, every: Every | None, verify: bool, saved: dict[str, Any] | None = None,
                 wall: float | None = WALL_DEFAULT, spare: bool = False) -> None:
        self.stage = stage
        self.digest = scenario_digest(stage)
        """SHA-256 of the folder's scenario.yaml as the runs began, kept in checkpoint.pt (see :meth:`reopen`)."""
        if saved is not None and saved.get("scenario_sha256") not in (None, self.digest):
            raise InputError(str(stage / "scenario.yaml"), "changed after the runs began (its digest differs from "
                             f"the one in {CHECKPOINT_FILE}); resuming would mix two scenarios in one folder: restore "
                             "the file, or start a new run with --out")
        self.every = every
        self.verify = verify
        self.wall = wall
        """Wall seconds between the checkpoints of each run under way (None: none but ``every``'s)."""
        self.spare = spare
        """Whether each run may start a process pool on the cores the launch leaves it once its training proves heavy
        (a Flower App whose scenario names no executor, :func:`simfl.launch.flwr_app.spare_pool`): kept, so that a
        resumed launch decides as the first did, which the resolved scenario.yaml alone cannot tell."""
        self.finished: list[dict[str, Any]] = list(saved["finished"]) if saved else []
        self.legacy: dict[str, Any] | None = saved.get("current") if saved else None
        """The first format's run under way, until that run checkpoints again or finishes."""
        self.held: dict[tuple[str, int], str] = {}
        """Where each run with a checkpoint stands (for INCOMPLETE)."""
        self.note = "running (or killed)"
        self.then: str | None = None
        """What INCOMPLETE says to do next when not ``--resume`` (a run stopped by the user's own code)."""

    @staticmethod
    def reopen(stage: Path) -> tuple[Every | None, bool, dict[str, Any] | None]:
        """The settings and saved data of an unfinished folder (None when no checkpoint was written yet)."""
        path = stage / CHECKPOINT_FILE
        if not path.exists():
            return None, False, None
        saved = load_checkpoint(path)
        text = saved.get("every")
        return (parse_every(text) if text else None), bool(saved.get("verify")), saved

    @staticmethod
    def saved_wall(saved: dict[str, Any] | None) -> float | None:
        """The wall-clock checkpoint interval an unfinished folder was run with (a folder from before the setting
        existed, or without a checkpoint yet: the default)."""
        if saved is None or "wall" not in saved:
            return WALL_DEFAULT
        wall = saved["wall"]
        return None if wall is None else float(wall)

    @staticmethod
    def saved_spare(saved: dict[str, Any] | None) -> bool:
        """Whether an unfinished folder's runs were given the cores left over (:attr:`spare`; False before the setting
        existed)."""
        return saved is not None and saved.get("spare_pool") is True

    # -- queries -----------------------------------------------------------------

    def is_finished(self, algorithm: str, seed: int) -> bool:
        return any(f["algorithm"] == algorithm and f["seed"] == seed for f in self.finished)

    def run_path(self, algorithm: str, seed: int) -> Path:
        """The checkpoint file of one run under way."""
        return self.stage / RUNNING_DIR / algorithm / f"seed{seed}.pt"

    def resume_data(self, algorithm: str, seed: int) -> tuple[dict[str, Any] | None, float]:
        """The saved simulation of this run, if it has a checkpoint, and the wall seconds it had cost."""
        path = self.run_path(algorithm, seed)
        cur = load_run(path) if path.is_file() else self.legacy
        if cur is not None and cur["algorithm"] == algorithm and cur["seed"] == seed:
            return cur["sim"], float(cur["wall_seconds"])
        return None, 0.0

    # -- writing -------------------------------------------------------------------

    def save_run(self, algorithm: str, seed: int, blob: bytes, now: float, updates: int) -> None:
        """Write one run's checkpoint (:func:`run_blob`), which stands at virtual time ``now``."""
        path = outdir.writable(self.stage, f"{RUNNING_DIR}/{algorithm}/seed{seed}.pt")
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, blob)
        self.held[(algorithm, seed)] = f"at virtual time {now!r}, {updates} updates"
        if self.legacy is not None and (self.legacy["algorithm"], self.legacy["seed"]) == (algorithm, seed):
            self.legacy = None
            self.write()
        else:
            self.mark_incomplete()

    def finish(self, algorithm: str, seed: int, row: dict[str, Any]) -> None:
        """Record a finished run (its files are written) and drop its checkpoint."""
        self.finished.append({"algorithm": algorithm, "seed": seed, "row": dict(row)})
        self.run_path(algorithm, seed).unlink(missing_ok=True)
        self.held.pop((algorithm, seed), None)
        if self.legacy is not None and (self.legacy["algorithm"], self.legacy["seed"]) == (algorithm, seed):
            self.legacy = None
        self.write()

    def write(self) -> None:
        """Save the folder's record and refresh the INCOMPLETE marker."""
        data: dict[str, Any] = {"format": FORMAT, "every": self.every.text if self.every else None,
                                "verify": self.verify, "wall": self.wall, "finished": self.finished,
                                "scenario_sha256": self.digest, "spare_pool": self.spare}
        if self.legacy is not None:
            data["current"] = self.legacy
        write_atomic(self.stage / CHECKPOINT_FILE, obj=data)
        self.mark_incomplete()

    def mark_incomplete(self, note: str | None = None, then: str | None = None) -> None:
        """(Re)write ``INCOMPLETE``: what finished, which runs have a checkpoint, how to continue (``then``, when
        ``--resume`` cannot help)."""
        if note is not None:
            self.note = note
        if then is not None:
            self.then = then
        out = self.stage.with_name(self.stage.name.removesuffix(".partial"))
        done = ", ".join(f"{f['algorithm']} seed{f['seed']}" for f in self.finished) or "none"
        held = dict(self.held)
        if self.legacy is not None:
            state = self.legacy["sim"]["state"]
            held.setdefault((self.legacy["algorithm"], self.legacy["seed"]),
                            f"at virtual time {state['now']!r}, {state['updates']} updates")
        where = "; ".join(f"{a} seed{s} {text}" for (a, s), text in sorted(held.items())) or "none"
        text = (f"status: incomplete, {self.note}\nfinished: {done}\ncheckpoint: {where}\n"
                + (f"continue with: simfl run --resume {out}  (a Flower App's run: simfl flwr run APP_DIR --resume {out})\n"
                   if self.then is None else f"continue with: {self.then}\n"))
        write_atomic(self.stage / INCOMPLETE_FILE, text.encode())

    def remove_tmp(self) -> None:
        """Delete temporary files a write cut short left behind (the real files are renamed in whole).

        Only simfl's own (:func:`simfl.outdir.simfl_name`): a user's ``.tmp`` file in the folder stays.
        """
        outdir.remove_own(self.stage, [f for f in outdir.files_under(self.stage)
                                       if f.endswith(".tmp") and outdir.simfl_name(f)])

    def close(self) -> None:
        """The folder is complete: remove the checkpoints and the INCOMPLETE marker before publishing."""
        outdir.remove_own(self.stage, [f for f in outdir.files_under(self.stage) if outdir.simfl_name(f) and (
            f in (CHECKPOINT_FILE, INCOMPLETE_FILE) or f.startswith(RUNNING_DIR + "/") or f.endswith(".tmp"))])
