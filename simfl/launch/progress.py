"""What ``simfl run`` and ``simfl sweep`` show while units go: one overall bar and a line per finished unit.

The bar measures work, not units: each unit weighs its estimated wall seconds
(:mod:`simfl.schema.estimate`), and a unit under way counts the share of its budget done. The time
left is the estimate of what remains, corrected by how the finished units compared with
their own estimates, spread over the workers (never less than the longest unit left).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from simfl.launch.units import Key, Unit


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """The overall bar (on a terminal, unless quiet) and the finished-unit lines (unless quiet)."""

    def __init__(self, units: Sequence[Unit], workers: int, quiet: bool = False, done_before: int = 0,
                 say: Callable[[str], None] | None = None, labels: dict[int, str] | None = None) -> None:
        self.estimates = {u.key: max(u.estimate, 1e-3) for u in units}
        self.titles = {u.key: u.title for u in units}
        self.workers = max(1, workers)
        self.share: dict[Key, float] = dict.fromkeys(self.estimates, 0.0)
        self.walls: dict[Key, float] = {}
        self.total = len(units) + done_before
        self.done_before = done_before
        self.labels = labels or {}
        self.quiet = quiet
        self.say = say if say is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        self.started = time.perf_counter()
        self.bar: Any = None
        if not quiet and sys.stderr.isatty() and units:
            from tqdm import tqdm

            self.bar = tqdm(total=1000, leave=False, file=sys.stderr, dynamic_ncols=True,
                            bar_format="{percentage:3.0f}%|{bar}| {desc}")
            self._refresh()

    def eta(self) -> float:
        """Wall seconds left: remaining estimated work, corrected, over the workers (at least the longest left)."""
        est_done = sum(self.estimates[k] for k in self.walls)
        factor = sum(self.walls.values()) / est_done if est_done > 0 else 1.0
        left = [self.estimates[k] * factor * (1 - self.share[k]) for k in self.estimates if k not in self.walls]
        if not left:
            return 0.0
        return max(sum(left) / min(self.workers, len(left)), max(left))

    def _refresh(self) -> None:
        if self.bar is None:
            return
        work = sum(self.estimates.values())
        self.bar.n = int(1000 * sum(self.estimates[k] * self.share[k] for k in self.estimates) / work)
        finished = len(self.walls) + self.done_before
        self.bar.set_description_str(f"{finished}/{self.total} runs, {duration(time.perf_counter() - self.started)} "
                                     f"elapsed, about {duration(self.eta())} left", refresh=False)
        self.bar.refresh()

    def moved(self, key: Key, share: float) -> None:
        self.share[key] = max(self.share.get(key, 0.0), min(1.0, share))
        self._refresh()

    def said(self, key: Key, line: str) -> None:
        """What a run says while it goes (a ServerApp's round): a line naming the run, above the bar."""
        if not self.quiet:
            self._line(f"{self.titles[key]}: {line}")

    def _line(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line, file=sys.stderr)
        else:
            self.say(line)

    def finished(self, key: Key, wall: float, detail: str) -> None:
        """A unit ended: its line, and the bar."""
        self.walls[key] = wall
        self.share[key] = 1.0
        if not self.quiet:
            where = self.labels.get(key[0])
            self._line(f"[{len(self.walls) + self.done_before}/{self.total}] {self.titles[key]}"
                       f"{f' ({where})' if where else ''}: {detail} in {duration(wall)}")
        self._refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
