"""Asynchronous SGD with delay-adaptive step sizes, in its two published forms.

Each arrival is applied at once, its step scaled down by its delay ``tau`` (the updates the server applied
between the client's dispatch and its arrival: ``tau = s - 1`` for simfl's staleness ``s >= 1``, 0 for a
fresh update)::

    W <- W + eta_t (W_i - W_start)

the client's update ``W_i - W_start`` (its local steps' sum, the pseudo-gradient of federated asynchronous
SGD) in place of one stochastic gradient. ``form`` chooses ``eta_t``:

- ``mishchenko`` (default): Mishchenko, Bach, Even and Woodworth, "Asynchronous SGD Beats Minibatch SGD Under
  Arbitrary Delays", NeurIPS 2022, the delay-adaptive stepsizes of its analysis: the full step while the delay
  is at most the number of workers ``M`` and one inversely proportional to the delay beyond,
  ``eta_t = eta min(1, M / tau)`` (``M`` is ``workers``). The authors' released code
  (``konstmish/asynchronous_sgd``, ``code.ipynb``: ``lr * num_workers / max(num_workers, delay)``) runs exactly
  this, with the delay counted in server iterations as here;
- ``koloskova``: Koloskova, Stich and Jaggi, "Sharper Convergence Guarantees for Asynchronous SGD for
  Distributed and Federated Learning", NeurIPS 2022, its delay-adaptive learning rate,
  ``eta_t = eta`` while ``tau <= tau_C`` and ``min(eta, c / tau)`` above (their ``c`` a constant over the
  smoothness ``L``); FADAS
  (:mod:`simfl.algorithms.fadas`) writes its own delay-adaptive rate in this shape. ``tau_C`` is
  ``delay_threshold`` and ``c`` is ``delay_scale``.

Readings:

- ``L`` (the smoothness constant both analyses divide by) is unknown for a neural network. With
  ``delay_scale: null`` (default) ``c = eta tau_C``: the step is the largest the analysis allows at
  ``tau = tau_C`` (``eta = c / tau_C``), and the rule is ``eta min(1, tau_C / tau)``, Mishchenko et al.'s shape
  with ``tau_C`` for ``M``. A number sets ``c`` directly, the paper's constant, and the two forms then differ;
- ``workers: null`` and ``delay_threshold: null`` take the number of clients: every client in flight (the
  default population), whose mean delay is about one less. Under cross-device serving (``server:
  {concurrency: C}``) set ``workers: C`` to follow Mishchenko et al., whose ``M`` is the workers computing at
  once;
- the server learning rate ``eta`` (``server_lr``, default 1) multiplies the client's update, which already
  carries the local learning rate: ``eta = 1`` with no delay applies it whole.
"""

from __future__ import annotations

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, SingleModel
from simfl.algorithms.configs import DelayAdaptiveConfig


def delay_step(config: DelayAdaptiveConfig, delay: int, clients: int) -> float:
    """``eta_t`` of an update of delay ``delay`` (server updates in between) on ``clients`` clients."""
    lr = config.server_lr
    if config.form == "mishchenko":
        workers = clients if config.workers is None else config.workers
        return lr * workers / max(workers, delay)
    threshold = clients if config.delay_threshold is None else config.delay_threshold
    if delay <= threshold:
        return lr
    scale = lr * threshold if config.delay_scale is None else config.delay_scale
    return min(lr, scale / delay)


class DelayAdaptive(SingleModel, AsyncAlgorithm[DelayAdaptiveConfig]):
    """Asynchronous SGD over client updates, each step scaled by its delay."""

    Config = DelayAdaptiveConfig

    def __init__(self, config: DelayAdaptiveConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        step = delay_step(self.config, arrival.staleness - 1, self.setup.num_clients)
        self.w = self.w + step * (arrival.weights - arrival.start)
        return self.w, step

