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
  :data:`~simfl.algorithms.configs.PAIRWISE_MAX_CLIENTS` clients: the paper's ablation runs 10, and at 100 one
  arrival already costs about as much as a client's local round of the paper's MNIST
  setting (E = 5).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms import ops
from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, SingleModel
from simfl.algorithms.calibration import Calibration
from simfl.algorithms.configs import (
    FedAsyncConfig,
    OrthoFLNoCalibConfig,
    OrthoFLNoMAConfig,
    OrthoFLPairwiseConfig,
    PolynomialStaleness,
    polynomial_staleness,
)
from simfl.algorithms.fedasync import FedAsync


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





class OrthoFLPairwise(AsyncAlgorithm[OrthoFLPairwiseConfig]):
    """OrthoFL-Pairwise: the incoming update is projected off the other clients' latest updates."""

    Config = OrthoFLPairwiseConfig

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
        weight = self.config.beta * polynomial_staleness(arrival.staleness, self.config.a)
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
