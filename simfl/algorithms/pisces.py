"""Pisces (Jiang, Wang, Li and Li, "Pisces: Efficient Federated Learning via Guided Asynchronous Training", ACM SoCC
2022, arXiv:2206.09264): utility-guided client selection and an adaptive aggregation pace.

Asynchronous training over a buffer, with two rules of the server's own::

    s_i      = global versions published since client i was dispatched (0: none; a version is an aggregation)
    sbar_i   = mean of client i's s over its updates so far (or its latest `window`)
    q_i      = |D_i| * sqrt(mean over its last round's training samples of loss^2)   (Oort's statistical utility)
    u_i      = q_i / (1 + sbar_i)^beta                                               (selection: highest u first)
    pace     : at an arrival at time t, aggregate the buffer when t - t_last > max_j L_j / b
               (L_j: client j's latest round latency, over the clients seen; t_last: the last aggregation, 0 at first)

and the buffer's aggregation ``discounted`` (default), ``W <- W + sum_i (n_i / sum n) Delta_i / (1 + sbar_i)^beta``
with ``Delta_i = W_i - W_start`` and ``sbar_i`` as the update arrives, or ``mean``, ``W <- mean_i W_i``. Spacing the
aggregations by the slowest latency over b lets at most about b versions pass while any client trains: the
paper's bound on the progress gap between a client and the server. Every arriving client is re-dispatched (or
released) with the current global model; no mixing weight (None).

**Selection goes through the population's seam** (:meth:`simfl.algorithms.base.AsyncAlgorithm.select`): under
``server: {concurrency: C}`` the population hands Pisces the idle, present clients whenever slots free up, and Pisces
returns those of highest utility, clients never seen yet first (in index order: at time 0, clients 0..C-1), then
the seen ones by falling ``u``, ties by index. Its state (data qualities, stalenesses, latencies) is the algorithm's,
checkpointed with it; the choice reads no random stream, so both clocks and a resumed run choose alike. Without
``server.concurrency`` every present client is always in flight and nothing is selected: Pisces is then its pace
rule alone.

Sources and readings. The paper's text beyond its abstract was not available here, so this cites its mechanisms,
not equation numbers; the rules follow its two public implementations where they agree and say where they differ:

- the authors' Plato code (``TL-System/plato``, ``examples/client_selection/pisces``) weights the buffer's deltas by
  samples and ``1 / (1 + sbar)^beta`` over the latest 5 stalenesses and adds the sum to the model
  (``aggregation: discounted``, ``window: 5``), and selects by exploration and exploitation: a decaying share of
  the slots to unexplored clients drawn at random, the rest by utility. Here the choice is deterministic, as the
  population's seam asks: every unseen client before any seen one;
- AFL-Lib (``alg/pisces.py``) replaces the model by the buffer's plain mean of client models (``aggregation:
  mean``), averages each client's staleness over all its updates (``window: null``, the default here), gives
  unseen clients utility 0 (a client's data quality is 0 until it trains), so they come after every seen one;
  clamps b to [5, 15] (here b is taken as given: set it in that range to match) and aggregates only with at
  least 3 updates buffered (``min_buffer: 3``; default 1, the pace alone); it profiles the arriving client's
  latency after the pace test, here before (the newest latency is known when the server decides); its data
  quality squares each batch's mean loss, here each sample's loss (Oort's utility, the newer Plato client's);
- the data quality reads the reply's ``loss_sq`` (:mod:`simfl.train.local`: every sample of every epoch of the
  round); a reply without one (``executor: {kind: none}``, a ClientApp that reports none) or with a non-finite one
  counts ``q_i = |D_i|``;
- the pace is tested at arrivals only (no timer), strictly (``>``), with AFL-Lib; the latency is the round's
  duration from dispatch to delivery (events.csv's ``latency``, :attr:`simfl.algorithms.base.Arrival.latency`);
- the defaults beta = 0.5 and b = 10 are AFL-Lib's and the Plato example's (``staleness_factor: 0.5``,
  ``staleness_bound: 10``);
- batch-norm running statistics take the rule's step (``bn_stats: step``) or the buffer's mean (``mean``,
  :mod:`simfl.algorithms.bn_stats`).
"""

from __future__ import annotations

import heapq
import math
from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, VersionedModel, Versions
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import PiscesConfig
from simfl.algorithms.fedstaleweight import StalenessAverages


def data_quality(num_samples: int, metrics: Any) -> float:
    """Oort's statistical utility of a client's last round: ``|D| sqrt(mean loss^2)``; ``|D|`` without a finite
    ``loss_sq`` in its reply metrics."""
    loss_sq = metrics.get("loss_sq")
    if loss_sq is None or not math.isfinite(loss_sq) or loss_sq < 0:
        return float(num_samples)
    return num_samples * math.sqrt(loss_sq)


class Pisces(VersionedModel, AsyncAlgorithm[PiscesConfig]):
    """Buffered asynchronous aggregation at an adaptive pace, its clients selected by staleness-discounted utility."""

    Config = PiscesConfig

    def __init__(self, config: PiscesConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.versions = Versions(setup.num_clients)
        self.averages = StalenessAverages(config.window)
        self.quality: dict[int, float] = {}
        """Per client seen: the data quality of its latest round."""
        self.latency: dict[int, float] = {}
        """Per client seen: its latest round's latency (its profile)."""
        self.slowest = 0.0
        """The largest profile (0 before any arrival)."""
        self.last = 0.0
        """The virtual time of the last aggregation (0: the run's start)."""
        self.acc = torch.zeros_like(self.w)
        """The buffer: its weighted deltas' sum (discounted) or its models' sum (mean)."""
        self.samples = 0
        """The buffer's training samples (discounted's normaliser)."""
        self.count = 0
        """Updates in the buffer."""
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def utility(self, client: int) -> float:
        """``q / (1 + sbar)^beta`` of a client seen."""
        return self.quality[client] / (1.0 + self.averages.mean(client)) ** self.config.beta

    def select(self, candidates: list[int], count: int, now: float) -> list[int]:
        """The ``count`` candidates of highest utility: unseen ones first (ascending), then by falling utility, ties
        by index."""
        quality = self.quality
        keys = ((1, -self.utility(i), i) if i in quality else (0, 0.0, i) for i in candidates)
        return [key[2] for key in heapq.nsmallest(count, keys)]

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        cfg = self.config
        m = arrival.client
        self.averages.add(m, self.versions.staleness(m))
        self.quality[m] = data_quality(arrival.num_samples, arrival.metrics)
        self._profile(m, arrival.latency)
        if cfg.aggregation == "discounted":
            discount = (1.0 + self.averages.mean(m)) ** -cfg.beta
            self.acc.add_(arrival.weights - arrival.start, alpha=arrival.num_samples * discount)
            self.samples += arrival.num_samples
        else:
            self.acc.add_(arrival.weights)
        self.count += 1
        self.stats.add(arrival.weights)
        if self.count >= cfg.min_buffer and arrival.time - self.last > self.slowest / cfg.b:
            self._aggregate()
            self.last = arrival.time
        self.versions.dispatch(m)
        return self.w, None

    def _profile(self, client: int, latency: float) -> None:
        """Keep ``client``'s latest latency and the largest of all (found again when the slowest one got faster)."""
        before = self.latency.get(client)
        self.latency[client] = latency
        if latency >= self.slowest:
            self.slowest = latency
        elif before is not None and before == self.slowest:
            self.slowest = max(self.latency.values())

    def _aggregate(self) -> None:
        """The buffer's step; a new global version."""
        if self.config.aggregation == "discounted":
            stepped = self.w + self.acc / self.samples if self.samples else self.w
        else:
            stepped = self.acc / self.count
        self.w = self.stats.flush(stepped, self.count)
        self.versions.publish()
        self.acc = torch.zeros_like(self.w)
        self.samples = self.count = 0

    def state(self) -> dict[str, Any]:
        return {"w": self.w, **self.versions.state(), "averages": self.averages.state(),
                "quality": dict(self.quality), "latency": dict(self.latency), "last": self.last,
                "acc": self.acc.clone(), "samples": self.samples, "count": self.count, **self.stats.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.versions.load_state(state)
        self.averages.load_state(state["averages"])
        self.quality = {int(c): float(v) for c, v in state["quality"].items()}
        self.latency = {int(c): float(v) for c, v in state["latency"].items()}
        self.slowest = max(self.latency.values(), default=0.0)
        self.last = float(state["last"])
        self.acc = state["acc"].clone()  # summed into in place
        self.samples = int(state["samples"])
        self.count = int(state["count"])
        self.stats.load_state(state)
