"""FedStaleWeight (Ma, Tu, Chen and Janapa Reddi, "FedStaleWeight: Buffered Asynchronous Federated Learning with
Fair Aggregation via Staleness Reweighting", arXiv:2406.02877, 2024).

Buffered asynchronous aggregation (FedBuff's buffer of ``K`` updates) in which each update is weighted by its
client's *average* staleness, so that a slow client, whose updates arrive rarely and stale, is not outweighed by
fast ones: weighting by expected staleness gives each client about the same total weight per unit of time, which
no client gains by reporting slower than it is (the paper's mechanism-design argument)::

    tau_i   = versions published since client i was dispatched (+ offset)
    sbar_c  = mean of client c's tau over its updates so far (this one included; or its last `window`)
    W      <- W + server_lr * sum_{i in buffer} (sbar_{c(i)} / sum_{j in buffer} sbar_{c(j)}) Delta_i

``Delta_i = W_i - W_start`` is the update's delta; a version is a buffer flush, as in FedBuff's staleness.
Every arriving client is re-dispatched at once with the current global model. No mixing weight (None): the
weights are known only when the buffer is full.

Sources: the paper's stated rule (weights from each agent's average observed staleness, normalised over the
buffer) and the authors' released test bench (``18jeffreyma/afl-bench``,
``afl_bench/experiments/expected_staleness.py``, its ``ExpectedStaleness`` strategy), whose aggregation this
follows. Readings, where the bench leaves a choice:

- the bench averages over a window of each client's last 5 stalenesses, and its window drops the *newest* entry
  when full (``list.pop()``), so it keeps the first four and the latest. ``window: null`` (default) averages over
  every update (the paper's "average staleness"); ``window: N`` over the latest ``N`` (the bench's evident intent
  with ``N = 5``, not its quirk);
- staleness counts versions, 0 for an update with no flush since its dispatch, as in the bench: a client whose
  updates are always fresh gets weight 0, and a buffer of such updates leaves the model as it is (the bench skips
  the step when the weights sum to 0; the version is still published). ``offset: 1`` counts a fresh update as 1
  instead, so that every update has weight;
- a client that arrives twice in one buffer has both updates weighted with its average as the buffer flushes (the
  bench tracks the buffer's stalenesses, then weighs);
- the bench leaves parameters named ``bn`` at the global model's values and aggregates only parameters; here,
  as for FedBuff and CA2FL, batch-norm entries take the rule's step, running statistics too (``bn_stats: step``)
  or set to the mean of the buffer's arrivals' (``bn_stats: mean``, :mod:`simfl.algorithms.bn_stats`);
- ``buffer`` defaults to 5, the bench's experiment scripts' ``-bs 5``; ``server_lr`` to 1 (the bench adds the
  weighted mean of the deltas as it is).
"""

from __future__ import annotations

from typing import Any

import torch

from simfl.algorithms.base import Arrival, AsyncAlgorithm, Setup, VersionedModel, Versions
from simfl.algorithms.bn_stats import BufferedStats
from simfl.algorithms.configs import FedStaleWeightConfig


class StalenessAverages:
    """Each client's average staleness: over all its updates (``window`` None) or its latest ``window``."""

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.seen: dict[int, list[int]] = {}
        """Per client: its stalenesses, the latest ``window`` of them (or ``[sum, count]`` without a window)."""

    def add(self, client: int, staleness: int) -> None:
        row = self.seen.setdefault(client, [] if self.window is not None else [0, 0])
        if self.window is None:
            row[0] += staleness
            row[1] += 1
            return
        row.append(staleness)
        if len(row) > self.window:
            del row[0]

    def mean(self, client: int) -> float:
        row = self.seen[client]
        if self.window is None:
            return row[0] / row[1]
        return sum(row) / len(row)

    def state(self) -> dict[int, list[int]]:
        return {c: list(r) for c, r in self.seen.items()}

    def load_state(self, state: dict[int, list[int]]) -> None:
        self.seen = {int(c): [int(v) for v in r] for c, r in state.items()}


class FedStaleWeight(VersionedModel, AsyncAlgorithm[FedStaleWeightConfig]):
    """Buffered asynchronous aggregation weighted by each client's average staleness."""

    Config = FedStaleWeightConfig

    def __init__(self, config: FedStaleWeightConfig, setup: Setup) -> None:
        super().__init__(config, setup)
        self.w = setup.init.clone()
        self.versions = Versions(setup.num_clients)
        self.averages = StalenessAverages(config.window)
        self.sums: dict[int, torch.Tensor] = {}
        """Per client in the buffer: the sum of its buffered deltas (they share its weight)."""
        self.entries: list[int] = []
        """The buffer's updates, by client, in arrival order."""
        self.stats = BufferedStats(setup.layout, config.bn_stats)

    def on_arrival(self, arrival: Arrival) -> tuple[torch.Tensor, float | None]:
        m = arrival.client
        self.averages.add(m, self.versions.staleness(m) + self.config.offset)
        delta = arrival.weights - arrival.start
        self.sums[m] = delta if m not in self.sums else self.sums[m] + delta
        self.entries.append(m)
        self.stats.add(arrival.weights)
        if len(self.entries) == self.config.buffer:
            self._flush()
        self.versions.dispatch(m)
        return self.w, None

    def _flush(self) -> None:
        """The buffer's weighted step; the version is published even when every weight is 0."""
        total = sum(self.averages.mean(c) for c in self.entries)
        stepped = self.w
        if total > 0:
            step = torch.zeros_like(self.w)
            for c, delta in self.sums.items():  # clients in first-arrival order
                step.add_(delta, alpha=self.averages.mean(c) / total)
            stepped = self.w + self.config.server_lr * step
        self.w = self.stats.flush(stepped, len(self.entries))
        self.versions.publish()
        self.sums = {}
        self.entries = []

    def state(self) -> dict[str, Any]:
        return {"w": self.w, **self.versions.state(),
                "averages": self.averages.state(), "sums": dict(self.sums), "entries": list(self.entries),
                **self.stats.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.w = state["w"]
        self.versions.load_state(state)
        self.averages.load_state(state["averages"])
        self.sums = {int(c): v for c, v in state["sums"].items()}
        self.entries = [int(c) for c in state["entries"]]
        self.stats.load_state(state)
