"""MOON (Li, He, Song, "Model-Contrastive Federated Learning", CVPR 2021), Algorithm 1.

- The server runs FedAvg's rounds: it sends the global model ``w^t`` to the round's clients and sets
  ``w^(t+1) = sum_k n_k w_k^t / sum_k n_k`` (Algorithm 1, the server's part).
- Client ``k`` trains from ``w^t`` on ``CE + mu l_con`` (Sec. 3.3, Eq. 3 and 4; Algorithm 1's PartyLocalTraining), with
  ``l_con = -log(exp(sim(z, z_glob)/tau) / (exp(sim(z, z_glob)/tau) + exp(sim(z, z_prev)/tau)))``: ``z`` the
  representation of the batch by the model being trained, ``z_glob`` by the global model ``w^t`` and ``z_prev`` by
  the client's own previous local model ``w_k^(t-1)`` (both frozen), ``sim`` the cosine similarity. The client keeps
  its local model for its next round.

In simfl the client side is the hook :class:`simfl.train.hooks.Contrastive`, which sees each batch and its
representations (:class:`simfl.train.hooks.Batch`); the previous local models live with the algorithm, one row per
client in a per-client store (:mod:`simfl.algorithms.store`), written from the trained weights each arrival brings,
and the message carries the client's row. Readings where the paper leaves a choice:

- The representation. The paper's ``z`` is the output of a projection head (a 2-layer MLP after the base encoder)
  that its networks add for the purpose; simfl's models have none, so ``z`` is the input of the model's output
  layer, its penultimate activations (:mod:`simfl.models.representation`), as AFL-Lib's ``alg/moon.py`` reads it
  (its models' ``return_feat``). Adding a projection head would change the model every other rule trains.
- The frozen models run in evaluation mode (batch norm on their own running statistics), as the authors' code
  (``main.py``: ``global_model.eval()``, the previous nets' ``eval()``) runs them; AFL-Lib runs them in training mode,
  which differs only for models with batch norm or dropout.
- A client's first round has no previous local model: its loss is the cross-entropy alone. The authors' code
  contrasts with an empty pool then (its logits hold the positive alone: ``l_con = 0``) and AFL-Lib skips the term
  (``prev_m is None``); contrasting with the global model itself would give ``l_con = log 2`` with zero gradient,
  so every reading trains alike.
- ``z_prev``'s model is the client's latest model the server received. A round's late update (discarded by the
  round's rule, docs/semantics.md) does not replace it, though the client trained it; the authors' experiments have
  no late updates.
- Weights are averaged with the sample counts ``n_k``, as the authors' code (``fed_avg_freqs``) does; batch-norm
  statistics like every other entry, as FedAvg's.
- ``mu: 0`` sends no hook: FedAvg to the bit. The reported training ``loss`` is the cross-entropy alone, as for every
  hook's term.
- With ``executor: none`` nothing trains: the rounds are FedAvg's over the pseudo-updates.

The paper's defaults: ``tau = 0.5``; ``mu`` tuned over {0.1, 1, 5, 10}, best 5 on CIFAR-10 and 1 on CIFAR-100 and
Tiny-ImageNet; simfl's default is 1, the default of the authors' code (``main.py``, ``--mu``) and of AFL-Lib, and the
paper's best on two of its three datasets.
"""

from __future__ import annotations

from typing import Any

from simfl.algorithms.base import Arrival, Setup
from simfl.algorithms.configs import MOONConfig
from simfl.algorithms.fedavg import FedAvg
from simfl.train.message import NO_MESSAGE, Message

PREVIOUS = "moon.previous"
"""The message's array of the client's previous local model (:class:`simfl.train.hooks.Contrastive`'s negative)."""


class MOON(FedAvg):
    """FedAvg's rounds; each client's loss carries the model-contrastive term against its previous local model."""

    Config = MOONConfig
    config: MOONConfig

    def __init__(self, config: MOONConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.previous = setup.vectors()
        """Row k: client k's latest trained model (no row: it has not delivered yet)."""

    def message(self, client: int, round: int) -> Message:
        """The contrastive term with the client's previous model (its row: rows are replaced, never changed); none
        before its first delivery, or with ``mu: 0``."""
        previous = self.previous.get(client) if self.config.mu > 0 else None
        if previous is None:
            return NO_MESSAGE
        value = {"mu": self.config.mu, "tau": self.config.tau, "negative": PREVIOUS}
        return Message({"contrastive": value}, {PREVIOUS: previous})

    def aggregate(self, arrivals: list[Arrival]) -> None:
        super().aggregate(arrivals)
        for a in arrivals:
            self.previous.put(a.client, a.weights)

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "previous": self.previous.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.previous = self.setup.vectors()
        self.previous.load_state(state["previous"])
