"""FedAC (Zang, Xue, Ou, Chu, Du, Long, "Efficient Asynchronous Federated Learning with Prospective Momentum
Aggregation and Fine-Grained Correction", AAAI 2024).

The paper's three components, as its abstract names them, and the rule this module runs for each:

1. Client weights from the temporal gradient: each buffered update ``Delta_i = W_i - W_start_i`` is weighted by its
   agreement with the server's direction ``D_i``, ``r_i = max(cos(D_i, Delta_i), r_min)`` (cosine over the trainable
   parameters; 0 when either vector is 0), normalised over the buffer: ``p_i = r_i / sum_j r_j``.
2. The server's update with a prospective (look-ahead) weighted momentum and an adaptive rate, once the buffer holds
   ``K`` updates::

       Delta = sum_i p_i Delta_i
       m     = beta1 m + (1 - beta1) Delta
       v     = beta2 v + (1 - beta2) Delta^2
       mhat  = beta1 m + (1 - beta1) Delta                 (the look-ahead: Nesterov's, on the new m)
       W    <- W + eta_g mhat / (sqrt(v) + eps)
       c    <- c + sum_i p_i (c_i+ - c_i)

   with ``m``, ``v`` and the server variate ``c`` zero at the start and no bias correction.
3. The clients' fine-grained correction: each local step descends ``g - c_i + c`` (``c`` as of the client's dispatch,
   ``c_i`` the client's own variate), and the client sets ``c_i+ = c_i - c + (W_start - W_i) / (K_local lr)`` with
   ``K_local`` its steps; this is SCAFFOLD's client side (:class:`simfl.train.hooks.ControlVariate`, option II), whose
   reply the server reads (``arrival.arrays["c_i"]``). The ``c_i`` live with the algorithm, one row per client.

Where this comes from, and the readings chosen. The paper's full text (its equations and Algorithm 1) could not be
read where this module was written, so no equation numbers are cited: the rule is the abstract's three components in
the form AFL-Lib's ``alg/fedac.py`` (the asynchronous FL library's implementation, read, not copied) computes them,
which also gives the defaults (``K = 5``, ``eta_g = 0.001``, ``beta1 = 0.6``, ``beta2 = 0.9``, ``r_min = 0.1``).
Where that code makes a choice the abstract does not settle, or differs from its own description:

- ``direction``: ``since_dispatch`` (default) is AFL-Lib's ``D_i = W - W_start_i``, how far the global model moved
  since the update's client was dispatched; a fresh update (its client dispatched since the last global step) has
  ``D_i = 0`` and weighs ``r_min``. ``last_step`` reads the "temporal gradient" as the latest global step
  ``W_t - W_(t-1)`` (0 before the first), the same for every update of a buffer. The two differ whenever a buffer
  mixes fresh and stale updates, so both are offered. For its first buffers AFL-Lib compares with the global model
  itself (``W``, not a difference); this module compares with the direction there too (0: every update weighs
  ``r_min``, the buffer's plain mean).
- AFL-Lib trains plain SGD and then takes one correction step ``W_i <- W_i - lr (c - c_i)``, and divides its variate
  by ``epochs * lr``; this module corrects every step, as the abstract's "correct the client stochastic gradient"
  says, and divides by the steps taken (SCAFFOLD's option II). The two agree with one step an epoch and no
  correction; ``correction: false`` turns the client side off (``c`` and every ``c_i`` stay 0).
- AFL-Lib normalises by ``sum_j r_j + 1e-8``; this module by ``sum_j r_j`` (positive, as ``r_min > 0``).
- Since the global model moves only when a buffer is full, ``D_i`` is the same at the update's arrival as at the
  flush, so each arrival adds ``r_i Delta_i`` and ``r_i (c_i+ - c_i)`` to two sums, and no buffer of updates is kept.
- Every arriving client is re-dispatched at once with the current global model (the new one when its update filled
  the buffer), as in FedBuff; the returned mixing weight is ``eta_g`` at a flush, None otherwise.
- With ``executor: none`` nothing trains and no variate comes back: ``c`` and the ``c_i`` stay 0, and the server rule
  runs over the pseudo-updates.

Batch norm: the running statistics take the rule's step (``bn_stats: step``) or the buffer's arrivals' mean (``mean``,
:mod:`simfl.algorithms.bn_stats`), as in FedBuff and FADAS; the variates leave them at 0.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import FedACConfig
from simfl.train.message import NO_MESSAGE, Message


def cosine(x: torch.Tensor, y: torch.Tensor) -> float:
    """cos(x, y), 0 when either vector is 0."""
    norms = float(x.norm()) * float(y.norm())
    return float(torch.dot(x, y)) / norms if norms > 0 else 0.0


class FedAC(AsyncAlgorithm[FedACConfig]):
    """Buffered updates weighted by their agreement with the server's direction, a look-ahead adaptive server step, and
    control-variate corrections of the clients' steps."""

    Config = FedACConfig

    def __init__(self, config: FedACConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        zero = torch.zeros_like(self.w)
        self.zero = zero
        """A shared zero vector, never changed (a client's variate before its first reply)."""
        self.m, self.v, self.c, self.last = zero, zero, zero, zero
        """Momentum, second moment, server variate, the latest global step."""
        self.acc, self.acc_c = zero, zero
        """sum r_i Delta_i and sum r_i (c_i+ - c_i) over the buffer so far."""
        self.total = 0.0
        """sum r_i over the buffer so far."""
        self.count = 0
        self.variates = setup.vectors()
        """Row i: client i's variate c_i (no row: zero)."""
        self.params = setup.layout.mask("param").to(self.w.device)
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        return self.w

    def message(self, client: int, round: int) -> Message:
        """SCAFFOLD's correction with the current ``c`` and the client's ``c_i`` (none with ``correction: false``)."""
        if not self.config.correction:
            return NO_MESSAGE
        own = self.variates.get(client)
        return Message({"control_variate": None}, {"c": self.c, "c_i": self.zero if own is None else own})

    def weight(self, arrival: Arrival) -> float:
        """r_i = max(cos(D_i, Delta_i), r_min) over the trainable parameters."""
        direction = self.w - arrival.start if self.config.direction == "since_dispatch" else self.last
        delta = arrival.weights - arrival.start
        return max(cosine(direction[self.params], delta[self.params]), self.config.min_weight)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        r = self.weight(arrival)
        self.acc = torch.add(self.acc, arrival.weights - arrival.start, alpha=r)
        new = arrival.arrays.get("c_i") if self.config.correction else None
        if new is not None:
            old = self.variates.get(arrival.client)
            self.acc_c = torch.add(self.acc_c, new if old is None else new - old, alpha=r)
            self.variates.put(arrival.client, new)
        self.total += r
        self.count += 1
        self.stats.add(arrival.weights)
        if self.count < self.config.buffer:
            return self.w, None
        self._flush()
        return self.w, self.config.server_lr

    def _flush(self) -> None:
        """The look-ahead adaptive step and the server variate's update from the full buffer."""
        cfg = self.config
        delta = self.acc / self.total
        self.m, self.v = ops.adam_moments(self.m, self.v, delta, cfg.beta1, cfg.beta2)
        ahead = torch.lerp(delta, self.m, cfg.beta1)  # beta1 m + (1 - beta1) Delta, on the new m
        new = self.stats.flush(ops.adam_step(self.w, ahead, self.v, cfg.server_lr, cfg.eps), self.count)
        self.last, self.w = new - self.w, new
        self.c = self.c + self.acc_c / self.total
        self.acc, self.acc_c = self.zero, self.zero
        self.total = 0.0
        self.count = 0

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "m": self.m, "v": self.v, "c": self.c, "last": self.last, "acc": self.acc,
                "acc_c": self.acc_c, "total": self.total, "count": self.count, "variates": self.variates.state(),
                **self.stats.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w, self.m, self.v, self.c, self.last, self.acc, self.acc_c = (
            state[k] for k in ("w", "m", "v", "c", "last", "acc", "acc_c"))
        self.total = float(state["total"])
        self.count = int(state["count"])
        self.variates = self.setup.vectors()
        self.variates.load_state(state["variates"])
        self.stats.load_state(state)
