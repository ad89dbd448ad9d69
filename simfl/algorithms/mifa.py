"""MIFA (Gu et al., "Fast Federated Learning in the Presence of Arbitrary Device Unavailability", NeurIPS 2021),
Algorithm 1 (Memory-augmented Impatient Federated Averaging).

Update rule: the server keeps every device's latest update ``G_i``; each round the active devices train ``K`` local
steps from ``w_t`` and replace theirs with ``G_i = (w_t - w_(t,K)^i) / eta_t``, the others keep theirs, and

    w_(t+1) = w_t - eta_t (1/N) sum_(i=1..N) G_i

over all ``N`` devices, active or not: the server never waits for an unavailable device (impatient) and its stale
update stands in for it (memory), which removes the bias towards the devices that happen to be available. simfl's
local learning rate is constant, so ``eta_t G_i`` is the device's latest delta ``Delta_i = w_(tau_i,K)^i - w_tau_i``
and the rule is ``w <- w + (1/N) sum_i Delta_i``. The active devices are a round's clients: by default every free,
present client (``clients_per_round: null``), so the scenario's ``availability:`` (failures, departures, a fleet's
windows) decides who is active; a number samples that many of them, as FedAvg does.

Readings where the paper leaves a choice (the authors' code, ``hmgxr128/MIFA_code``, has both starts):

- ``start``: ``wait`` keeps ``w`` at ``W^(0)`` until every device has delivered once, then applies the rule every
  round, so the memory never holds a missing device (``src/trainers/fdu.py``, which their experiment scripts run;
  there the table is filled by training every device once from ``W^(0)``, here by the devices' first deliveries,
  all from ``W^(0)`` too, and the first step is taken in the round that completes it). ``zero`` applies the rule from
  the first round, a device not heard from yet counting ``G_i = 0`` (``src/trainers/fdu_no_wait.py``). Under
  ``wait`` a device that never delivers (gone for good before its first round) keeps the model at ``W^(0)``.
- ``weighting``: ``uniform`` is the paper's ``1/N`` (its objective is the devices' plain mean); ``samples`` weighs
  device ``i`` by ``n_i / sum_j n_j`` over all devices, the sample-weighted objective FedAvg's weights aim at.
- Batch norm: running statistics are not gradient steps; a stale delta of them added to today's could leave a
  variance below zero, so they take the mean of this round's arrivals (weighted as ``weighting`` says), as FedAdam's
  do, and the memory's sum covers them but is not applied to them.

The sum ``sum_i Delta_i`` is kept in float64 and changed by each arrival (its new delta in, its old one out), so a
round costs its arrivals, not the population.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import MIFAConfig


class MIFA(SyncAlgorithm[MIFAConfig]):
    """Synchronous rounds over the available clients; the step is the mean of every client's latest update."""

    Config = MIFAConfig

    def __init__(self, config: MIFAConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.deltas = setup.vectors()
        """Row i: client i's latest delta Delta_i (no row: not heard from yet)."""
        self.total = torch.zeros(self.w.shape, dtype=torch.float64, device=self.w.device)
        """sum_i c_i Delta_i over the rows (c_i: 1, or n_i under weighting: samples)."""
        self.heard = 0
        """How many clients have a row."""
        self.buffer_index = setup.layout.mask("buffer").nonzero().flatten()
        """Where the batch-norm running statistics are (often nowhere)."""

    @property
    def clients_per_round(self) -> int:
        k = self.config.clients_per_round
        return self.setup.num_clients if k is None else k

    def weight(self, client: int) -> float:
        """c_i: the client's weight in the memory's sum."""
        return float(self.setup.client_sizes[client]) if self.config.weighting == "samples" else 1.0

    def round_weights(self) -> torch.Tensor:
        return self.w

    def global_weights(self) -> torch.Tensor:
        return self.w

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        for a in arrivals:
            delta = a.weights - a.start
            c = self.weight(a.client)
            old = self.deltas.get(a.client)
            total = torch.add(self.total, delta, alpha=c)  # in float64; a new tensor: a state handed out stays
            if old is None:
                self.heard += 1
            else:
                total.sub_(old, alpha=c)
            self.total = total
            self.deltas.put(a.client, delta)
        if self.config.start == "wait" and self.heard < self.setup.num_clients:
            return  # the memory is not full yet: the model stays at W^(0)
        norm = float(sum(self.setup.client_sizes)) if self.config.weighting == "samples" else float(self.setup.num_clients)
        stepped = torch.add(self.w, self.total, alpha=1.0 / norm).to(self.w.dtype)
        buffers = self.buffer_index.to(self.w.device)
        if buffers.numel():
            weights = [self.weight(a.client) for a in arrivals]
            fresh = ops.weighted_mean([a.weights[buffers] for a in arrivals],
                                      weights if sum(weights) > 0 else [1.0] * len(weights))
            stepped[buffers] = fresh
        self.w = stepped

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "total": self.total, "heard": self.heard, "deltas": self.deltas.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w, self.total, self.heard = state["w"], state["total"], int(state["heard"])
        self.deltas = self.setup.vectors()
        self.deltas.load_state(state["deltas"])
