"""AsyncFedED (Wang, Yang, He, Shi and Chen, "AsyncFedED: Asynchronous Federated Learning with Euclidean
Distance based Adaptive Weight Aggregation", arXiv:2205.13797, 2022).

Each arrival is aggregated at once, with a step that shrinks as the global model has moved away from the
model the client trained from, measured against the size of the client's own update::

    Delta = W_i - W_start                          (the client's update from its stale model W_start)
    gamma = ||W - W_start|| / ||Delta||            (the staleness: Euclidean distance, relative)
    eta_g = lam / (gamma + eps)
    W    <- W + eta_g Delta

and the client is re-dispatched the new ``W``. A fresh update (``W = W_start``, no other update in
between) has ``gamma = 0`` and the largest step, ``lam / eps``; the returned mixing weight is ``eta_g``.
The norms are taken over the whole flat vector (batch-norm running statistics included, as the rule's step
includes them), accumulated in float64.

Readings:

- the paper also adapts each client's number of local epochs to its staleness
  (``K_i <- K_i + floor((gamma_bar - gamma) kappa)``, its ``gamma_bar`` and ``kappa``). simfl's local
  training runs the scenario's ``train.epochs`` for every client, and a client's round latency is drawn
  independently of the algorithm (``docs/architecture.md``, "Adding a delay model"), so that part is not
  simulated: every client trains ``train.epochs``, and this module is the paper's aggregation alone;
- an update of zero norm (nothing trained, e.g. ``executor: none``) changes nothing whatever ``eta_g``; its
  ``gamma`` is taken as 0 when the global model has not moved either (``eta_g = lam / eps`` is reported), and
  as infinite otherwise (``eta_g = 0``);
- ``lam`` and ``eps`` are tuned per task in the paper; the defaults (1 and 1) take a fresh update whole and
  halve the step at ``gamma = 1``.

Public code read: the ``AsyncFedED`` aggregation of the FedOpt framework (a ``compute_staleness`` over the
state dicts, ``server_lr = lambda / (gamma + epsilon)``, the same rule; it also sends each client its new
epoch count). The r-gg/flower-async strategy named after the paper applies a staleness discount of update
counts instead of the distance, and is not this rule.
"""

from __future__ import annotations

import math

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, SingleModel
from simfl.algorithms.configs import AsyncFedEDConfig


def relative_staleness(drift: torch.Tensor, delta: torch.Tensor) -> float:
    """``gamma = ||drift|| / ||delta||`` (float64): 0 when both are zero, infinite when only ``delta`` is."""
    moved = float(torch.linalg.vector_norm(drift, dtype=torch.float64))
    size = float(torch.linalg.vector_norm(delta, dtype=torch.float64))
    if size == 0.0:
        return 0.0 if moved == 0.0 else math.inf
    return moved / size


class AsyncFedED(SingleModel, AsyncAlgorithm[AsyncFedEDConfig]):
    """Each arrival added with a step inversely proportional to its relative Euclidean staleness."""

    Config = AsyncFedEDConfig

    def __init__(self, config: AsyncFedEDConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        delta = arrival.weights - arrival.start
        gamma = relative_staleness(self.w - arrival.start, delta)
        step = self.config.lam / (gamma + self.config.eps)
        self.w = self.w + step * delta
        return self.w, step

