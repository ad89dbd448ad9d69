"""PORT (Su and Li, "How Asynchronous can Federated Learning Be?", IEEE/ACM IWQoS 2022): buffered asynchronous
aggregation weighted by staleness and interference, and a staleness bound that makes stragglers report.

The rule, with ``s_i`` the global versions (aggregations) published since update i's client was dispatched::

    factor_i = alpha * omega / (s_i + omega) + beta * (cos_i + 1) / 2          (its events.csv weight)
    p_i      = n_i * factor_i / sum_j n_j * factor_j                         (over the buffer's updates)
    deltas   : W <- W + sum_i p_i (W_i - W_start,i)        models : W <- sum_i p_i W_i

once the buffer holds ``buffer`` updates, ``cos_i`` the cosine of update i's delta with the last global step
``W_t - W_{t-1}``. After each aggregation every client in flight whose staleness now exceeds ``omega`` is recalled
(:meth:`simfl.algorithms.base.AsyncAlgorithm.recall`): it reports at its next epoch boundary with the epochs done by
then (:meth:`simfl.sim.world.World.recall` says where the boundary lies). Every arriving client is re-dispatched (or
released) with the current global model.

Sources and readings. The paper's text was not reachable here; the rule follows its authors' code, the Plato example
(``TL-System/plato``, ``examples/async/port/port_server.py`` with ``plato/servers/base.py``'s ``request_update``),
and AFL-Lib (``alg/port.py``, ``alg/asyncbase.py``), and says where they differ:

- weights: both normalise ``n_i (alpha omega / (s_i + omega) + beta (cos_i + 1) / 2)`` over the buffer (Plato's
  ``staleness_weight`` 3, ``similarity_weight`` 1, ``staleness_bound`` 10; AFL-Lib's alpha 3, beta 1, omega 10, the
  defaults here); the buffer is AFL-Lib's ``min_clients`` (10; the Plato example aggregates 15);
- aggregation: Plato averages the deltas and adds them to the model (``aggregation: deltas``, the default: the
  authors' own code); AFL-Lib sets the model to the weighted mean of the buffered models (``models``). They agree
  when every update started from the current model and differ for stale ones;
- interference: Plato's cosine is of the update's delta with the last global step (the current model less the one
  before the last aggregation), and only for an update more than one version old (``staleness > 1``; a fresher
  one counts cos 1) (``similarity: last_step``, the default). AFL-Lib keeps as its previous model the aggregate it
  has just made the global model, so its global change is zero and its cosine 0 after the first aggregation (beta
  before it, beta / 2 after): ``similarity: constant`` reproduces that;
- staleness: both count aggregations since the client's dispatch (a flush). AFL-Lib reads a buffered update's
  staleness at the flush, after its client may have been sampled again (which zeroes it); here it is the update's
  staleness at its arrival, which nothing else changes before the flush;
- the bound: AFL-Lib marks in-flight clients past omega urgent after each arrival, before it counts that arrival's
  flush (so one arrival late), and an urgent client reports when its running epoch ends; here the clients are
  recalled at the flush that takes them past the bound, and report at their next epoch boundary (at least one
  epoch). Plato instead answers with the model of the last epoch finished before the request (its clients keep
  each epoch's model) and holds the aggregation until those replies arrive; a client cannot send an epoch it has
  not finished, nor, without keeping every epoch, one it finished before, so the next boundary is the reading here;
- the flag: AFL-Lib never clears ``urgent``, so a client once urgent reports at once on every later round (its
  round starts with ``cur_epoch`` 0 and ``urgent`` set: it sends the global model it has just received, untrained),
  which no text describes; Plato's request is per report (its reply carries ``update_response``, and a later round
  is asked only if it is stale again). The recall here is of the round in flight only: the sticky flag is taken for
  a bug and not offered;
- ``recall: false`` keeps the weights and drops the bound; the recall needs simfl's own trainer (a ClientApp's
  epochs are the app's: refused);
- batch-norm running statistics take the rule's step (``bn_stats: step``) or the buffer's mean (``mean``,
  :mod:`simfl.algorithms.bn_stats`).

A buffer whose weights are all 0 (``alpha`` and ``beta`` 0) leaves the model as it is, a version all the same.
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, VersionedModel, Versions
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import PORTConfig


class Cohorts(Versions):
    """:class:`Versions` with the clients grouped by the version they were dispatched with, so that the clients an
    aggregation takes past the staleness bound are found without a pass over every client (but once, for version 0's
    cohort: every client starts there)."""

    def __init__(self, num_clients: int, bound: int) -> None:
        super().__init__(num_clients)
        self.bound = bound
        self.cohort: dict[int, set[int]] = {}
        """Per version from 1, not yet past the bound: the clients last dispatched with it."""

    def dispatch(self, client: int) -> None:
        group = self.cohort.get(self.dispatched[client])
        if group is not None:
            group.discard(client)
        super().dispatch(client)
        if self.version:
            self.cohort.setdefault(self.version, set()).add(client)

    def crossing(self) -> list[int]:
        """After a publish: the clients whose staleness has just passed the bound (dispatched ``bound + 1`` versions
        ago), ascending; their cohort is let go."""
        old = self.version - self.bound - 1
        if old < 0:
            return []
        if old == 0:
            return [c for c, d in enumerate(self.dispatched) if d == 0]
        return sorted(self.cohort.pop(old, ()))

    def load_state(self, state: Any) -> None:
        super().load_state(state)
        low = max(1, self.version - self.bound)
        self.cohort = {}
        for client, version in enumerate(self.dispatched):
            if version >= low:
                self.cohort.setdefault(version, set()).add(client)


def cosine(a: torch.Tensor, b: torch.Tensor, b_norm: float) -> float:
    """cos(a, b) given ``|b|``; 0 when either is zero."""
    a_norm = float(torch.linalg.vector_norm(a))
    if a_norm == 0.0 or b_norm == 0.0:
        return 0.0
    return float(torch.dot(a, b)) / (a_norm * b_norm)


class PORT(VersionedModel, AsyncAlgorithm[PORTConfig]):
    """Buffered asynchronous aggregation weighted by staleness and interference; stale clients recalled."""

    Config = PORTConfig

    def __init__(self, config: PORTConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.versions = Cohorts(setup.num_clients, config.omega) if config.recall else Versions(setup.num_clients)
        self.step: torch.Tensor | None = None
        """The last global step ``W_t - W_{t-1}`` (None before the first aggregation)."""
        self.step_norm = 0.0
        self.acc = torch.zeros_like(self.w)
        """The buffer: its updates' deltas (deltas) or models (models), each times ``n_i * factor_i``."""
        self.total = 0.0
        """The buffer's ``sum n_i * factor_i``."""
        self.count = 0
        self.stats = BufferedStats(setup.layout, config.bn_stats)
        self._recalled: list[int] = []
        """The clients the latest aggregation took past the bound, until :meth:`recall` hands them over (within the
        arrival that aggregated: never pending between events)."""

    @property
    def recalls_clients(self) -> bool:
        return self.config.recall

    def factor(self, staleness: int, delta: torch.Tensor) -> float:
        """An update's weight per sample: its staleness term and its interference term."""
        cfg = self.config
        if cfg.similarity == "constant":
            cos = 1.0 if self.step is None else 0.0
        elif self.step is None or staleness < 2:
            cos = 1.0
        else:
            cos = cosine(delta, self.step, self.step_norm)
        return cfg.alpha * cfg.omega / (staleness + cfg.omega) + cfg.beta * (cos + 1.0) / 2.0

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        cfg = self.config
        m = arrival.client
        delta = arrival.weights - arrival.start
        factor = self.factor(self.versions.staleness(m), delta)
        raw = arrival.num_samples * factor
        self.acc.add_(delta if cfg.aggregation == "deltas" else arrival.weights, alpha=raw)
        self.total += raw
        self.count += 1
        self.stats.add(arrival.weights)
        flushed = self.count >= cfg.buffer
        if flushed:
            self._aggregate()
        self.versions.dispatch(m)
        if flushed and isinstance(self.versions, Cohorts):
            self._recalled = self.versions.crossing()
        return self.w, factor

    def recall(self) -> list[int]:
        recalled, self._recalled = self._recalled, []
        return recalled

    def _aggregate(self) -> None:
        """The buffer's weighted step; a new global version and the last step."""
        if self.total > 0.0:
            stepped = (self.w + self.acc / self.total if self.config.aggregation == "deltas"
                       else self.acc / self.total)
        else:
            stepped = self.w.clone()
        new = self.stats.flush(stepped, self.count)
        self.step = new - self.w
        self.step_norm = float(torch.linalg.vector_norm(self.step))
        self.w = new
        self.versions.publish()
        self.acc = torch.zeros_like(self.w)
        self.total = 0.0
        self.count = 0

    def state(self) -> dict[str, Any]:
        return {"w": self.w, **self.versions.state(), "step": self.step, "acc": self.acc.clone(),
                "total": self.total, "count": self.count, **self.stats.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.versions.load_state(state)
        self.step = state["step"]
        self.step_norm = 0.0 if self.step is None else float(torch.linalg.vector_norm(self.step))
        self.acc = state["acc"].clone()  # summed into in place
        self.total = float(state["total"])
        self.count = int(state["count"])
        self.stats.load_state(state)
        self._recalled = []
