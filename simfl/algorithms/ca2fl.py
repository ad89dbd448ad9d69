"""CA2FL (Wang et al., "Tackling the Data Heterogeneity in Asynchronous Federated Learning
with Cached Update Calibration", ICLR 2024).

Update rule: after M arrivals ``W <- W + server_lr * (h_t + Delta_t / M)``, ``Delta_t = sum (delta_i - h_t^i)``.

The server caches each client's latest delta (``delta_i = W_i - W_start``; every
cache starts at zero) and ``h_t``, the mean of the caches over *all* N clients.
This follows Algorithm 2 of the paper (CA2FL). Within buffer round t:

1. on each arrival of client i: ``Delta_t += delta_i - h_t^i``, where ``h_t^i`` is i's
   cache *as of the start of round t*; then ``h_{t+1}^i <- delta_i``;
2. once M updates have been received: ``v_t = h_t + Delta_t / M`` and
   ``W <- W + server_lr * v_t``;
3. then ``h_{t+1} = mean_i h_{t+1}^i`` over all N clients (clients that did not
   arrive keep ``h_{t+1}^j = h_t^j``) and ``Delta_t <- 0``.

Two details the algorithm leaves to its reading, and the choices made:

- a client that arrives twice within one buffer (it is re-dispatched at once, so a
  fast client can): step 1 is written with ``h_t^i``, the cache of round t, so both of
  its arrivals are calibrated with the cache it had when the round began, and its
  cache ends at its latest delta (``calibrate_with: round_start``, the default). Some
  third-party implementations subtract the running cache instead, so the second
  arrival is corrected by the first's delta (``calibrate_with: latest``). On the MNIST
  paper setting every buffer of 10 holds a repeated client (``results/derived.py``,
  ``ca2fl_repeats``), so the two readings are compared in
  ``scenarios/studies/ca2fl_readings.yaml``: at E = 5, seed 0, they end 0.1 points
  apart (92.5% and 92.4%; ``results/README.md``);
- "until |S_t| = M": the round closes after M received updates (a repeated client
  counts each time), so ``Delta_t / M`` is the mean of the M calibrated terms summed.

Clients are re-dispatched at once with the current global model, which is the new
model when their arrival completed the buffer. No mixing weight (None).

Clients seen for the first time, and clients back after many global versions (cross-device
serving, scenario ``server:``): Algorithm 2 initialises every cache to zero and keeps a cache
until its client arrives again, however old; so a first arrival is calibrated with
``h_t^i = 0`` and a returning client's arrival with the delta it sent last, and ``h_t`` keeps
averaging over all N clients (zero for those never seen). The caches live in a
:class:`~simfl.algorithms.store.ClientVectors` store holding rows only for clients seen; ``h_t``
is summed over those rows in client order, each scaled by ``1/N`` (a zero row adds nothing, so
the value is the mean over all N, to the bit), at a flush's cost in proportion to the clients seen.

Batch norm: BN weights take the calibrated step like every other weight; running
statistics take it too (``bn_stats: step``, the default), or are set at each flush
to the mean of the arrivals' (``bn_stats: mean``): :mod:`simfl.algorithms.bn_stats`
says why (the step adds cached deltas of older models, and a stepped running
variance can move below zero).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import CA2FLConfig


class CA2FL(AsyncAlgorithm[CA2FLConfig]):
    """Buffered aggregation calibrated with each client's cached latest delta."""

    Config = CA2FLConfig

    def __init__(self, config: CA2FLConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        zero = torch.zeros_like(self.w)
        self.zero = zero
        self.cache = setup.vectors()
        """h_{t+1}^i: each client's latest delta (no row, i.e. zero, until it first arrives)."""
        self.round_cache: dict[int, torch.Tensor] = {}
        """h_t^i of the clients that arrived in the current buffer round: their cache as of its start (the
        others' is still their cache)."""
        self.cache_mean = zero
        """h_t: the mean of the caches as of the last flush."""
        self.acc = zero
        self.count = 0
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        delta = arrival.weights - arrival.start
        latest = self.cache.get(m)
        latest = self.zero if latest is None else latest
        round_start = self.round_cache.setdefault(m, latest)
        subtract = round_start if self.config.calibrate_with == "round_start" else latest
        self.acc = self.acc + (delta - subtract)
        self.cache.put(m, delta)
        self.stats.add(arrival.weights)
        self.count += 1
        if self.count == self.config.buffer:
            step = self.cache_mean + self.acc / self.config.buffer
            self.w = self.stats.flush(self.w + self.config.server_lr * step, self.count)
            self.cache_mean = self._mean()
            self.round_cache = {}
            self.acc = torch.zeros_like(self.w)
            self.count = 0
        return self.w, None

    def _mean(self) -> torch.Tensor:
        """h_t: the mean of all N caches (rows never set are zero and add nothing)."""
        out = torch.zeros_like(self.w)
        for _, row in self.cache.items():
            out.add_(row, alpha=1.0 / self.setup.num_clients)
        return out

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {
            "w": self.w,
            "cache": self.cache.state(),
            "round_cache": dict(self.round_cache),
            "cache_mean": self.cache_mean,
            "acc": self.acc,
            "count": self.count,
            **self.stats.state(),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        cache, round_cache = state["cache"], state["round_cache"]
        if isinstance(cache, list):  # a checkpoint from before the store: every client's cache, at round start too
            round_cache = {i: r for i, (c, r) in enumerate(zip(cache, round_cache, strict=True)) if not torch.equal(c, r)}
            cache = {"length": self.w.numel(), "rows": dict(enumerate(cache))}
        self.cache = self.setup.vectors()
        self.cache.load_state(cache)
        self.round_cache = {int(i): v for i, v in round_cache.items()}
        self.cache_mean = state["cache_mean"]
        self.acc = state["acc"]
        self.count = int(state["count"])
        self.stats.load_state(state)
