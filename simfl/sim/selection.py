"""Cross-device serving: at most C clients train at once, each new one drawn from the idle, present ones.

The protocol is FedBuff's (Nguyen et al., "Federated Learning with Buffered Asynchronous
Aggregation", AISTATS 2022, section 3 and Algorithm 1: the server keeps a fixed number of
clients training concurrently; whenever one reports, it samples a new client, uniformly
among the available ones, so that concurrency stays constant). Papaya (Huba et al., MLSys
2022) runs production asynchronous FL the same way, and FLSim's asynchronous trainer draws
each training start through an "async user selector" (uniform, or weighted by data size).

:class:`Concurrency` is the scenario's ``server:`` section as plain data. :class:`Pool`
holds the clients that may be sampled and draws from them:

- ``uniform``: every idle, present client is equally likely;
- ``by_data``: a client is drawn with probability proportional to its number of
  training samples (FLSim's weighted selector; FedAvg's ``n_k / n`` weighting moved
  into selection).

Draw ``k`` of a run (``k = 0, 1, ...`` over the whole run, counted in
:attr:`~simfl.sim.state.SimState.selections`) is ``u``, the ``k % BLOCK``-th float of the
stream ``(seed, "selection", k // BLOCK)``; the drawn client is the one whose cumulative
weight interval, in client-index order over the pool, holds ``floor(u * total)``. The
pool is a Fenwick tree of integer weights, so adding, removing and drawing cost
``O(log N)`` and the draw is exact integer arithmetic; its content is a function of the
clients' phases, so a resumed run rebuilds it and needs only the draw counter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from simfl import rng

Selection = Literal["uniform", "by_data"]
BLOCK = 1024
"""Draws taken from one stream block: one generator per BLOCK draws keeps a draw at a few microseconds."""


@dataclass(frozen=True)
class Concurrency:
    """At most ``limit`` clients in flight; new ones drawn by ``selection`` (scenario ``server:``)."""

    limit: int
    selection: Selection = "uniform"


class Draws:
    """The selection stream of one run: draw ``k`` is a float in [0, 1), the same for any history."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._block = -1
        self._values: np.ndarray = np.empty(0)

    def __call__(self, k: int) -> float:
        block, offset = divmod(k, BLOCK)
        if block != self._block:
            self._values = rng.stream(self.seed, "selection", block).random(BLOCK)
            self._block = block
        return float(self._values[offset])


class Pool:
    """The clients that may be sampled, with integer weights, as a Fenwick tree over client indices."""

    def __init__(self, weights: list[int]) -> None:
        if any(w <= 0 for w in weights):
            raise ValueError("selection weights must be positive")
        self.weights = list(weights)
        self.size = len(weights)
        self.tree = [0] * (self.size + 1)
        self.members = [False] * self.size
        self.count = 0
        self.total = 0
        self._top = 1 << max(self.size.bit_length() - 1, 0)

    @classmethod
    def of(cls, selection: Selection, sizes: list[int]) -> Pool:
        """An empty pool drawing by ``selection`` over clients holding ``sizes`` training samples."""
        return cls([1] * len(sizes) if selection == "uniform" else list(sizes))

    def take(self, u: float) -> int:
        """:meth:`draw` with ``u``, and the drawn client is no longer selectable."""
        index = self.draw(u)
        self.remove(index)
        return index

    def add_all(self, indices: list[int]) -> None:
        """Make every client of ``indices`` selectable; one linear pass when the pool was empty."""
        if self.count:
            for i in indices:
                self.add(i)
            return
        tree = self.tree
        for i in indices:
            if not self.members[i]:
                self.members[i] = True
                tree[i + 1] = self.weights[i]
                self.count += 1
                self.total += self.weights[i]
        for i in range(1, self.size + 1):  # each node passes its sum on to its parent
            parent = i + (i & -i)
            if parent <= self.size:
                tree[parent] += tree[i]

    def add(self, index: int) -> None:
        """Make client ``index`` selectable (no-op when it already is)."""
        if self.members[index]:
            return
        self.members[index] = True
        self._change(index, self.weights[index])
        self.count += 1

    def remove(self, index: int) -> None:
        """Make client ``index`` not selectable (no-op when it is not)."""
        if not self.members[index]:
            return
        self.members[index] = False
        self._change(index, -self.weights[index])
        self.count -= 1

    def _change(self, index: int, delta: int) -> None:
        self.total += delta
        i = index + 1
        tree, size = self.tree, self.size
        while i <= size:
            tree[i] += delta
            i += i & -i

    def draw(self, u: float) -> int:
        """The member whose cumulative weight interval (index order) holds ``floor(u * total)``."""
        if self.count == 0:
            raise ValueError("no client to draw from")
        target = min(int(u * self.total), self.total - 1)
        pos, step, tree, size = 0, self._top, self.tree, self.size
        while step:
            nxt = pos + step
            if nxt <= size and tree[nxt] <= target:
                pos = nxt
                target -= tree[nxt]
            step >>= 1
        return pos  # the (pos + 1)-th tree slot, i.e. client index pos

    def selectable(self) -> list[int]:
        """The members in index order (for checks and tests)."""
        return [i for i, m in enumerate(self.members) if m]
