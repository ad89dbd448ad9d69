"""Speeds measured on this machine, kept in a small JSON cache so that each is measured once.

The estimate's wall time (:mod:`simfl.schema.costs`) needs how fast this machine trains a model and runs the
engine. Fixed constants cannot follow a machine, or the same machine on a busier day, so ``simfl run`` measures
what it needs on a cache miss (:mod:`simfl.launch.measure_speeds`) and stores it here; ``simfl validate`` only
reads. An entry is keyed by the machine (CPU model, torch and Python versions, the numerics mode of
:mod:`simfl.numerics`) and by what was measured (its name and facts: a model's config, sample shape and batch), so
that any change gives a new measurement.

The cache is ``speeds.json`` in ``$SIMFL_CACHE``, else ``~/.cache/simfl``. It is JSON only, never executed; a
file that is unreadable, corrupt or of another layout counts as empty, and so does an entry of figures no machine
gives (not finite, negative, beyond :data:`MOST_SECONDS`); one that cannot be written is left as it is: the
estimate then falls back on the reference speeds. It is read only from a regular file of at most
:data:`MAX_BYTES` (opened without blocking and checked once open, so that a FIFO, a device or a link put there is
never read from nor waited on): anything else there is ignored, said once on stderr, and never replaced. Writes
replace the file atomically (a temporary file renamed over it). Light to import: no torch (its version is read from
the installed package's metadata).
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import platform
import stat
import statistics
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from simfl import numerics

ENV = "SIMFL_CACHE"
FILE = "speeds.json"
LAYOUT = 1
"""The file's layout; a file of another one is ignored (and replaced at the next write)."""
MAX_ENTRIES = 256
"""Entries kept: the oldest go first beyond this."""

Speed = dict[str, float]
"""One measurement: named figures, seconds each."""
TRAINING = "training"
"""A model's training step and evaluation, on one thread (:func:`training` gives its facts)."""
ENGINE = "engine"
"""The engine's arrival without training, on a fixed probe run."""
ENGINE_FACTS: dict[str, Any] = {"probe": 4}
"""The facts of :data:`ENGINE`: the probe's version (a changed probe gives a new measurement)."""
TRAINING_TIMING = 3
"""The version of how a model's training is timed (:func:`simfl.launch.measure_speeds.training`), among the facts
of :data:`TRAINING`: a changed timing gives a new measurement (3: the evaluation timed on a copy of the model
as built, as a run's evaluator holds it)."""
SAMPLES_KEPT = 9
"""Samples kept of a measurement taken at several moments (the engine's, :func:`add_sample`): the latest."""
OBSERVED = "observed"
"""Finished runs' wall seconds over what the estimate said before them, per model at its batch and shape, or for
the engine alone (:func:`observe`)."""
OBSERVED_KEPT = 9
"""The latest finished runs kept per lesson."""
MAX_BYTES = 4 * 1024 * 1024
"""The largest cache file read: :data:`MAX_ENTRIES` entries take a few hundred kB; a larger file is not simfl's."""
MOST_SECONDS = 1e6
"""The largest figure of a measurement (seconds per step, sample, job or arrival, or a run's wall seconds over its
estimate) that a machine gives: above it, the entry is damaged and ignored."""
MOST_AT = 1e11
"""The largest time of a sample (``at``, seconds since the epoch: the year 5138)."""
_TOLD: set[tuple[str, str]] = set()
"""The (file, problem) pairs already said on stderr by this process."""


def folder() -> Path:
    """The user's cache folder of simfl: ``$SIMFL_CACHE``, else ``~/.cache/simfl``."""
    given = os.environ.get(ENV, "").strip()
    return Path(given).expanduser() if given else Path.home() / ".cache" / "simfl"


def path() -> Path:
    """The cache file."""
    return folder() / FILE


@functools.cache
def _cpu() -> str:
    """The CPU model as the system names it (``platform.processor()`` where ``/proc/cpuinfo`` is not readable)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.strip() in ("model name", "Hardware", "cpu model"):
                return value.strip()
    return platform.processor() or platform.machine()


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def machine() -> dict[str, str]:
    """What makes one machine's speeds differ from another's: CPU model, torch and Python versions, numerics mode."""
    return {"cpu": _cpu(), "torch": _torch_version(), "python": platform.python_version(), "numerics": numerics.mode()}


def key(what: str, facts: Mapping[str, Any]) -> str:
    """The cache key of measuring ``what`` with ``facts`` (plain JSON data) on this machine."""
    return json.dumps([machine(), what, facts], sort_keys=True)


def training(model: Any, shape: Sequence[int], classes: int, batch: int) -> dict[str, Any]:
    """The facts of :data:`TRAINING`: ``model`` (a model's validated config) on samples of ``shape`` in
    ``classes``, in batches of ``batch``."""
    return {"model": model.model_dump(mode="json"), "shape": [int(n) for n in shape], "classes": int(classes),
            "batch": int(batch), "timing": TRAINING_TIMING}


def _unusable(target: Path, problem: str, replaced: bool = False) -> None:
    """Say once per process, on stderr, that the cache file cannot be used, why, and what simfl does with it."""
    if (str(target), problem) not in _TOLD:
        _TOLD.add((str(target), problem))
        then = ("ignored, and replaced by the next measurement" if replaced else
                f"ignored and left as it is; remove it, or set ${ENV} to another folder, to let simfl keep its "
                "measured speeds")
        print(f"simfl: the speed cache {target} {problem}: {then}", file=sys.stderr, flush=True)


def _regular(mode: int) -> str | None:
    """Why a file of ``mode`` is no cache simfl reads or replaces (None: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    return ("is a symbolic link" if stat.S_ISLNK(mode) else "is a folder" if stat.S_ISDIR(mode) else
            "is a FIFO" if stat.S_ISFIFO(mode) else "is a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else
            "is not a regular file")


def _text() -> str | None:
    """The cache file's text, or None: missing, unreadable, not a regular file or over :data:`MAX_BYTES` (the last
    two said once on stderr). Opened without following a link and without blocking, and checked on the open file,
    so that what is at the path cannot change between the check and the read."""
    target = path()
    try:
        problem = _regular(os.lstat(target).st_mode)  # a device is not even opened
        if problem is not None:
            _unusable(target, problem)
            return None
        fd = os.open(target, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        try:
            problem = _regular(os.fstat(fd).st_mode)
            data = b"" if problem is not None else fh.read(MAX_BYTES + 1)
        except OSError:
            return None
    if problem is not None:
        _unusable(target, problem)
        return None
    if len(data) > MAX_BYTES:
        _unusable(target, f"is larger than {MAX_BYTES // (1024 * 1024)} MiB, far more than simfl writes", replaced=True)
        return None
    return data.decode("utf-8")


def _entries() -> dict[str, Speed]:
    """The cache's entries, or none where the file is missing, unreadable, not a regular file, too large, corrupt or
    of another layout; entries of damaged figures are left out."""
    try:
        text = _text()
        data = json.loads(text) if text is not None else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("layout") != LAYOUT or not isinstance(data.get("entries"), dict):
        return {}
    return {k: v for k, v in data["entries"].items() if isinstance(k, str) and _valid(v)}


def _valid(value: Any) -> bool:
    """A measurement: a non-empty mapping of names to finite non-negative numbers that a machine can give (at most
    :data:`MOST_SECONDS`, and a sample's time ``at`` at most :data:`MOST_AT`)."""
    return (isinstance(value, dict) and bool(value) and all(
        isinstance(n, str) and isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
        and 0 <= x <= (MOST_AT if n == "at" else MOST_SECONDS) for n, x in value.items()))


def cached(what: str, facts: Mapping[str, Any]) -> Speed | None:
    """The cached measurement of ``what`` with ``facts`` on this machine (None: not measured yet)."""
    found = _entries().get(key(what, facts))
    return None if found is None else {n: float(x) for n, x in found.items()}


def store(what: str, facts: Mapping[str, Any], speed: Speed) -> None:
    """Add a measurement to the cache, atomically (a temporary file renamed over it); a folder that cannot be
    written, or anything but a regular file at the cache's path, leaves the cache as it was."""
    entries = _entries()
    entries.pop(key(what, facts), None)
    entries[key(what, facts)] = dict(speed)
    kept = dict(list(entries.items())[-MAX_ENTRIES:])
    target = path()
    try:
        if _regular(os.lstat(target).st_mode) is not None:  # a link, FIFO or device put there is not replaced
            return
    except FileNotFoundError:
        pass
    except OSError:
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=".speeds-", suffix=".tmp", dir=target.parent)
    except OSError:
        return
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump({"layout": LAYOUT, "entries": kept}, fh, indent=1, sort_keys=True)
        os.replace(name, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)


def add_sample(what: str, facts: Mapping[str, Any], figure: str, value: float, at: float) -> None:
    """Add ``value``, a measurement of ``figure`` taken at ``at`` (seconds since the epoch), to the samples that
    ``what`` with ``facts`` keeps: the latest :data:`SAMPLES_KEPT` (an entry of one figure and no samples counts
    as its one sample), their median as ``figure`` and the newest one's time as ``at``. A machine whose speed
    moves from moment to moment is then read at the middle of the moments it was measured at."""
    found = cached(what, facts) or {}
    earlier = [found[k] for k in sorted((k for k in found if k.isdigit()), key=int)]
    if not earlier and figure in found:
        earlier = [found[figure]]
    kept = [*earlier[-(SAMPLES_KEPT - 1):], value]
    store(what, facts, {figure: statistics.median(kept), "at": at, **{str(i): v for i, v in enumerate(kept)}})


def sampled(what: str, facts: Mapping[str, Any]) -> tuple[int, float]:
    """How many samples of ``what`` with ``facts`` the cache keeps (:func:`add_sample`; a measurement stored whole
    counts as one) and when the newest was taken (0: not known)."""
    found = cached(what, facts)
    if found is None:
        return 0, 0.0
    return max(1, sum(k.isdigit() for k in found)), found.get("at", 0.0)


def observe(lesson: Mapping[str, Any], ratio: float) -> None:
    """Add a finished run's measured wall seconds over its estimated ones (at the measured speeds, before what
    earlier runs taught) to what ``lesson`` keeps (:func:`simfl.schema.costs.lesson`: the model's training at its
    batch and shape, or the engine); the latest :data:`OBSERVED_KEPT` are kept."""
    if not (math.isfinite(ratio) and ratio > 0):
        return
    ratios = [*observed(lesson)[-(OBSERVED_KEPT - 1):], ratio]
    store(OBSERVED, lesson, {str(i): r for i, r in enumerate(ratios)})


def observed(lesson: Mapping[str, Any]) -> list[float]:
    """The kept ratios of finished runs of ``lesson`` on this machine, oldest first (:func:`observe`)."""
    found = cached(OBSERVED, lesson) or {}
    return [found[k] for k in sorted(found, key=lambda k: int(k) if k.isdigit() else -1)]
