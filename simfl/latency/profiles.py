"""Load the committed Raspberry Pi latency statistics and assign device profiles to clients.

Where the numbers come from: :func:`simfl.latency.traces.import_traces` derives
``devices.csv``, ``pooled.json`` and ``uploads.csv`` from the raw logs. The same
command writes them twice: to the project's ``latency_traces/`` (what people
read, with its README) and to ``simfl/latency/data/`` (package data, so an
installed simfl finds them without the source tree). A test checks that the two
copies are identical and equal to a fresh derivation. A scenario may point a
trace-based model at another folder of the same three files (``traces:``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from simfl import rng
from simfl.errors import InputError
from simfl.latency.traces import STAT_COLUMNS, UPLOAD_COLUMNS

DATA_DIR = Path(__file__).resolve().parent / "data"
"""The package's own copy of the derived trace statistics."""

PAPER9: tuple[int, ...] = (10, 1, 2, 3, 4, 5, 11, 8, 13)
"""The nine device profiles the authors' released code uses, in its order."""
MIN_UPLOADS_ALL = 3
"""Profile set ``all`` keeps every device with at least this many uploads (a std needs a few)."""
POOLED_KEYS = ("uploads", "mean", "std", "p5", "p50", "p95", "compute_mean", "comm_mean")


@dataclass(frozen=True)
class DeviceStats:
    """Measured latency statistics of one device (seconds; std with ddof=0)."""

    device: int
    uploads: int
    compute_mean: float
    compute_std: float
    round_mean: float
    round_std: float
    comm_mean: float
    comm_std: float
    round_min: float
    round_max: float


@dataclass(frozen=True)
class PooledStats:
    """Statistics of all measured round latencies together (seconds)."""

    uploads: int
    mean: float
    std: float
    p5: float
    p50: float
    p95: float
    compute_mean: float
    comm_mean: float


def _dir(traces: str | Path | None) -> Path:
    return DATA_DIR if traces is None else Path(traces)


def _rows(path: Path, columns: tuple[str, ...]) -> list[dict[str, str]]:
    if not path.is_file():
        raise InputError(str(path), "file not found (run `simfl traces import RAW --out DIR` to create it)")
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = tuple(reader.fieldnames or ())
            if header != columns:
                shown = ",".join(header)[:80] or "nothing"
                raise InputError(str(path), f"header must be {','.join(columns)}, got {shown}")
            rows = list(reader)
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start} of a read block): expected a CSV table") from None
    except csv.Error as exc:
        raise InputError(str(path), f"not a readable CSV table ({exc})") from None
    if not rows:
        raise InputError(str(path), "no data rows")
    return rows


def _number(path: Path, line: int, key: str, text: str | None, kind: type = float) -> float:
    try:
        value = kind(text)
    except (TypeError, ValueError):
        raise InputError(str(path), f"line {line}: {key}={text!r} is not a {'whole ' if kind is int else ''}number") from None
    if kind is int and not 0 <= value < 2**63:
        raise InputError(str(path), f"line {line}: {key}={text} must be a whole number in 0..2^63-1")
    if not np.isfinite(value) or value < 0:
        raise InputError(str(path), f"line {line}: {key}={text} must be finite and >= 0")
    return value


@lru_cache(maxsize=8)
def _load_devices(folder: Path) -> dict[int, DeviceStats]:
    path = folder / "devices.csv"
    out: dict[int, DeviceStats] = {}
    for i, row in enumerate(_rows(path, STAT_COLUMNS), start=2):
        vals = {k: _number(path, i, k, row[k], int if k in ("device", "uploads") else float) for k in STAT_COLUMNS}
        stats = DeviceStats(**vals)  # type: ignore[arg-type]
        if stats.uploads < 1 or stats.round_mean <= 0:
            raise InputError(str(path), f"line {i}: device {stats.device} needs uploads >= 1 and round_mean > 0")
        if stats.device in out:
            raise InputError(str(path), f"line {i}: device {stats.device} listed twice")
        out[stats.device] = stats
    return out


def load_devices(traces: str | Path | None = None) -> dict[int, DeviceStats]:
    """Per-device statistics by device index, from ``traces`` (default: the shipped copy)."""
    return _load_devices(_dir(traces).resolve())


@lru_cache(maxsize=8)
def _load_pooled(folder: Path) -> PooledStats:
    path = folder / "pooled.json"
    if not path.is_file():
        raise InputError(str(path), "file not found (run `simfl traces import RAW --out DIR` to create it)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"not UTF-8 text (byte {exc.start}): expected a JSON object") from None
    except (RecursionError, ValueError) as exc:
        raise InputError(str(path), f"not usable JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise InputError(str(path), "must hold a JSON object")
    missing = [k for k in POOLED_KEYS if k not in data]
    if missing:
        raise InputError(str(path), f"missing keys: {', '.join(missing)}")
    for k in POOLED_KEYS:
        v = data[k]
        if not isinstance(v, int | float) or isinstance(v, bool) or not 0 < v < 1e300 or v != v:
            raise InputError(str(path), f"{k} must be a positive number, got {v!r}")
    stats = PooledStats(**{k: data[k] for k in POOLED_KEYS})
    if not stats.p5 <= stats.p50 <= stats.p95:
        raise InputError(str(path), f"percentiles must satisfy p5 <= p50 <= p95, got {stats.p5}, {stats.p50}, {stats.p95}")
    return stats


def load_pooled(traces: str | Path | None = None) -> PooledStats:
    """Pooled round-latency statistics, from ``traces`` (default: the shipped copy)."""
    return _load_pooled(_dir(traces).resolve())


@lru_cache(maxsize=8)
def _load_uploads(folder: Path) -> dict[int, tuple[tuple[float, float], ...]]:
    path = folder / "uploads.csv"
    seqs: dict[int, list[tuple[float, float]]] = {}
    for i, row in enumerate(_rows(path, UPLOAD_COLUMNS), start=2):
        dev = int(_number(path, i, "device", row["device"], int))
        comp = _number(path, i, "compute", row["compute"])
        rnd = _number(path, i, "round", row["round"])
        if rnd <= comp:
            raise InputError(str(path), f"line {i}: round {rnd:g} must exceed compute {comp:g}")
        seqs.setdefault(dev, []).append((comp, rnd))
    return {d: tuple(s) for d, s in seqs.items()}


def load_uploads(traces: str | Path | None = None) -> dict[int, tuple[tuple[float, float], ...]]:
    """Each device's measured (compute, round) latencies in upload order."""
    return _load_uploads(_dir(traces).resolve())


def profile_set(name: str, devices: dict[int, DeviceStats]) -> list[int]:
    """The device indices of profile set ``name`` (``paper9`` or ``all``), checked against ``devices``."""
    if name == "paper9":
        ids = list(PAPER9)
    elif name == "all":
        ids = [d for d, s in sorted(devices.items()) if s.uploads >= MIN_UPLOADS_ALL]
    else:
        raise InputError("latency.profiles", f"unknown profile set {name!r}; allowed: paper9, all")
    absent = [d for d in ids if d not in devices]
    if absent or not ids:
        raise InputError("latency.profiles", f"profile set {name!r} needs devices {absent or ids} missing from the traces")
    return ids


def client_devices(
    explicit: list[int] | None, profiles: str, devices: dict[int, DeviceStats], num_clients: int, seed: int
) -> list[int]:
    """Device id per client: the explicit list when given (under ``paper9``, positions 0-8 of that set;
    under ``all``, device ids), else a random assignment from profile set ``profiles``."""
    if explicit is not None:
        return [PAPER9[i] for i in explicit] if profiles == "paper9" else list(explicit)
    return assign_devices(profile_set(profiles, devices), num_clients, seed)


def assign_devices(profiles: list[int], num_clients: int, seed: int) -> list[int]:
    """Give each client a device at random, from the stream (seed, "latency-profiles").

    Without replacement when there are no more clients than profiles, with
    replacement otherwise. (The released code switches to replacement already
    at as many clients as profiles; the difference matters only at exactly nine.)
    """
    gen = rng.stream(seed, "latency-profiles")
    replace = num_clients > len(profiles)
    picks = gen.choice(len(profiles), size=num_clients, replace=replace)
    return [profiles[int(i)] for i in picks]


def check_devices(
    devices: list[int], num_clients: int, known: dict[int, DeviceStats] | dict[int, tuple], profiles: str = "all"  # type: ignore[type-arg]
) -> None:
    """Validate an explicit per-client device list: positions 0-8 under ``paper9``, measured device ids under ``all``."""
    if len(devices) != num_clients:
        raise InputError("latency.devices", f"needs one device per client ({num_clients}), got {len(devices)}")
    if profiles == "paper9":
        bad = sorted({d for d in devices if d >= len(PAPER9)})
        if bad:
            raise InputError(
                "latency.devices",
                f"with profiles: paper9 each entry is a position 0-{len(PAPER9) - 1} in the set "
                f"{list(PAPER9)}, got {bad}; use profiles: all for device ids",
            )
        devices = [PAPER9[i] for i in devices]
    absent = sorted({d for d in devices if d not in known})
    if absent:
        raise InputError("latency.devices", f"devices {absent} have no measurements; known: {sorted(known)}")
