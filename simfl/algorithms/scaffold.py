"""SCAFFOLD (Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for Federated Learning", ICML 2020).

Algorithm 1 of the paper, with its option II for the client variate:

- the server keeps the global model ``x`` and a server control variate ``c``; each client
  ``i`` a client variate ``c_i``, all zero at the start;
- each round it samples ``S`` clients and sends them ``(x, c)``; client ``i`` runs ``K``
  local steps ``y <- y - lr (g_i(y) - c_i + c)`` from ``y = x`` and sets
  ``c_i+ = c_i - c + (x - y) / (K lr)`` (option II), sending back ``y - x`` and
  ``c_i+ - c_i``;
- the server sets ``x <- x + server_lr * mean_i(y_i - x)`` and
  ``c <- c + |S| / N * mean_i(c_i+ - c_i)``.

In simfl the client variates live with the algorithm (the server side of the simulation
holds every client's state), so the message carries ``c`` and ``c_i`` to the client and the
reply carries ``c_i+`` back (:class:`simfl.train.hooks.ControlVariate` is the client side);
the algorithm is the same. Readings where the paper leaves a choice:

- ``K`` is the number of optimizer steps the client took, which ``train.epochs`` and the
  client's shard size decide (the paper's experiments fix K; its option II formula
  divides by the steps actually taken, so a client with more data is not over-corrected);
- ``S`` is the set of clients whose update reached the server this round (with failures
  or a deadline it can be smaller than ``clients_per_round``); their means are unweighted,
  as in Algorithm 1 (``weighting: samples`` weighs both means by sample counts instead,
  as FedAvg does); a client that did not report keeps its ``c_i``;
- control variates cover the trainable parameters; batch-norm running statistics are
  averaged into ``x`` like the weights, and their variate entries stay 0;
- with ``executor: none`` nothing trains, no variate comes back and every ``c_i`` and ``c``
  stay 0 (the state size is still SCAFFOLD's).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, Setup, SyncAlgorithm
from simfl.algorithms.configs import ScaffoldConfig
from simfl.train.message import Message


class Scaffold(SyncAlgorithm[ScaffoldConfig]):
    """Synchronous rounds with server and client control variates correcting each local step for client drift."""

    Config = ScaffoldConfig

    def __init__(self, config: ScaffoldConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.x = setup.init.clone()
        self.c = torch.zeros_like(self.x)
        self.c_local = setup.vectors()
        """Row i: client i's variate c_i (no row: zero, Algorithm 1's initial c_i)."""

    @property
    def clients_per_round(self) -> int:
        return self.config.clients_per_round

    def round_weights(self) -> torch.Tensor:
        return self.x

    def global_weights(self) -> torch.Tensor:
        return self.x

    def message(self, client: int, round: int) -> Message:
        """``c`` and ``c_i`` with the control-variate hook (copies: the server changes its own in place later)."""
        return Message({"control_variate": None}, {"c": self.c.clone(), "c_i": self._c_i(client).clone()})

    def _c_i(self, client: int) -> torch.Tensor:
        row = self.c_local.get(client)
        return torch.zeros_like(self.x) if row is None else row

    def aggregate(self, arrivals: list[Arrival]) -> None:
        if not arrivals:
            raise ValueError("a round needs at least one arrival")
        if self.config.weighting == "samples":
            weights = [float(a.num_samples) for a in arrivals]
        else:
            weights = [1.0] * len(arrivals)
        dx = ops.weighted_mean([a.weights - a.start for a in arrivals], weights)
        reported = [a for a in arrivals if "c_i" in a.arrays]
        if reported:
            deltas = [a.arrays["c_i"] - self._c_i(a.client) for a in reported]
            dc = ops.weighted_mean(deltas, [w for w, a in zip(weights, arrivals, strict=True) if "c_i" in a.arrays])
            for a in reported:
                self.c_local.put(a.client, a.arrays["c_i"])
            self.c = self.c + (len(reported) / self.setup.num_clients) * dc
        self.x = self.x + self.config.server_lr * dx

    def state(self) -> dict[str, Any]:
        return {"x": self.x, "c": self.c, "c_local": self.c_local.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.x, self.c = state["x"], state["c"]
        self.c_local = self.setup.vectors()
        self.c_local.load_state(state["c_local"])
