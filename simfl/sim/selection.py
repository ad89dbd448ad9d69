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
  into selection), among the idle, present clients at each draw. Clients in flight are
  not in the pool, and a large client is in flight more often, so over a run the largest
  clients are dispatched less often per sample than their share of all samples
  (``benchmarks/selection.py``: the largest tenth of 1,000 fleet clients at C = 50, 11.7%
  fewer arrivals than proportional; 3.9% with latencies that do not grow with size). The
  weights apply per draw and nothing corrects them over the run: the server only sees
  who is idle now.

Draw ``k`` of a run (``k = 0, 1, ...`` over the whole run, counted in
:attr:`~simfl.sim.state.SimState.selections`) is ``u``, the ``k % BLOCK``-th float of the
stream ``(seed, "selection", k // BLOCK)``; the drawn client is the one whose cumulative
weight interval, in client-index order over the pool, holds ``floor(u * total)``. The
pool is a Fenwick tree of integer weights, so adding, removing and drawing cost
``O(log N)`` and the draw is exact integer arithmetic; its content is a function of the
clients' phases, so a resumed run rebuilds it and needs only the draw counter. The tree's
walks are compiled (numba): in Python they cost several microseconds per arrival at
N = 10^5, more than the rest of an arrival's bookkeeping.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from simfl import jit, rng
from simfl.sim.configs import Selection

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
        self._values: list[float] = []

    def __call__(self, k: int) -> float:
        block, offset = divmod(k, BLOCK)
        if block != self._block:
            self._values = self._of(block)
            self._block = block
        return self._values[offset]

    def following(self, k: int) -> Iterator[float]:
        """Draws ``k``, ``k + 1``, ... in turn (a loop that keeps every draw: a ``next`` instead of a call)."""
        block, offset = divmod(k, BLOCK)
        rest = (value for b in itertools.count(block + 1) for value in self._of(b))
        return itertools.chain(self._of(block)[offset:], rest)

    def _of(self, block: int) -> list[float]:
        """The draws of stream block ``block``."""
        return rng.stream(self.seed, "selection", block).random(BLOCK).tolist()


# The pool's state is one int64 array, so that a compiled call unpacks a single array:
# ``data[0]`` is the member count; ``data[1:S + 1]`` the Fenwick tree over client indices, padded to
# S, a power of two, so that node S holds the total weight; ``data[S + 1 + i]`` client i's weight,
# positive while it is a member and negated while it is not.


@jit.njit(cache=True, nogil=True)
def _change(data: np.ndarray, span: int, index: int, delta: int) -> None:  # pragma: no cover - compiled
    """Add ``delta`` to client ``index``'s weight in the tree."""
    i = index + 1
    while i <= span:
        data[i] += delta
        i += i & -i


@jit.njit(cache=True, nogil=True)
def _add(data: np.ndarray, span: int, index: int) -> None:  # pragma: no cover - compiled
    """Make client ``index`` a member (no-op when it is one)."""
    w = data[span + 1 + index]
    if w < 0:
        data[span + 1 + index] = -w
        data[0] += 1
        _change(data, span, index, -w)


@jit.njit(cache=True, nogil=True)
def _remove(data: np.ndarray, span: int, index: int) -> None:  # pragma: no cover - compiled
    """Make client ``index`` not a member (no-op when it is not one)."""
    w = data[span + 1 + index]
    if w > 0:
        data[span + 1 + index] = -w
        data[0] -= 1
        _change(data, span, index, -w)


@jit.njit(cache=True, nogil=True)
def _draw(data: np.ndarray, span: int, u: float) -> int:  # pragma: no cover - compiled
    """The member whose cumulative weight interval holds ``floor(u * total)`` (a non-empty pool)."""
    total = data[span]
    target = min(int(u * total), total - 1)  # float64 product and truncation, as in Python
    pos, step = 0, span >> 1
    while step:
        nxt = pos + step
        if data[nxt] <= target:
            pos = nxt
            target -= data[nxt]
        step >>= 1
    return pos  # the (pos + 1)-th tree slot, i.e. client index pos


@jit.njit(cache=True, nogil=True)
def take_member(data: np.ndarray, span: int, u: float) -> int:  # pragma: no cover - compiled
    """:func:`_draw`, and the drawn client is no longer a member."""
    index = _draw(data, span, u)
    _remove(data, span, index)
    return index


@jit.njit(cache=True, nogil=True)
def swap_member(data: np.ndarray, span: int, index: int, u: float) -> int:  # pragma: no cover - compiled
    """:func:`_add` of ``index``, then :func:`take_member`."""
    _add(data, span, index)
    return take_member(data, span, u)


@jit.njit(cache=True, nogil=True)
def _build(data: np.ndarray, span: int) -> None:  # pragma: no cover - compiled
    """Turn leaves (each member's weight at its own slot) into the Fenwick tree in one pass."""
    for i in range(1, span + 1):  # each node passes its sum on to its parent
        parent = i + (i & -i)
        if parent <= span:
            data[parent] += data[i]


class Pool:
    """The clients that may be sampled, with integer weights, as a Fenwick tree over client indices."""

    def __init__(self, weights: list[int]) -> None:
        if any(w <= 0 for w in weights):
            raise ValueError("selection weights must be positive")
        self.size = len(weights)
        self.span = 1 << max(self.size - 1, 0).bit_length()
        """Leaves of the tree: the least power of two >= size (1 for an empty pool)."""
        self.data = np.zeros(self.span + 1 + self.size, dtype=np.int64)
        self.data[self.span + 1:] = weights
        self.data[self.span + 1:] *= -1  # nobody is a member yet

    @classmethod
    def of(cls, selection: Selection, sizes: list[int]) -> Pool:
        """An empty pool drawing by ``selection`` over clients holding ``sizes`` training samples."""
        return cls([1] * len(sizes) if selection == "uniform" else list(sizes))

    @property
    def count(self) -> int:
        """Members."""
        return int(self.data[0])

    @property
    def total(self) -> int:
        """The members' total weight."""
        return int(self.data[self.span])

    def take(self, u: float) -> int:
        """:meth:`draw` with ``u``, and the drawn client is no longer selectable."""
        if not self.data[0]:
            raise ValueError("no client to draw from")
        return int(take_member(self.data, self.span, u))

    def swap(self, index: int, u: float) -> int:
        """:meth:`add` of ``index``, then :meth:`take` with ``u``, in one call (an arrival's release and draw)."""
        return swap_member(self.data, self.span, index, u)  # type: ignore[no-any-return]  # compiled: returns an int

    def add_all(self, indices: list[int]) -> None:
        """Make every client of ``indices`` selectable; one linear pass when the pool was empty."""
        if self.data[0]:
            for i in indices:
                self.add(i)
            return
        slots = self.data[self.span + 1:]
        chosen = np.asarray(indices, dtype=np.int64)
        slots[chosen] = np.abs(slots[chosen])  # members: positive weights (an index given twice counts once)
        self.data[0] = np.count_nonzero(slots > 0)
        self.data[1 + chosen] = slots[chosen]
        _build(self.data, self.span)

    def add(self, index: int) -> None:
        """Make client ``index`` selectable (no-op when it already is)."""
        _add(self.data, self.span, index)

    def remove(self, index: int) -> None:
        """Make client ``index`` not selectable (no-op when it is not)."""
        _remove(self.data, self.span, index)

    def draw(self, u: float) -> int:
        """The member whose cumulative weight interval (index order) holds ``floor(u * total)``."""
        if not self.data[0]:
            raise ValueError("no client to draw from")
        return int(_draw(self.data, self.span, u))

    def selectable(self) -> list[int]:
        """The members in index order (for checks and tests)."""
        return [int(i) for i in np.flatnonzero(self.data[self.span + 1:] > 0)]
