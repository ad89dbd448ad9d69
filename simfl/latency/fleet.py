"""Fleet traces: per-device compute speed, bandwidth and availability windows for many clients.

A fleet is one row per device. Client m plays device ``m mod n`` (in file
order), and each of its rounds lasts

    compute_seconds x work + transfers x model_bytes / bandwidth

where ``work = samples[m] x epochs`` (samples processed in one round) and
``compute_seconds`` is the device's training seconds per sample, given
directly or as ``flops_per_sample / flops`` (FLOP/s). No randomness is used:
a client's rounds all last the same, so the fleet's spread is the spread of
its devices. Availability windows (seconds; a device is present from a
window's start, inclusive, to its end, exclusive) become absences of the
scenario's availability (:meth:`FleetModel.absences`); with a ``period``
the windows repeat, unrolled up to ``horizon``.

Two readers: :mod:`simfl.latency.fleet_csv` (simfl's own CSV) and
:mod:`simfl.latency.fedscale` (FedScale's device-capacity and availability
pickles). Both give :class:`Device` rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import Field

from simfl.errors import InputError
from simfl.fields import PositiveFloat, PositiveInt, Section
from simfl.latency.base import FlopsUse, LatencyModel, RoundTimes, Workload

Absences = list[list[tuple[float, float | None]]]
"""Per client, the intervals ``(leave, rejoin)`` it is away (``rejoin`` None: for good)."""


@dataclass(frozen=True)
class Device:
    """One device of a fleet: how fast it trains and sends, and when it is present."""

    seconds_per_sample: float | None
    """Training seconds per sample (forward and backward), or None when ``flops`` is given."""
    flops: float | None
    """Training FLOP/s (used with the model's FLOPs per sample when ``seconds_per_sample`` is None)."""
    bandwidth: float
    """Bytes per second, both directions."""
    windows: tuple[tuple[float, float], ...] = ()
    """Sorted, disjoint ``(start, end)`` intervals when the device is present; empty: always present."""
    period: float | None = None
    """The windows repeat every ``period`` seconds (FedScale's ``finish_time``); None: they do not."""


class FleetOptions(Section):
    """Options every fleet-trace model shares."""

    path: str = Field(description="Trace file (relative to the scenario file).")
    transfers: PositiveInt = Field(
        2, description="Model transfers per round over the device's bandwidth (2: download and upload)."
    )
    compute_scale: PositiveFloat = Field(1.0, description="Multiplies every device's compute time.")
    availability: bool = Field(
        True, description="Apply the trace's availability windows (as absences added to the scenario's availability)."
    )
    horizon: PositiveFloat | None = Field(
        None, description="Virtual seconds up to which periodic windows are unrolled (set it to budget.time); "
        "needed when the trace's windows repeat."
    )


DEVICE_FLOPS: FlopsUse = ("latency.model: fleet", "a device given in FLOP/s", "seconds_per_sample")
"""Where a fleet's device given in FLOP/s reads the model's training FLOPs."""


def round_seconds(device: Device, workload: Workload, client: int, transfers: int, compute_scale: float) -> float:
    """The round latency of ``client`` on ``device``: compute x work + bytes / bandwidth."""
    work = workload.samples[client] * workload.epochs if client < len(workload.samples) else workload.epochs
    per_sample = device.seconds_per_sample
    if per_sample is None:
        assert device.flops is not None
        per_sample = workload.training_flops(DEVICE_FLOPS) / device.flops
    return compute_scale * per_sample * work + transfers * workload.model_bytes / device.bandwidth


MAX_WINDOWS = 10_000_000
"""Most availability windows a fleet trace may unroll over the scenario's clients (periodic windows x repeats)."""


def unrolled_windows(devices: list[Device], num_clients: int, horizon: float) -> int:
    """How many availability windows the clients' devices unroll up to ``horizon`` (what :func:`absences` builds)."""
    n = len(devices)
    total = 0
    for index, device in enumerate(devices):
        users = num_clients // n + (1 if index < num_clients % n else 0)
        repeats = 1 if device.period is None else math.ceil(horizon / device.period) + 1
        total += users * len(device.windows) * repeats
    return total


def absences(device: Device, horizon: float | None, where: str) -> list[tuple[float, float | None]]:
    """The complement of the device's windows on [0, inf): where it is away."""
    if not device.windows:
        return []
    windows = list(device.windows)
    if device.period is not None:
        if horizon is None:
            raise InputError(f"{where}.horizon", "the trace's windows repeat; set horizon (e.g. to budget.time)")
        period = device.period
        repeats = int(np.ceil(horizon / period)) + 1
        windows = [(s + k * period, min(e, period) + k * period) for k in range(repeats) for s, e in device.windows]
    out: list[tuple[float, float | None]] = []
    t = 0.0
    for start, end in windows:
        if start > t:
            out.append((t, start))
        t = max(t, end)
        if horizon is not None and t >= horizon:
            break
    out.append((t, None))
    return out


WINDOWS_CLIENT_SECONDS = 0.8e-3
"""Reference value: wall seconds per client a run spends on a fleet's presence windows (read, unrolled to the
horizon and followed by the engine) beyond what every run does. Fitted to ``python -m benchmarks.estimate`` of
2026-11-27 (nothing else running): the fleet CSV cases (1,000 clients, 5 seeds) took 2.9-4.1 s and the FedScale
case (500 clients, 10 seeds) 4.5 s more than estimated without it, 0.6-0.9 ms per client and run. Fitted before
:data:`simfl.schema.costs.SERVED_ARRIVAL_SECONDS`, which covers part of the same gap where a server serves the
fleet: at both, the served fleet CSV case is estimated 1.3x over (measured over estimated 0.76)."""


class FleetModel(LatencyModel[FleetOptions]):
    """A fleet-trace delay model: subclasses say how to read the file (:meth:`read`)."""

    Config = FleetOptions

    @classmethod
    def read(cls, config: FleetOptions) -> list[Device]:
        """The fleet's devices, in file order (at least one)."""
        raise NotImplementedError

    @classmethod
    def check(cls, config: FleetOptions, num_clients: int) -> None:
        devices = cls.read(config)
        if config.availability and config.horizon is None and any(d.period is not None for d in devices):
            raise InputError("latency.horizon", "the trace's windows repeat; set horizon (e.g. to budget.time)")
        if config.availability and config.horizon is not None:
            unrolled = unrolled_windows(devices, num_clients, config.horizon)
            if unrolled > MAX_WINDOWS:
                shortest = min(d.period for d in devices if d.period is not None)
                raise InputError(f"latency.path {config.path}", f"its windows repeat every {shortest!r} s, which up to "
                                 f"horizon {config.horizon!r} s unrolls into {unrolled:,} availability windows; the limit "
                                 f"is {MAX_WINDOWS:,}: check the trace's period or lower horizon")

    @classmethod
    def round_times(cls, config: FleetOptions, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """One row per device the clients play (clients ``m mod devices``): its round seconds, every round alike,
        and the intervals its presence windows leave it away (with ``availability``)."""
        cls.check(config, num_clients)
        devices = cls.read(config)
        n = len(devices)
        used = range(min(n, num_clients))
        users = [num_clients // n + (1 if index < num_clients % n else 0) for index in used]
        seconds = [round_seconds(devices[m], workload, m, config.transfers, config.compute_scale) for m in used]
        away = None
        if config.availability and any(d.windows for d in devices):
            away = [absences(devices[m], config.horizon, "latency") for m in used]
        setup = num_clients * WINDOWS_CLIENT_SECONDS if away is not None else 0.0
        return RoundTimes.of(seconds, 0.0, seconds, users, away, setup)

    def __init__(self, config: FleetOptions, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.devices = self.read(config)
        n = len(self.devices)
        self.seconds = [
            round_seconds(self.devices[m % n], workload, m, config.transfers, config.compute_scale)
            for m in range(num_clients)
        ]

    def draw(self, client: int, gen: np.random.Generator) -> float:
        return self.seconds[client]

    def draws(self, client: int, gen: np.random.Generator, n: int) -> list[float]:
        return [self.seconds[client]] * n

    def absences(self) -> Absences | None:
        """Per client, the intervals its device is away (None when availability is off or always present)."""
        return clients_absences(self.devices, self.config, self.num_clients)

    @classmethod
    def flops_use(cls, config: FleetOptions) -> FlopsUse | None:
        return DEVICE_FLOPS if any(d.seconds_per_sample is None for d in cls.read(config)) else None

    @classmethod
    def absences_of(cls, config: FleetOptions, num_clients: int) -> Absences | None:
        return clients_absences(cls.read(config), config, num_clients) if config.availability else None

    @classmethod
    def absence_source(cls, config: FleetOptions) -> str:
        return f"the availability windows of the fleet trace latency.path {config.path}"


def clients_absences(devices: list[Device], config: FleetOptions, num_clients: int) -> Absences | None:
    """Per client (client m plays device m mod n), the intervals its device is away; None when availability is off
    or every device is always present."""
    if not config.availability or not any(d.windows for d in devices):
        return None
    n = len(devices)
    per_device = [absences(d, config.horizon, "latency") for d in devices]
    return [per_device[m % n] for m in range(num_clients)]
