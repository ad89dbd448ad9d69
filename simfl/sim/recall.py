"""Where a recalled round ends: the next epoch boundary of its compute (the one rule of a cut).

An asynchronous rule may recall clients whose rounds are in flight (:attr:`simfl.algorithms.base.AsyncAlgorithm.
recalls_clients`, PORT's urgent report): each reports at its next epoch boundary with the epochs done by then
(:meth:`simfl.sim.world.World.recall`). A round's compute is the latency model's draw, ``E = train.epochs`` epochs
of equal length: epoch ``k`` ends ``draw * k / E`` after the compute began. Without phases the draw is the whole
round (its transfers included) and the compute begins at dispatch, so a cut round's latency is ``draw * k / E``;
with phases (:mod:`simfl.sim.phases`) the compute begins when the download ends, and the upload follows the cut
compute at its full size.
"""

from __future__ import annotations

import math


def boundary(start: float, now: float, draw: float, epochs: int) -> tuple[int, float] | None:
    """The epoch boundary a round whose compute of ``draw`` seconds (``epochs`` epochs) began at ``start`` reports at
    when recalled at ``now``: ``(k, draw * k / epochs)``, the epochs done and the compute's new length, for the
    first boundary at or after ``now``, at least the first epoch's (a round reports something trained); None when that
    is the last (the round ends there anyway: nothing to cut)."""
    if epochs <= 1 or not draw > 0.0:
        return None
    k = max(1, math.ceil((now - start) * epochs / draw))
    while k < epochs and start + draw * k / epochs < now:  # a boundary rounded below now: the next one
        k += 1
    return None if k >= epochs else (k, draw * k / epochs)
