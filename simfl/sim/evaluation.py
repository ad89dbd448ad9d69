"""The evaluation grid and the metric rows, recorded by the world's handlers.

The global model is scored at virtual times 0, every, 2*every, ... (after the
arrivals at that instant, :mod:`simfl.sim.clock`), optionally after every
aggregation, and once more when a run ends unless a row was recorded at that
instant. Scores are re-used while the global weights do not change.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from simfl.sim.state import Metric, SimState
from simfl.train.evaluate import Scores


def next_grid_time(now: float, index: int, every: float) -> float:
    """When grid point ``index`` (time ``index * every``) is due, stepped from ``now`` (never in the past)."""
    return now + max(index * every - now, 0.0)


class Recorder:
    """Scores the global model and appends metric rows; calls ``progress`` after each row."""

    def __init__(self, evaluate: Callable[[torch.Tensor], Scores], progress: Callable[[SimState], None] | None) -> None:
        self.evaluate = evaluate
        self.progress = progress
        self.heard: tuple[Callable[[float], None], ...] = ()
        """Observers of each recorded row (:meth:`simfl.sim.world.Observer.recorded`), given its time."""
        self.last: tuple[torch.Tensor, Scores] | None = None
        """The last scored weights and their scores (saved in checkpoints)."""

    def record(self, state: SimState, weights: torch.Tensor, time: float, now: float) -> None:
        """Append the row of ``weights`` for grid time ``time``, recorded at virtual time ``now``."""
        state.now = now
        for hear in self.heard:
            hear(now)
        cached = self.last
        if cached is not None and torch.equal(cached[0], weights):
            scores = cached[1]
        else:
            scores = self.evaluate(weights)
            self.last = (weights.clone(), scores)
        extra = {k: float(v) for k, v in vars(scores).items() if k not in ("accuracy", "loss")}
        state.metrics.append(Metric(time, state.updates, scores.accuracy, scores.loss, extra))
        if self.progress is not None:
            self.progress(state)

    def finish(self, state: SimState, weights: torch.Tensor, now: float) -> None:
        """The run ended at ``now``: a last row unless one was recorded at that instant."""
        state.now = now
        state.stopped = True
        if not state.metrics or state.metrics[-1].virtual_time != now:
            self.record(state, weights, now, now)
        elif self.progress is not None:
            self.progress(state)
