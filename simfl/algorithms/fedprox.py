"""FedProx (Li et al., "Federated Optimization in Heterogeneous Networks", MLSys 2020).

Update rule: clients minimise ``F_k(w) + mu/2 ||w - W||^2``; the server sets
``W <- sum_k n_k W_k / sum_k n_k`` as FedAvg does.

The proximal term is a local-training hook (:func:`simfl.train.hooks.proximal`), asked for
by :meth:`FedProx.local_options`; ``w_start`` there is the round's global model. ``clients_per_round`` must not
exceed the number of clients (the scenario layer checks it).

Batch norm: averaged like every other weight; the proximal term covers the
trainable parameters only (running statistics have no gradient).
"""

from __future__ import annotations

from typing import Any

from simfl.algorithms.configs import FedProxConfig
from simfl.algorithms.fedavg import FedAvg


class FedProx(FedAvg):
    """FedAvg's aggregation with a proximal term in local training."""

    Config = FedProxConfig
    config: FedProxConfig

    def local_options(self) -> dict[str, Any]:
        """The proximal term of :func:`simfl.train.hooks.proximal` (none when mu is 0)."""
        return {"prox_mu": self.config.mu} if self.config.mu > 0 else {}
