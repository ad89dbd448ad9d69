"""simfl's fleet CSV: one row per device (scenario ``latency: {model: fleet_csv, path: fleet.csv}``).

Columns (header required, any order): ``client`` (a label, kept for messages),
``bandwidth`` (bytes/s), and one of ``seconds_per_sample`` (training seconds
per sample) or ``flops`` (training FLOP/s, scaled by the model's FLOPs per
sample); optional ``windows``: presence intervals ``start-end`` in seconds,
separated by ``;`` (empty: always present), and ``period``: the windows repeat
every so many seconds. Client m plays row ``m mod rows``.
"""

from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field

from simfl.errors import InputError
from simfl.latency.fleet import Device, FleetModel, FleetOptions

REQUIRED = ("client", "bandwidth")
KNOWN = {"client", "bandwidth", "seconds_per_sample", "flops", "windows", "period"}


class FleetCsvConfig(FleetOptions):
    """Per-device compute speed, bandwidth and availability windows from a CSV file."""

    model: Literal["fleet_csv"] = Field("fleet_csv", description="Delay model name.")


def _positive(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(where, f"must be a number, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(where, f"must be a finite number > 0, got {text!r}")
    return value


def parse_windows(text: str, where: str) -> tuple[tuple[float, float], ...]:
    """``"0-3600;7200-10800"`` as sorted, disjoint ``(start, end)`` pairs."""
    out: list[tuple[float, float]] = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        bounds = part.split("-")
        try:
            start, end = (float(b) for b in bounds) if len(bounds) == 2 else (math.nan, math.nan)
        except ValueError:
            start = end = math.nan
        if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end <= start:
            raise InputError(where, f"window must be start-end with 0 <= start < end, got {part!r}")
        if out and start < out[-1][1]:
            raise InputError(where, f"windows must be sorted and disjoint, got {part!r} after {out[-1][0]:g}-{out[-1][1]:g}")
        out.append((start, end))
    return tuple(out)


def read_fleet_csv(path: str) -> tuple[Device, ...]:
    """The devices of a fleet CSV (read once per process while the file is unchanged)."""
    file = Path(path)
    if not file.is_file():
        raise InputError(path, "fleet trace file not found")
    stat = file.stat()
    return _read(path, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, size: int) -> tuple[Device, ...]:
    try:
        return _parse(path)
    except UnicodeDecodeError as exc:
        raise InputError(path, f"is not UTF-8 text (byte {exc.start} is {exc.object[exc.start:exc.start + 1]!r}): "
                         "save the fleet CSV as UTF-8") from None
    except csv.Error as exc:
        raise InputError(path, f"is not a readable CSV file ({exc})") from None


def _parse(path: str) -> tuple[Device, ...]:
    file = Path(path)
    with file.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = [h.strip() for h in reader.fieldnames or ()]
        missing = [c for c in REQUIRED if c not in header]
        if missing:
            raise InputError(path, f"missing column(s) {', '.join(missing)} (header: {','.join(header) or 'nothing'})")
        unknown = sorted(set(header) - KNOWN)
        if unknown:
            raise InputError(path, f"unknown column(s) {', '.join(unknown)}; known: {', '.join(sorted(KNOWN))}")
        if "seconds_per_sample" not in header and "flops" not in header:
            raise InputError(path, "needs a seconds_per_sample or a flops column")
        devices = []
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            row = {k.strip(): (v or "").strip() for k, v in row.items() if k is not None}
            sps = row.get("seconds_per_sample", "")
            flops = row.get("flops", "")
            if bool(sps) == bool(flops):
                raise InputError(where, "give exactly one of seconds_per_sample and flops")
            period = row.get("period", "")
            windows = parse_windows(row.get("windows", ""), f"{where}: windows")
            devices.append(Device(
                seconds_per_sample=_positive(sps, f"{where}: seconds_per_sample") if sps else None,
                flops=_positive(flops, f"{where}: flops") if flops else None,
                bandwidth=_positive(row["bandwidth"], f"{where}: bandwidth"),
                windows=windows,
                period=_positive(period, f"{where}: period") if period else None,
            ))
    if not devices:
        raise InputError(path, "no device rows")
    return tuple(devices)


class FleetCsv(FleetModel):
    """Round latency of each client from its device's row in a fleet CSV."""

    Config = FleetCsvConfig

    @classmethod
    def read(cls, config: FleetOptions) -> list[Device]:
        return list(read_fleet_csv(str(config.path)))
