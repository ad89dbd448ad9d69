"""FedScale's device traces (scenario ``latency: {model: fedscale, path: ..., behavior: ...}``).

FedScale ships two pickled dicts keyed by client id (its
``benchmark/dataset/data/device_info``): the device capacity,
``{id: {"computation": ms per sample, "communication": kbit/s}}``, where
computation is the inference time of one sample and training is taken as 3x
it (forward plus a backward of twice the cost, as FedScale does); and the
availability (behaviour) trace, ``{id: {"active": [s], "inactive": [s],
"finish_time": s, ...}}``: the client is present from ``active[i]`` to
``inactive[i]``, the pattern repeating every ``finish_time`` seconds.
Clients take the capacity entries in sorted id order and the availability
entries likewise, each cycling when the fleet has more clients than entries.

The pickles are read with the restricted unpickler of :mod:`simfl.unpickle`, which admits
only plain containers and numbers (never arbitrary objects), so a trace file cannot run code.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from simfl import unpickle
from simfl.errors import InputError
from simfl.fields import PositiveFloat
from simfl.latency.fleet import Device, FleetModel, FleetOptions

TRAIN_OVER_INFERENCE = 3.0
"""Training a sample costs about three forward passes (FedScale's augmentation factor)."""
KBIT_BYTES = 1024.0 / 8.0
"""Bytes in one of FedScale's kbits (it sizes a model as bytes / 1024 x 8)."""


class FedScaleConfig(FleetOptions):
    """FedScale's device-capacity trace, optionally with its availability (behaviour) trace."""

    model: Literal["fedscale"] = Field("fedscale", description="Delay model name.")
    path: str = Field(description="FedScale device-capacity pickle, e.g. client_device_capacity (relative to the scenario file).")
    behavior: str | None = Field(
        None, description="FedScale availability pickle, e.g. client_behave_trace (relative to the scenario file); "
        "null: always present."
    )
    train_factor: PositiveFloat = Field(
        TRAIN_OVER_INFERENCE, description="Training time per sample over the trace's inference time per sample."
    )


def load_plain_pickle(path: str) -> dict[Any, Any]:
    """A pickled dict of plain data, or a one-line InputError."""
    file = Path(path)
    if not file.is_file():
        raise InputError(path, "trace file not found")
    try:
        data = unpickle.loads(file.read_bytes())
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad input file
        raise InputError(path, f"not a FedScale trace pickle of plain data ({exc})") from None
    if not isinstance(data, dict) or not data:
        raise InputError(path, "expected a non-empty dict keyed by client id")
    return data


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value == float("inf"):
        raise InputError(where, f"must be a finite number > 0, got {value!r}")
    return float(value)


def _time(value: Any, where: str) -> float:
    """A window bound: a finite number of seconds >= 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < float("inf"):
        raise InputError(where, f"must hold finite numbers of seconds >= 0, got {value!r}")
    return float(value)


def _sorted_items(data: dict[Any, Any]) -> list[tuple[Any, Any]]:
    return sorted(data.items(), key=lambda kv: (not isinstance(kv[0], int), kv[0] if isinstance(kv[0], int) else str(kv[0])))


def _windows(entry: Any, where: str) -> tuple[tuple[tuple[float, float], ...], float]:
    if not isinstance(entry, dict) or not {"active", "inactive", "finish_time"} <= entry.keys():
        raise InputError(where, "needs keys active, inactive and finish_time")
    active, inactive = entry["active"], entry["inactive"]
    if not isinstance(active, list | tuple) or not isinstance(inactive, list | tuple) or len(active) != len(inactive):
        raise InputError(where, "active and inactive must be lists of the same length")
    period = _number(entry["finish_time"], f"{where}.finish_time")
    out: list[tuple[float, float]] = []
    for a, b in zip(active, inactive, strict=True):
        start, end = _time(a, f"{where}.active"), min(_time(b, f"{where}.inactive"), period)
        if start < 0 or end < start or (out and start < out[-1][1]):
            raise InputError(where, f"active/inactive must give sorted, disjoint intervals, got {a}-{b}")
        if end > start:
            out.append((start, end))
    if not out:
        raise InputError(where, "no presence interval")
    return tuple(out), period


def read_fedscale(path: str, behavior: str | None, train_factor: float) -> tuple[Device, ...]:
    """Devices from FedScale's capacity pickle (and availability pickle), one per capacity entry.

    Read once per process while the files are unchanged.
    """
    stamps = tuple((p.stat().st_mtime_ns, p.stat().st_size) if p.is_file() else None
                   for p in (Path(path), Path(behavior or path)))
    return _read(path, behavior, train_factor, stamps)


@lru_cache(maxsize=8)
def _read(path: str, behavior: str | None, train_factor: float, stamps: tuple[object, ...]) -> tuple[Device, ...]:
    capacity = _sorted_items(load_plain_pickle(path))
    behave = None if behavior is None else _sorted_items(load_plain_pickle(behavior))
    devices = []
    for i, (key, entry) in enumerate(capacity):
        where = f"{path}[{key!r}]"
        if not isinstance(entry, dict) or not {"computation", "communication"} <= entry.keys():
            raise InputError(where, "needs keys computation (ms/sample) and communication (kbit/s)")
        ms = _number(entry["computation"], f"{where}.computation")
        kbps = _number(entry["communication"], f"{where}.communication")
        windows: tuple[tuple[float, float], ...] = ()
        period = None
        if behave is not None:
            bkey, bentry = behave[i % len(behave)]
            windows, period = _windows(bentry, f"{behavior}[{bkey!r}]")
        devices.append(Device(
            seconds_per_sample=train_factor * ms / 1000.0, flops=None, bandwidth=kbps * KBIT_BYTES,
            windows=windows, period=period,
        ))
    return tuple(devices)


class FedScale(FleetModel):
    """Round latency of each client from FedScale's device capacity; presence from its behaviour trace."""

    Config = FedScaleConfig

    @classmethod
    def read(cls, config: FleetOptions) -> list[Device]:
        assert isinstance(config, FedScaleConfig)
        return list(read_fedscale(str(config.path), config.behavior, config.train_factor))

    @classmethod
    def absence_source(cls, config: FleetOptions) -> str:
        assert isinstance(config, FedScaleConfig)
        return f"the availability of FedScale's behaviour trace latency.behavior {config.behavior}"
