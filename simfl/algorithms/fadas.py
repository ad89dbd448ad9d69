"""FADAS (Wang, Wang, Lu and Chen, "FADAS: Towards Federated Adaptive Asynchronous Optimization", ICML 2024).

Algorithm 1 of the paper (the server side; arXiv:2407.18365), with the delay-adaptive learning rate of its
delay-adaptive variant. The server fills a buffer with the deltas ``Delta^i = W_i - W_start``
of arriving clients; once it holds ``M`` (``buffer``) of them it takes one AMSGrad step::

    Delta_t = (1/M) sum_i Delta^i
    m_t     = beta1 m_{t-1} + (1 - beta1) Delta_t
    v_t     = beta2 v_{t-1} + (1 - beta2) Delta_t^2
    vhat_t  = max(vhat_{t-1}, v_t)                       (elementwise)
    eta_t   = eta                    if tau_max <= tau_c (or no tau_c)
              min(eta, 1 / tau_max)  otherwise           (delay_step: inverse)
    W      <- W + eta_t m_t / (sqrt(vhat_t) + eps)

``m``, ``v`` and ``vhat`` start at zero and there is no bias correction, as in Algorithm 1. The delay
``tau`` of an update is the number of global models published (buffer flushes) since its client was
dispatched, 0 when none (the paper's ``x_{t - tau}`` indexes global rounds), and ``tau_max`` the largest
delay among the buffer's ``M`` updates. The mean is unweighted (``1/M``), as in the paper. Every arriving
client is re-dispatched at once with the current global model (the new one when its update completed the
buffer), as :mod:`simfl.algorithms.fedbuff` does. The returned mixing weight is the step ``eta_t`` of the
flush an arrival triggered, None for an arrival that only fills the buffer.

Readings, and where public code differs:

- ``delay_threshold: null`` (default) is plain FADAS; a threshold ``tau_c`` turns the delay adaptation on.
  The paper's cap is ``1 / tau_max``, which changes the step only once ``tau_max > 1 / eta`` (with
  ``eta = 0.01``, delays beyond 100 global models): ``delay_step: inverse`` (default). AFL-Lib's
  ``alg/fadas.py`` divides the rate instead, ``eta / tau_max``, which acts at every delay above ``tau_c``:
  ``delay_step: scaled``. The two differ whenever ``1 < tau_max < 1 / eta``, so both are offered.
- AFL-Lib computes ``vhat`` but divides by ``sqrt(v)``, i.e. Adam without the AMSGrad maximum; this
  module follows Algorithm 1 (``vhat``) and offers no such option.
- the server's whole state is data (:meth:`FADAS.state`), so checkpoints and ``--resume`` are exact.

Batch norm: as in FedBuff and CA2FL, the running statistics take the rule's step (``bn_stats: step``) or are
set at each flush to the mean of the buffer's arrivals' (``bn_stats: mean``, :mod:`simfl.algorithms.bn_stats`).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, VersionedModel, Versions
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import FADASConfig


def delay_adapted(lr: float, threshold: int | None, max_delay: int, step: str) -> float:
    """``eta_t`` of a flush whose buffer's largest delay is ``max_delay`` (global models)."""
    if threshold is None or max_delay <= threshold:
        return lr
    if step == "inverse":
        return min(lr, 1.0 / max_delay)
    return lr / max_delay


class FADAS(VersionedModel, AsyncAlgorithm[FADASConfig]):
    """Buffered asynchronous updates taken by an AMSGrad server optimizer with a delay-adaptive rate."""

    Config = FADASConfig

    def __init__(self, config: FADASConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        zero = torch.zeros_like(self.w)
        self.m, self.v, self.vhat = zero, zero, zero
        self.acc = zero
        """The sum of the buffered deltas."""
        self.count = 0
        self.max_delay = 0
        """The largest delay among the buffered updates."""
        self.versions = Versions(setup.num_clients)
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        self.acc = self.acc + (arrival.weights - arrival.start)
        self.max_delay = max(self.max_delay, self.versions.staleness(m))
        self.stats.add(arrival.weights)
        self.count += 1
        step: float | None = None
        if self.count == self.config.buffer:
            step = self._flush()
        self.versions.dispatch(m)
        return self.w, step

    def _flush(self) -> float:
        """One AMSGrad step from the full buffer; returns ``eta_t``."""
        cfg = self.config
        delta = self.acc / cfg.buffer
        self.m, self.v = ops.adam_moments(self.m, self.v, delta, cfg.beta1, cfg.beta2)
        self.vhat = torch.maximum(self.vhat, self.v)
        step = delay_adapted(cfg.server_lr, cfg.delay_threshold, self.max_delay, cfg.delay_step)
        self.w = self.stats.flush(ops.adam_step(self.w, self.m, self.vhat, step, cfg.eps), self.count)
        self.versions.publish()
        self.acc = torch.zeros_like(self.w)
        self.count = 0
        self.max_delay = 0
        return step

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "m": self.m, "v": self.v, "vhat": self.vhat, "acc": self.acc, "count": self.count,
                "max_delay": self.max_delay, **self.versions.state(), **self.stats.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w, self.m, self.v, self.vhat, self.acc = (state[k] for k in ("w", "m", "v", "vhat", "acc"))
        self.count = int(state["count"])
        self.max_delay = int(state["max_delay"])
        self.versions.load_state(state)
        self.stats.load_state(state)
