"""Optional recordings of a run beyond metrics and events (scenario key ``record:``).

``record: {layer: <tensor name>}`` keeps, after every aggregation, the change of
that tensor in the evaluated global model. The motivating study of the paper
(section 2.2, Figure 2b) draws these changes as a neurons x updates heatmap.
Recording happens through the engine's ``on_update`` observer, so runs without
``record:`` are untouched.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from simfl.errors import InputError

if TYPE_CHECKING:  # annotations only: result files are read and written without torch
    import torch

    from simfl.algorithms.base import Algorithm
    from simfl.models.flat import Layout
    from simfl.sim.state import SimState

LAYER_CHANGES = "layer_changes"
"""Key in :attr:`SimState.records` and file stem of the recorded layer changes."""


class LayerRecorder:
    """Collects ``global[layer] after - before`` for every aggregation of one run."""

    def __init__(self, algorithm: Algorithm, layout: Layout, layer: str) -> None:  # type: ignore[type-arg]
        segments = {s.name: s for s in layout.segments}
        if layer not in segments:
            raise InputError("record.layer", f"unknown layer '{layer}'; the model has: {', '.join(segments)}")
        self.algorithm = algorithm
        self.segment = segments[layer]
        self.previous = self._current()
        self.changes: list[np.ndarray] = []

    def _current(self) -> torch.Tensor:
        import torch

        seg = self.segment
        return self.algorithm.global_weights()[seg.offset : seg.stop].detach().to("cpu", torch.float32).clone()

    def __call__(self, state: SimState) -> None:
        """Engine observer: store the change since the previous aggregation in ``state.records``."""
        now = self._current()
        self.changes.append((now - self.previous).view(self.segment.shape).numpy())
        self.previous = now
        state.records[LAYER_CHANGES] = self.changes

    @staticmethod
    def stacked(state: SimState) -> np.ndarray | None:
        """The recorded changes as one array (aggregations, *layer shape), or None when nothing was recorded."""
        rows = state.records.get(LAYER_CHANGES)
        return None if not rows else np.stack(rows).astype(np.float32)
