"""FADAS: buffered asynchronous aggregation with an AMSGrad server optimizer and a delay-adaptive step.

Paper: Yujia Wang, Shiqiang Wang, Songtao Lu, Jinghui Chen, "FADAS: Towards Federated
Adaptive Asynchronous Optimization", ICML 2024 (arXiv:2407.18365), Algorithm 1 (the
server side), with the paper's delay-adaptive learning rate.

Server update, once ``M`` client updates are in the buffer (``M`` = ``buffer``)::

    Delta_t = (1/M) sum_i Delta^i            (Delta^i = trained - dispatched weights)
    m_t     = beta1 m_{t-1} + (1 - beta1) Delta_t
    v_t     = beta2 v_{t-1} + (1 - beta2) Delta_t^2
    vhat_t  = max(vhat_{t-1}, v_t)           (elementwise; AMSGrad, no bias correction)
    eta_t   = eta                     if tau_max <= tau_c (or no threshold is set)
              min(eta, 1 / tau_max)   otherwise
    x_{t+1} = x_t + eta_t m_t / (sqrt(vhat_t) + eps)

Readings chosen where the paper leaves room:

- the delay ``tau`` of an update is counted in *global models* (buffer flushes) published
  since its client was dispatched, 0 when none (the paper's ``x_{t - tau}``), not in
  processed arrivals; ``tau_max`` is the largest delay among the buffer's ``M`` updates;
- ``eps`` is added after the square root (as in the update above), and ``m``, ``v``,
  ``vhat`` start at zero;
- the buffer's mean is unweighted (``1/M``), as in the paper, not weighted by client sizes;
- ``delay_threshold: null`` (the default) turns the delay adaptation off, which is the
  plain FADAS of the paper; setting ``tau_c`` gives its delay-adaptive variant. The cap is
  ``1 / tau_max`` as the paper writes it, not ``eta / tau_max``: it changes the step only when
  ``tau_max > 1 / eta`` (with ``eta = 0.01``, delays above 100 global models), so with small
  server learning rates the delay-adaptive variant usually runs exactly as plain FADAS;
- every arriving client is re-dispatched at once with the current global model (the one
  after the flush when its update completed the buffer), as FedBuff does in simfl.

The returned mixing weight is the step size ``eta_t`` of the flush this arrival triggered,
and None for an arrival that only fills the buffer.

State as data: the whole state is in :meth:`FADAS.state` (flat float32 tensors, numbers
and lists), so checkpoints, ``simfl run --resume`` and ``--verify`` work as for built-ins.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from simfl.algorithms import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.base import AlgorithmConfig
from simfl.fields import NonNegFloat, NonNegInt, PositiveFloat, PositiveInt, UnitOpen


class FADASConfig(AlgorithmConfig):
    """FADAS (Wang et al., ICML 2024): buffered async updates, AMSGrad server step, delay-adaptive rate."""

    name: Literal["fadas_example"] = Field("fadas_example", description="Algorithm name.")
    buffer: PositiveInt = Field(10, description="M >= 1: client updates aggregated per global update.")
    server_lr: PositiveFloat = Field(0.01, description="eta: the server learning rate.")
    beta1: UnitOpen = Field(0.9, description="Decay of the first moment m.")
    beta2: UnitOpen = Field(0.99, description="Decay of the second moment v.")
    eps: NonNegFloat = Field(1e-8, description="Added to sqrt(vhat) in the denominator.")
    delay_threshold: NonNegInt | None = Field(
        None, description="tau_c: above this largest delay in a buffer (in global models), the step is "
        "min(eta, 1/tau_max); null: no delay adaptation (plain FADAS)."
    )


class FADAS(AsyncAlgorithm[FADASConfig]):
    """FADAS: buffered asynchronous aggregation with an AMSGrad server optimizer."""

    Config = FADASConfig

    def __init__(self, config: FADASConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.m = torch.zeros_like(self.w)
        self.v = torch.zeros_like(self.w)
        self.vhat = torch.zeros_like(self.w)
        self.version = 0
        """Global models published (buffer flushes) so far."""
        self.dispatched = [0] * setup.num_clients
        """The global version each client was last dispatched with."""
        self.acc = torch.zeros_like(self.w)
        """Sum of the buffered updates."""
        self.count = 0
        self.max_delay = 0
        """Largest delay among the buffered updates."""

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        self.dispatched[client] = self.version
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        client = arrival.client
        self.acc = self.acc + (arrival.weights - arrival.start)
        self.count += 1
        self.max_delay = max(self.max_delay, self.version - self.dispatched[client])
        step: float | None = None
        if self.count == self.config.buffer:
            step = self._flush()
        self.dispatched[client] = self.version
        return self.w, step

    def _flush(self) -> float:
        """One global update from the full buffer; returns the step size used."""
        cfg = self.config
        delta = self.acc / cfg.buffer
        self.m = cfg.beta1 * self.m + (1.0 - cfg.beta1) * delta
        self.v = cfg.beta2 * self.v + (1.0 - cfg.beta2) * delta * delta
        self.vhat = torch.maximum(self.vhat, self.v)
        step = cfg.server_lr
        if cfg.delay_threshold is not None and self.max_delay > cfg.delay_threshold:
            step = min(cfg.server_lr, 1.0 / self.max_delay)
        self.w = self.w + step * self.m / (torch.sqrt(self.vhat) + cfg.eps)
        self.version += 1
        self.acc = torch.zeros_like(self.w)
        self.count = 0
        self.max_delay = 0
        return step

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "m": self.m, "v": self.v, "vhat": self.vhat, "version": self.version,
                "dispatched": list(self.dispatched), "acc": self.acc, "count": self.count,
                "max_delay": self.max_delay}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w, self.m, self.v, self.vhat, self.acc = (state[k] for k in ("w", "m", "v", "vhat", "acc"))
        self.version = int(state["version"])
        self.dispatched = [int(v) for v in state["dispatched"]]
        self.count = int(state["count"])
        self.max_delay = int(state["max_delay"])
