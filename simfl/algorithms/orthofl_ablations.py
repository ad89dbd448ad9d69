"""The ablations of OrthoFL in the paper's section 4.4 (``shared/paper/orthofl.tex``), each a registry name.

- ``orthofl_no_calib`` (:class:`OrthoFLNoCalib`): no calibration, i.e. FedAsync with
  polynomial staleness, ``alpha = beta``; batch norm is averaged like any weight, as there.
- ``orthofl_no_ma`` (:class:`OrthoFLNoMA`): no moving average; the global model *is*
  the last calibrated client model, ``W <- W_m^(t) + perp(W^(t) - W_m^(tau+), dWm)``
  (the global right after m's previous arrival is what m was sent), and it is both
  sent and evaluated.
- ``orthofl_pairwise`` (:class:`OrthoFLPairwise`), interpreted as follows. The server
  keeps the latest raw update ``dW_j`` of every client j that has arrived. On m's
  arrival the *incoming update* is made orthogonal, per layer, to the span of the
  latest updates of all other clients (parallel components removed one direction at
  a time after orthogonalising the directions among themselves), and the client
  gets ``W_m^(tau+) + dW + proj(dWm)``: the roles of the two vectors in OrthoFL's
  calibration are swapped, the global shift ``dW`` (paper's definition) is taken in
  full. The global moving average is OrthoFL's, so only the calibration differs.
  Batch-norm policy and granularity as for OrthoFL. Its arrival visits every client seen:
  the directions are orthogonalised among themselves at each arrival, in client order, so
  the work grows with the square of their number (k), about ``0.2 ms * k^2`` at LeNet5 size
  (44,190 parameters, one thread: 0.04 s at k = 10, 2.0 s at 100, 18 s at 300). An
  incremental basis would give other numbers (the order and the dropped dependent
  directions decide the rounding), so it is not bounded per arrival but refused above
  :data:`PAIRWISE_MAX_CLIENTS` clients: the paper's ablation runs 10, and at 100 one
  arrival already costs about as much as a client's local round of the paper's MNIST
  setting (E = 5).
"""

from __future__ import annotations

from typing import Any, Literal

import torch
from pydantic import Field

from simfl.algorithms import ops
from simfl.algorithms.base import AlgorithmConfig, Arrival, AsyncAlgorithm, Setup, SingleModel
from simfl.algorithms.calibration import BN_DESCRIPTION, GRANULARITY_DESCRIPTION, BnPolicy, Calibration, Granularity
from simfl.algorithms.fedasync import FedAsync, FedAsyncConfig, PolynomialStaleness
from simfl.errors import InputError
from simfl.fields import NonNegFloat, UnitOpen

PAIRWISE_MAX_CLIENTS = 100
"""The most clients ``orthofl_pairwise`` runs over (see the module docstring)."""


class OrthoFLNoCalibConfig(AlgorithmConfig):
    """Parameters of OrthoFL without calibration (= FedAsync, polynomial staleness)."""

    name: Literal["orthofl_no_calib"] = Field("orthofl_no_calib", description="Algorithm name.")
    beta: UnitOpen = Field(0.6, description="Base mixing weight beta in (0, 1).")
    a: NonNegFloat = Field(0.5, description="Staleness exponent: beta_t = beta * s^(-a).")


class OrthoFLNoCalib(AsyncAlgorithm[OrthoFLNoCalibConfig]):
    """OrthoFL w/o calibration: clients get the moving average itself (FedAsync with alpha = beta)."""

    Config = OrthoFLNoCalibConfig

    def __init__(self, config: OrthoFLNoCalibConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        inner = FedAsyncConfig(
            name="fedasync",
            alpha=config.beta,
            staleness=PolynomialStaleness(kind="polynomial", a=config.a),
        )
        self.inner = FedAsync(inner, setup)

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.inner.initial_weights(client)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        return self.inner.on_arrival(arrival)

    def global_weights(self) -> torch.Tensor:
        return self.inner.global_weights()

    def state(self) -> dict[str, Any]:
        return self.inner.state()

    def load_state(self, state: dict[str, Any]) -> None:
        self.inner.load_state(state)


class OrthoFLNoMAConfig(AlgorithmConfig):
    """Parameters of OrthoFL without the moving average."""

    name: Literal["orthofl_no_ma"] = Field("orthofl_no_ma", description="Algorithm name.")
    bn: BnPolicy = Field("local", description=BN_DESCRIPTION)
    granularity: Granularity = Field("tensor", description=GRANULARITY_DESCRIPTION)


class OrthoFLNoMA(SingleModel, AsyncAlgorithm[OrthoFLNoMAConfig]):
    """OrthoFL w/o moving average: the global model is the last calibrated client model."""

    Config = OrthoFLNoMAConfig

    def __init__(self, config: OrthoFLNoMAConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.calibration = Calibration(setup.layout, config.bn, config.granularity)
        self.w = setup.init.clone()

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        # W^(tau+) is the model m was sent, so the shift is the global's movement since then.
        shift = self.w - arrival.start
        client_update = arrival.weights - arrival.start
        self.w = arrival.weights + self.calibration.shift(shift, client_update)
        return self.w, None



class OrthoFLPairwiseConfig(AlgorithmConfig):
    """Parameters of OrthoFL with pairwise projection (incoming update orthogonal to other clients' latest).

    At most 100 clients: each arrival orthogonalises the latest updates of every client seen, work that grows with
    the square of their number (about 2 s per arrival at 100 LeNet5 clients)."""

    name: Literal["orthofl_pairwise"] = Field("orthofl_pairwise", description="Algorithm name.")
    beta: UnitOpen = Field(0.6, description="Base mixing weight beta in (0, 1) of the global moving average.")
    a: NonNegFloat = Field(0.5, description="Staleness exponent: beta_t = beta * s^(-a).")
    bn: BnPolicy = Field("local", description=BN_DESCRIPTION)
    granularity: Granularity = Field("tensor", description=GRANULARITY_DESCRIPTION)


class OrthoFLPairwise(AsyncAlgorithm[OrthoFLPairwiseConfig]):
    """OrthoFL-Pairwise: the incoming update is projected off the other clients' latest updates."""

    Config = OrthoFLPairwiseConfig
    keeps_client_models = True
    client_vectors = 2

    @classmethod
    def check_federation(cls, config: Any, num_clients: int, client_app: bool, where: str) -> None:
        if num_clients > PAIRWISE_MAX_CLIENTS:
            raise InputError(where, f"orthofl_pairwise runs over at most {PAIRWISE_MAX_CLIENTS} clients and the "
                             f"partition makes {num_clients:,}: each arrival is made orthogonal to the latest update of "
                             "every other client seen, work that grows with the square of their number (about 2 s per "
                             "arrival at 100 LeNet5 clients, 18 s at 300)")

    def __init__(self, config: OrthoFLPairwiseConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.calibration = Calibration(setup.layout, config.bn, config.granularity)
        self.w = setup.init.clone()
        self.anchors = setup.vectors()
        """W^(tau+) per client (W^(0), ``setup.init``, for a client without a row)."""
        self.latest = setup.vectors()
        """Latest raw update (weights - start) of each client; no row before its first arrival."""

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        self.anchors.put(client, self.w)
        return self.w

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        client_update = arrival.weights - arrival.start
        others = [u for j, u in self.latest.items() if j != m]
        projected = self.calibration.update(client_update, others)
        anchor = self.anchors.get(m)
        shift = self.calibration.mask_local(self.w - (self.setup.init if anchor is None else anchor))
        # on local batch norm the client keeps its own trained values exactly
        calibrated = self.calibration.local_from(arrival.start + projected + shift, arrival.weights)
        weight = self.config.beta * ops.polynomial_staleness(arrival.staleness, self.config.a)
        self.w = ops.mix(self.w, arrival.weights, weight)
        self.anchors.put(m, self.w)
        self.latest.put(m, client_update)
        return calibrated, weight

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {"w": self.w, "anchors": self.anchors.state(), "latest": self.latest.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.anchors, self.latest = self.setup.vectors(), self.setup.vectors()
        self.anchors.load_state(state["anchors"])
        self.latest.load_state(state["latest"])
