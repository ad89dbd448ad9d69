"""FedDyn (Acar et al., "Federated Learning Based on Dynamic Regularization", ICLR 2021), Algorithm 1.

- Each round the server sends ``theta^(t-1)`` to the sampled devices ``P_t``. Device ``k`` minimises its dynamically
  regularised loss ``L_k(theta) - <g_k, theta> + alpha/2 ||theta - theta^(t-1)||^2`` from ``theta^(t-1)``, where
  ``g_k = grad L_k(theta_k^(t-1))`` is the gradient state it keeps (zero at the start), then sets
  ``g_k <- g_k - alpha (theta_k^t - theta^(t-1))`` (the first-order condition of its minimum) and sends ``theta_k^t``.
- The server sets ``h <- h - alpha (1/m) sum_(k in P_t) (theta_k^t - theta^(t-1))`` (``m``: every device, ``h``
  zero at the start) and ``theta^t = (1/|P_t|) sum_(k in P_t) theta_k^t - h / alpha``.

In simfl the devices' states live with the algorithm, in a per-client store (:mod:`simfl.algorithms.store`: a row per
client seen, no row meaning ``g_k = 0``), as SCAFFOLD's variates do: the message carries ``-g_k`` to the client, where
:class:`simfl.train.hooks.LinearTerm` adds the linear term and :func:`simfl.train.hooks.proximal` the quadratic one
(``prox_mu: alpha``, anchored at the round's start weights ``theta^(t-1)``), and the server updates ``g_k`` from the
trained weights it receives, the same arithmetic as on the device. Readings where the paper leaves a choice:

- "Minimises" is ``train.epochs`` of SGD (the authors' code does the same; the paper's analysis assumes an exact
  minimum). The authors' code also clips each gradient at norm 10, which simfl's trainer does not.
- ``alpha_scaling``: ``none`` gives every device Algorithm 1's ``alpha``; ``samples`` gives device ``k``
  ``alpha / (n_k / mean_j n_j)``, as the authors' code (``utils_methods.py``, ``alpha_coef_adpt``) does, both in its
  regulariser and in its ``g_k`` update, while the server's ``h`` keeps ``alpha``; with equal shards they are one.
- ``evaluated``: what is scored. ``server`` is ``theta^t`` (Algorithm 1's server model, what the devices train
  from); ``active_mean`` is the plain mean of the round's device models, ``theta^t + h / alpha``, which the authors'
  code scores beside it (its ``sel`` model; with every device in every round also its ``all`` model, the one its
  example plots). Training is the same either way.
- ``P_t`` is the set of clients whose update reached the server (failures or a deadline make it smaller than
  ``clients_per_round``); a device that did not report keeps its ``g_k``, as Algorithm 1's inactive devices do.
- The regulariser and ``h`` cover the trainable parameters; batch-norm running statistics take the round's plain
  mean, and their ``g_k`` and ``h`` entries stay 0.
- With ``executor: none`` nothing trains: the pseudo-updates still move ``g_k``, ``h`` and ``theta`` by the rule.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import FedDynConfig
from simfl.train.message import Message

LINEAR = "feddyn.linear"
"""The message's array of ``-g_k``, the linear term's ``v`` (:class:`simfl.train.hooks.LinearTerm`)."""


class FedDyn(SyncAlgorithm[FedDynConfig]):
    """Synchronous rounds; each device's loss carries a dynamic regulariser, the server model a correction ``-h/alpha``."""

    Config = FedDynConfig

    def __init__(self, config: FedDynConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.theta = setup.init.clone()
        """theta^t: the server model the devices train from."""
        self.mean = self.theta
        """The plain mean of the last round's device models (theta^0 before any round)."""
        self.h = torch.zeros_like(self.theta)
        self.grads = setup.vectors()
        """Row k: device k's gradient state g_k (no row: zero)."""
        self.buffer_index = setup.layout.mask("buffer").nonzero().flatten()
        """Where the batch-norm running statistics are (often nowhere): no regulariser there."""
        total = sum(setup.client_sizes)
        self.mean_size = total / setup.num_clients if setup.num_clients else 0.0

    @property
    def clients_per_round(self) -> int:
        return self.config.clients_per_round

    def alpha_of(self, client: int) -> float:
        """Device ``client``'s alpha: the config's, or under ``alpha_scaling: samples`` divided by its share of the mean
        shard (a device without samples trains no step and keeps the config's)."""
        alpha = self.config.alpha
        n = self.setup.client_sizes[client]
        if self.config.alpha_scaling == "samples" and n > 0:
            return alpha * self.mean_size / n
        return alpha

    def gradient(self, client: int) -> torch.Tensor:
        """g_k, device ``client``'s gradient state (zero before its first report)."""
        row = self.grads.get(client)
        return torch.zeros_like(self.theta) if row is None else row

    def round_weights(self) -> torch.Tensor:
        return self.theta

    def global_weights(self) -> torch.Tensor:
        return self.theta if self.config.evaluated == "server" else self.mean

    def message(self, client: int, round: int) -> Message:
        """The quadratic term's alpha and, once the device has a gradient state, the linear term's ``-g_k`` (a new
        tensor: the store's row is replaced, never changed, but the message must not depend on that)."""
        hooks: dict[str, Any] = {"prox_mu": self.alpha_of(client)}
        g = self.grads.get(client)
        if g is None:  # g_k = 0: no linear term (adding zero gradients changes nothing)
            return Message(hooks)
        hooks["linear_term"] = LINEAR
        return Message(hooks, {LINEAR: -g})

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        buffers = self.buffer_index.to(self.theta.device)
        drift = torch.zeros_like(self.theta)
        for a in arrivals:
            moved = a.weights - a.start  # theta_k^t - theta^(t-1)
            if buffers.numel():
                moved[buffers] = 0.0
            alpha_k = self.alpha_of(a.client)
            old = self.grads.get(a.client)
            self.grads.put(a.client, moved * -alpha_k if old is None else torch.sub(old, moved, alpha=alpha_k))
            drift.add_(moved)
        alpha = self.config.alpha
        self.h = torch.sub(self.h, drift, alpha=alpha / self.setup.num_clients)
        self.mean = ops.mean([a.weights for a in arrivals])
        self.theta = self.mean - self.h / alpha

    def state(self) -> dict[str, Any]:
        return {"theta": self.theta, "mean": self.mean, "h": self.h, "grads": self.grads.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.theta, self.mean, self.h = state["theta"], state["mean"], state["h"]
        self.grads = self.setup.vectors()
        self.grads.load_state(state["grads"])
