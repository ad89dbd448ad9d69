"""Convert the raw Raspberry Pi latency logs into the per-device statistics simfl ships.

The raw logs (``gw{g}_comp_delay.txt`` and ``gw{g}_round_delay.txt``, one pair per
gateway ``g``) hold one row per model upload and one column per client device;
only the uploading device's column is non-zero. :func:`import_traces` checks
them and writes three small derived tables:

``devices.csv``
    One row per device that uploaded at least once: ``device`` (the column
    index in the logs), ``uploads``, mean and std of compute, round and
    communication (= round - compute) latency, and the round minimum and
    maximum. Standard deviations use ddof=0, as the authors' released code does.
``pooled.json``
    ``mean``, ``std`` (ddof=0), ``p5``, ``p50``, ``p95`` of all measured round
    latencies (NumPy's default linear percentile), plus their count and the
    pooled compute and communication means (used to scale the pooled models).
``uploads.csv``
    Every upload in order (gateway 1, 2, 3, then row order within a gateway):
    ``device, gateway, row, compute, round, comm``. ``replay`` plays these back.

The same function writes the project's ``latency_traces/`` and the package's
own copy in ``simfl/latency/data/`` (see :mod:`simfl.latency.profiles`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simfl.errors import InputError

_ROUND_RE = re.compile(r"^gw(\d+)_round_delay\.txt$")
STAT_COLUMNS = (
    "device",
    "uploads",
    "compute_mean",
    "compute_std",
    "round_mean",
    "round_std",
    "comm_mean",
    "comm_std",
    "round_min",
    "round_max",
)
"""Column order of ``devices.csv``."""
UPLOAD_COLUMNS = ("device", "gateway", "row", "compute", "round", "comm")
"""Column order of ``uploads.csv``."""


@dataclass(frozen=True)
class Upload:
    """One measured model upload of one device."""

    device: int
    gateway: int
    row: int
    compute: float
    round: float

    @property
    def comm(self) -> float:
        """Communication and other overhead: round minus compute, in seconds."""
        return self.round - self.compute


def read_log(path: Path) -> np.ndarray:
    """Read one raw log as a (rows, devices) float array, rejecting anything off-format.

    Raises :class:`InputError` naming the file for a missing or empty file, a
    non-numeric or non-finite or negative value, or rows of unequal length.
    """
    where = str(path)
    if not path.is_file():
        raise InputError(where, "file not found (expected a raw latency log, see latency_traces/README.md)")
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise InputError(where, "file is empty (expected comma-separated rows of latencies in seconds)")
    rows: list[list[float]] = []
    for i, line in enumerate(lines, start=1):
        cells = line.split(",")
        try:
            row = [float(c) for c in cells]
        except ValueError:
            bad = next(c for c in cells if not _is_float(c))
            raise InputError(where, f"line {i}: {bad.strip()!r} is not a number") from None
        if rows and len(row) != len(rows[0]):
            raise InputError(where, f"line {i}: {len(row)} columns, but line 1 has {len(rows[0])}")
        if not all(np.isfinite(row)):
            raise InputError(where, f"line {i}: non-finite value")
        if min(row) < 0:
            raise InputError(where, f"line {i}: negative latency {min(row):g}")
        rows.append(row)
    return np.asarray(rows, dtype=float)


def _is_float(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def read_uploads(raw_dir: Path) -> list[Upload]:
    """Every upload in the raw logs of ``raw_dir``, in gateway then row order, checked pairwise.

    Each round log needs its compute log with the same shape; each row must
    hold exactly one non-zero entry, in the same column in both files, and the
    round latency must exceed the compute latency.
    """
    raw_dir = Path(raw_dir)
    if not raw_dir.is_dir():
        raise InputError(str(raw_dir), "raw trace folder not found")
    gateways = sorted(int(m.group(1)) for p in raw_dir.iterdir() if (m := _ROUND_RE.match(p.name)))
    if not gateways:
        raise InputError(str(raw_dir), "no gw<N>_round_delay.txt files (expected the Raspberry Pi logs)")
    uploads: list[Upload] = []
    for g in gateways:
        round_path = raw_dir / f"gw{g}_round_delay.txt"
        comp_path = raw_dir / f"gw{g}_comp_delay.txt"
        rnd = read_log(round_path)
        comp = read_log(comp_path)
        if rnd.shape != comp.shape:
            raise InputError(str(comp_path), f"shape {comp.shape} differs from {round_path.name}'s {rnd.shape}")
        for i in range(rnd.shape[0]):
            cols = np.flatnonzero(rnd[i])
            if len(cols) != 1:
                raise InputError(str(round_path), f"line {i + 1}: {len(cols)} non-zero entries, expected exactly 1")
            col = int(cols[0])
            if not np.array_equal(np.flatnonzero(comp[i]), cols):
                raise InputError(str(comp_path), f"line {i + 1}: non-zero entry not in column {col} as in {round_path.name}")
            if rnd[i, col] <= comp[i, col]:
                raise InputError(
                    str(round_path),
                    f"line {i + 1}: round latency {rnd[i, col]:g} s is not above compute latency {comp[i, col]:g} s",
                )
            uploads.append(Upload(device=col, gateway=g, row=i, compute=float(comp[i, col]), round=float(rnd[i, col])))
    return uploads


def device_stats(uploads: list[Upload]) -> list[dict[str, float]]:
    """Per-device statistics (columns :data:`STAT_COLUMNS`), sorted by device index."""
    out: list[dict[str, float]] = []
    for dev in sorted({u.device for u in uploads}):
        mine = [u for u in uploads if u.device == dev]
        comp = np.array([u.compute for u in mine])
        rnd = np.array([u.round for u in mine])
        comm = rnd - comp
        out.append(
            {
                "device": dev,
                "uploads": len(mine),
                "compute_mean": float(comp.mean()),
                "compute_std": float(comp.std()),
                "round_mean": float(rnd.mean()),
                "round_std": float(rnd.std()),
                "comm_mean": float(comm.mean()),
                "comm_std": float(comm.std()),
                "round_min": float(rnd.min()),
                "round_max": float(rnd.max()),
            }
        )
    return out


def pooled_stats(uploads: list[Upload]) -> dict[str, float]:
    """Statistics of all measured round latencies pooled over devices."""
    rnd = np.array([u.round for u in uploads])
    comp = np.array([u.compute for u in uploads])
    p5, p50, p95 = np.percentile(rnd, [5, 50, 95])
    return {
        "uploads": len(uploads),
        "mean": float(rnd.mean()),
        "std": float(rnd.std()),
        "p5": float(p5),
        "p50": float(p50),
        "p95": float(p95),
        "compute_mean": float(comp.mean()),
        "comm_mean": float((rnd - comp).mean()),
    }


def import_traces(raw_dir: Path, out_dir: Path, force: bool = False) -> None:
    """Derive ``devices.csv``, ``pooled.json`` and ``uploads.csv`` in ``out_dir`` from the raw logs in ``raw_dir``.

    Everything is read and checked before anything is written, so a bad input
    leaves ``out_dir`` untouched. Floats are written with ``repr`` (exact round trip).
    Existing files are replaced only with ``force``, and only when simfl wrote them
    (their header is simfl's); other files in ``out_dir`` are never touched.
    """
    from simfl import outdir

    out_dir = Path(out_dir)
    targets = {out_dir / "devices.csv": _starts(",".join(STAT_COLUMNS)),
               out_dir / "uploads.csv": _starts(",".join(UPLOAD_COLUMNS)),
               out_dir / "pooled.json": lambda head: head.lstrip().startswith(b"{") and b'"uploads"' in head}
    outdir.claim_files(targets, force)
    uploads = read_uploads(Path(raw_dir))
    devices = device_stats(uploads)
    pooled = pooled_stats(uploads)
    dev_lines = [",".join(STAT_COLUMNS)]
    dev_lines += [",".join(repr(d[c]) for c in STAT_COLUMNS) for d in devices]
    up_lines = [",".join(UPLOAD_COLUMNS)]
    up_lines += [f"{u.device},{u.gateway},{u.row},{u.compute!r},{u.round!r},{u.comm!r}" for u in uploads]
    outdir.write_file(out_dir / "devices.csv", ("\n".join(dev_lines) + "\n").encode())
    outdir.write_file(out_dir / "uploads.csv", ("\n".join(up_lines) + "\n").encode())
    outdir.write_file(out_dir / "pooled.json", (json.dumps(pooled, indent=2) + "\n").encode())


def _starts(header: str) -> Callable[[bytes], bool]:
    """A test that a file's first line is ``header`` (a file simfl wrote)."""
    return lambda head: head.split(b"\n", 1)[0].strip() == header.encode()
