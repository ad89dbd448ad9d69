"""Replay: each client plays back one device's measured round latencies in order, cycling.

Devices are assigned as in :mod:`simfl.latency.rpi_gaussian` (random from a
profile set, or an explicit list). Client m's k-th round is the device's
``(k + offset) mod n``-th measured upload, in the order of ``uploads.csv``
(gateway 1, 2, 3, then arrival order); ``offset`` is 0 unless
``random_offset`` starts each client at a random upload (stream
``(seed, "latency-offset", m)``), so that clients sharing a device do not
move in lockstep. With scaling, an upload lasts ``c * compute + k * comm``.
No randomness is used per round; the per-client positions are part of the state.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from simfl import rng
from simfl.errors import InputError
from simfl.fields import NonNegInt
from simfl.latency.base import LatencyModel, RoundTimes, Workload, grouped
from simfl.latency.profiles import (
    check_devices,
    client_devices,
    load_devices,
    load_uploads,
    profile_set,
)
from simfl.latency.scaling import Scaled, TraceOptions, check_workload, factors


class ReplayConfig(TraceOptions):
    """Replay measured upload latencies per device."""

    model: Literal["replay"] = Field("replay", description="Delay model name.")
    profiles: Literal["paper9", "all"] = Field(
        "paper9", description="Device set to assign from at random: paper9 or all (>= 3 uploads)."
    )
    devices: list[NonNegInt] | None = Field(
        None,
        description="Explicit device per client (one per client) instead of a random draw: with profiles: paper9 "
        "a position 0-8 in that set (e.g. [2, 8, 2, 1, 7, 5, 2, 4, 6, 0]), with profiles: all a device id of "
        "devices.csv.",
    )
    random_offset: bool = Field(False, description="Start each client at a random position of its device's sequence.")


class Replay(Scaled, LatencyModel[ReplayConfig]):
    """Client m's k-th latency is its device's measured upload (k + offset) mod n."""

    Config = ReplayConfig

    @classmethod
    def check(cls, config: ReplayConfig, num_clients: int) -> None:
        uploads = load_uploads(config.traces)
        if config.devices is not None:
            check_devices(config.devices, num_clients, uploads, config.profiles)
        else:
            absent = [d for d in profile_set(config.profiles, load_devices(config.traces)) if d not in uploads]
            if absent:
                raise InputError("latency.profiles", f"devices {absent} of profile set {config.profiles!r} have no "
                                 f"uploads in uploads.csv of {config.traces or 'the packaged traces'}")

    def __init__(self, config: ReplayConfig, num_clients: int, seed: int, workload: Workload) -> None:
        super().__init__(config, num_clients, seed, workload)
        self.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        uploads = load_uploads(config.traces)
        self.devices = client_devices(config.devices, config.profiles, load_devices(config.traces), num_clients, seed)
        comp, comm = factors(config.scaling, workload, num_clients)
        self.sequences = [
            [r if comp[m] == comm[m] == 1.0 else comp[m] * c + comm[m] * (r - c) for c, r in uploads[d]]
            for m, d in enumerate(self.devices)
        ]  # unscaled: the measured value itself, bit for bit
        if config.random_offset:
            self.positions = [
                int(rng.stream(seed, "latency-offset", m).integers(len(s))) for m, s in enumerate(self.sequences)
            ]
        else:
            self.positions = [0] * num_clients

    @classmethod
    def round_times(cls, config: ReplayConfig, num_clients: int, seed: int, workload: Workload) -> RoundTimes:
        """One row per (device, scale) of the clients under ``seed``: the mean, spread and shortest of the device's
        uploads as the client plays them (scaled). Over many rounds a client plays its whole sequence, whatever
        its starting position."""
        cls.check(config, num_clients)
        check_workload(config.scaling, workload, num_clients)
        uploads = load_uploads(config.traces)
        devices = client_devices(config.devices, config.profiles, load_devices(config.traces), num_clients, seed)
        comp, comm = factors(config.scaling, workload, num_clients)
        rows, counts = grouped(np.column_stack([devices, comp, comm]))
        played = [np.array([c * a + k * (r - a) for a, r in uploads[int(d)]]) if (c, k) != (1.0, 1.0)
                  else np.array([r for _, r in uploads[int(d)]]) for d, c, k in rows.tolist()]
        return RoundTimes.of([p.mean() for p in played], [p.std() for p in played], [p.min() for p in played], counts)

    def draw(self, client: int, gen: np.random.Generator) -> float:
        seq = self.sequences[client]
        value = seq[self.positions[client] % len(seq)]
        self.positions[client] = (self.positions[client] + 1) % len(seq)
        return float(value)

    def state(self) -> dict[str, Any]:
        return {**super().state(), "positions": list(self.positions)}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self.positions = list(state["positions"])
