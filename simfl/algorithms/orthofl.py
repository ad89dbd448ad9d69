"""OrthoFL (orthogonal weight calibration for asynchronous FL; ``shared/paper/orthofl.tex``, section 3).

Update rule: the client gets ``W_m^(t) + perp_l(W^(t) - W^(tau+), W_m^(t) - W_m^(tau+))``
and the global becomes ``(1 - beta_t) W^(t) + beta_t W_m^(t)``, ``beta_t = beta * s^(-a)``.

Per arrival of client m (staleness ``s = t - tau >= 1``, the paper's convention; the
released code counts ``s - 1`` other updates and uses ``(count + 1)^(-a)``, the same value):

- client update ``dWm = W_m^(t) - W_m^(tau+)``: what m trained minus what it was sent
  (``arrival.weights - arrival.start``);
- global shift ``dW = W^(t) - W^(tau+)``, where ``W^(tau+)`` is the global model right
  after m's previous arrival (``W^(0)`` before its first), so m's own previous mix-in
  is not part of the shift;
- per layer ``dW_perp = dW - (<dW, dWm> / <dWm, dWm>) dWm``; a layer whose client
  update is zero passes unprojected (never NaN);
- the client trains next on ``W_m^(t) + dW_perp``; the global model (the evaluated
  one) becomes the moving average above.

The server stores ``W^(tau+)`` per client (a :class:`~simfl.algorithms.store.ClientVectors`
store, ``W^(0)`` for a client without a row); in RAM by reference: clients whose previous
arrival left the same global version share one tensor.

Options (all in :class:`OrthoFLConfig`):

- ``shift_source: global`` is the paper's rule above. ``chain`` (the default) is the rule
  of the authors' released code: the server keeps the last calibrated model it sent to
  any client, ``G``, and the shift is ``G - W_m^(tau+)`` (the chain's movement since m
  was dispatched); the client gets ``W_m^(t) + perp(G - W_m^(tau+), dWm)`` and ``G``
  becomes that model. The moving average ``W`` is then only evaluated, never sent,
  and the very first update is mixed in at weight 1 (``first_weight`` overrides).
  Why ``chain`` is the default: it is what the paper's numbers were made with (the
  released code), and at the paper's setting (E = 5, three seeds; ``results/README.md``)
  it lands nearer the paper's MNIST result, the one run on the very same data:
  96.0 +- 2.8% against the paper's 98.2 +- 0.3, where ``global`` gives 94.5 +- 3.2%,
  and ``chain`` is ahead in each of the three seeds. On the HAR setting, whose windows
  here are cut from the raw HAPT recordings rather than the paper's UCI HAR files,
  the two end level (89.1% each, the paper's 89.7 +- 1.0) and ``chain`` reaches the
  target accuracy in half the time. ``global`` stays one option away for the paper's
  equations as written.
  Two details of the released code are not copied: it skips the projection when the
  shift *sums* to zero (here only an all-zero shift gives a zero result), and it
  adds 1e-19 to ``<dWm, dWm>`` (here a zero update passes the shift through).
- ``bn`` and ``granularity``: which entries the projection leaves out and what a layer is
  (:mod:`simfl.algorithms.calibration`).
- ``returning``, under cross-device serving (scenario ``server:``), where a client waits idle
  between its rounds and is sampled again later. The paper's setting is cross-silo (every client
  always training) and its text does not say what an idle client holds. ``own`` (the default)
  follows its protocol as written: the server sends each arriving client its calibrated model,
  which the client keeps and trains from when it is sampled again; its staleness counts from that
  arrival (``tau``: "when the server last received updates from client m"), and its shift is
  measured from ``W^(tau+)`` ('global') or from the model it was sent ('chain'), so the idle time
  is calibrated at its next arrival. ``server`` treats a sampled client as a new one, the way
  cross-device clients are usually taken to be stateless (Kairouz et al., "Advances and Open
  Problems in Federated Learning", 2021, Table 1, client statefulness): it gets what a joining
  client gets now (:meth:`OrthoFL.on_join`: the moving average under 'global', anchored there;
  the chain's latest model under 'chain'), and its staleness counts from that dispatch. A client
  sampled for the first time joins the same way under both.

The ablations of the paper's section 4.4 are :mod:`simfl.algorithms.orthofl_ablations`.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup
from simfl.algorithms.calibration import Calibration
from simfl.algorithms.configs import OrthoFLConfig, polynomial_staleness


class OrthoFL(AsyncAlgorithm[OrthoFLConfig]):
    """Moving-average global model; each client gets the global shift made orthogonal to its update."""

    Config = OrthoFLConfig

    def __init__(self, config: OrthoFLConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.calibration = Calibration(setup.layout, config.bn, config.granularity)
        self.w = setup.init.clone()
        """W: the moving average (evaluated; under 'global' also the shift's source)."""
        self.chain = self.w
        """G: the last calibrated model sent to any client (used under 'chain' only)."""
        self.anchors = setup.vectors()
        """W^(tau+) per client (used under 'global' only)."""
        self.arrivals = 0

    def initial_weights(self, client: int) -> torch.Tensor:
        return self.w

    def on_join(self, client: int) -> torch.Tensor:
        """A late joiner starts from the model the server sends now, anchored there.

        Under 'global' its ``W^(tau+)`` becomes the current moving average, so its first
        calibration adds only the shift since it joined; under 'chain' it is sent the
        chain's latest model ``G`` (the shift is measured from what it was sent).
        """
        if self.config.shift_source == "chain":
            return self.chain
        self.anchors.put(client, self.w)
        return self.w

    def _weight(self, staleness: int) -> float:
        """beta_t, or the configured / chain weight of the very first update."""
        if self.arrivals == 0:
            if self.config.first_weight is not None:
                return self.config.first_weight
            if self.config.shift_source == "chain":
                return 1.0
        return self.config.beta * polynomial_staleness(staleness, self.config.a)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        weight = self._weight(arrival.staleness)
        if self.config.shift_source == "chain":
            shift_to, shift_from = self.chain, arrival.start
        else:
            shift_to, shift_from = self.w, self._anchor(m)
        calibrated, self.w = self.calibration.calibrated_and_mixed(
            arrival.weights, arrival.start, shift_to, shift_from, self.w, weight
        )
        if self.config.shift_source == "chain":
            self.chain = calibrated
        else:
            self.anchors.put(m, self.w)
        self.arrivals += 1
        return calibrated, weight

    def _anchor(self, client: int) -> torch.Tensor:
        anchor = self.anchors.get(client)
        return self.setup.init if anchor is None else anchor  # W^(0) for a client without a row

    def global_weights(self) -> torch.Tensor:
        return self.w

    def state(self) -> dict[str, Any]:
        return {
            "w": self.w,
            "chain": self.chain,
            "anchors": self.anchors.state(),
            "arrivals": self.arrivals,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.chain = state["chain"]
        anchors = state["anchors"]
        if isinstance(anchors, list):  # a checkpoint from before the store: one anchor per client
            anchors = {"length": self.setup.init.numel(), "rows": dict(enumerate(anchors))}
        self.anchors = self.setup.vectors()
        self.anchors.load_state(anchors)
        self.arrivals = int(state["arrivals"])
