"""What ``simfl run``, ``simfl sweep`` and the API show while units go: one overall bar and a line per finished unit.

The bar measures work, not units: each unit weighs its estimated wall seconds (:mod:`simfl.schema.estimate`),
and a unit under way counts the share of its budget done (virtual time or updates against the budget), which
it reports from within the run every few wall seconds (:class:`~simfl.sim.pulse.Pulse`, a
:class:`~simfl.launch.units.Moved` message). The time left is measured, not only estimated:

- the estimates are scaled by how the units measured so far (finished, or under way: wall seconds against the
  estimate of the share done) compared with them, the estimate itself counting as :data:`PRIOR` of a unit
  measured (so the first seconds of a run, whose pace is not yet its own, move the factor little);
- a unit under way goes on at the pace it has kept since its first report (a resumed unit from where its
  checkpoint stands), that pace blended the same way with its scaled estimate;
- a unit not started yet takes its scaled estimate;
- the units left are dealt to the workers in plan order (each to the first worker free), and the time left is
  when the last worker is done.

Until a unit has finished or run :data:`MEASURED_AFTER` seconds the time left is the estimate's, and says so.
The bar is redrawn every second, so its elapsed time ticks whether or not a unit reports. It is drawn where a person watches: on a
terminal (stderr), and in a Jupyter notebook as a notebook bar (``tqdm.auto``); :func:`watched` says whether
one does, which is what ``simfl.run`` and ``simfl.sweep`` show progress by default on.
"""

from __future__ import annotations

import heapq
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from simfl.launch.units import Key, Unit

MEASURED_AFTER = 3.0
"""Wall seconds a unit runs (from its first report) before the time left is called measured."""
PRIOR = 0.05
"""What the estimate weighs against measurements, as a share of one unit's run measured at the estimated pace:
a run's own pace takes over once it is a few times this share done."""
TICK_SECONDS = 1.0
"""How often the bar is redrawn (its elapsed time and time left), whether or not a unit reports."""


def duration(seconds: float) -> str:
    """``1h02m``, ``3m05s`` or ``42s``."""
    seconds = max(0, int(round(seconds)))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def in_notebook() -> bool:
    """Whether this process is a Jupyter kernel (a notebook), where a bar is a notebook widget."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # an IPython that cannot tell is not a kernel
        return False
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def watched() -> bool:
    """Whether a person is watching: stderr is a terminal or this is a notebook, and this is not a CI job (the ``CI``
    environment variable, set by GitHub Actions, GitLab CI and most others). CI logs and pipes stay quiet."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return False
    return in_notebook() or sys.stderr.isatty()


@dataclass
class _Run:
    """What is known of one unit's progress."""

    estimate: float
    """Estimated wall seconds of the whole run."""
    started: float | None = None
    """When its first report came (the clock of :class:`Progress`); None: not started."""
    first: float = 0.0
    """The share of its budget done at its first report (a resumed run's checkpoint)."""
    share: float = 0.0
    """The share of its budget done at its latest report."""
    wall: float | None = None
    """Its wall seconds, once finished."""


class Progress:
    """The overall bar (where a person watches, unless quiet) and the finished-unit lines (unless quiet).

    ``bar``: draw the bar (None: where :func:`watched` says a person watches, CI aside, on a terminal or in a
    notebook); ``file``: where it goes (default stderr); ``clock``: the wall clock (seconds).
    """

    def __init__(self, units: Sequence[Unit], workers: int, quiet: bool = False, done_before: int = 0,
                 say: Callable[[str], None] | None = None, labels: dict[int, str] | None = None, *,
                 bar: bool | None = None, file: TextIO | None = None, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        self.runs = {u.key: _Run(max(u.estimate, 1e-3)) for u in units}
        self.titles = {u.key: u.title for u in units}
        self.workers = max(1, workers)
        self.total = len(units) + done_before
        self.done_before = done_before
        self.labels = labels or {}
        self.quiet = quiet
        self.say = say if say is not None else (lambda line: print(line, file=sys.stderr, flush=True))
        self.clock = clock
        self.started = clock()
        self.bar: Any = None
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        shown = (not quiet and (sys.stderr.isatty() or in_notebook())) if bar is None else bar
        self.file = file if file is not None else sys.stderr
        if shown and units:
            self.bar = _make_bar(self.file)
            self._refresh()
            self._ticker = threading.Thread(target=self._tick, name="simfl-progress", daemon=True)
            self._ticker.start()

    # -- the time left ---------------------------------------------------------------------------

    def measured(self) -> bool:
        """Whether a unit has finished or run long enough to take its own pace."""
        now = self.clock()
        return any(r.wall is not None or (r.started is not None and now - r.started >= MEASURED_AFTER
                                          and r.share > r.first) for r in self.runs.values())

    def eta(self) -> float:
        """Wall seconds left: each unit under way at its own pace, the rest at their estimates scaled by how the
        measured units compared with theirs (both blended with the estimate, :data:`PRIOR`), dealt to the workers
        in plan order."""
        now = self.clock()
        runs = self.runs.values()
        prior = PRIOR * sum(r.estimate for r in runs) / max(len(runs), 1)
        spent = planned = prior
        for r in runs:
            if r.wall is not None:
                spent, planned = spent + r.wall, planned + r.estimate
            elif r.started is not None:
                spent, planned = spent + now - r.started, planned + r.estimate * (r.share - r.first)
        factor = spent / planned
        busy: list[float] = []
        waiting: list[float] = []
        for r in runs:
            if r.wall is None and r.started is None:
                waiting.append(r.estimate * factor * (1 - r.share))
            elif r.wall is None and r.started is not None:
                pace = (now - r.started + PRIOR * r.estimate * factor) / (r.share - r.first + PRIOR)
                busy.append(pace * (1 - r.share))
        free = busy + [0.0] * max(0, self.workers - len(busy))
        heapq.heapify(free)
        for cost in waiting:
            heapq.heappush(free, heapq.heappop(free) + cost)
        return max(free, default=0.0)

    def describe(self) -> str:
        """The bar's text: runs finished, elapsed time, time left (the estimate's, until something was measured)."""
        finished = sum(r.wall is not None for r in self.runs.values()) + self.done_before
        head = f"{finished}/{self.total} runs, {duration(self.clock() - self.started)} elapsed"
        if all(r.started is None and r.wall is None for r in self.runs.values()):
            return f"{head}, starting: about {duration(self.eta())} of runs (estimated)"
        return f"{head}, about {duration(self.eta())} left{'' if self.measured() else ' (estimated)'}"

    # -- reports ---------------------------------------------------------------------------------------

    def moved(self, key: Key, share: float) -> None:
        """A unit reports the share of its budget done (its first report says it started)."""
        with self._lock:
            run = self.runs[key]
            share = min(1.0, max(share, 0.0))
            if run.started is None:
                run.started, run.first = self.clock(), share
            run.share = max(run.share, share)
            self._refresh()

    def said(self, key: Key, line: str) -> None:
        """What a run says while it goes (a ServerApp's round): a line naming the run, above the bar."""
        if not self.quiet:
            self._line(f"{self.titles[key]}: {line}")

    def finished(self, key: Key, wall: float, detail: str) -> None:
        """A unit ended: its line, and the bar."""
        with self._lock:
            run = self.runs[key]
            run.wall, run.share = wall, 1.0
            if not self.quiet:
                done = sum(r.wall is not None for r in self.runs.values()) + self.done_before
                where = self.labels.get(key[0])
                self._line(f"[{done}/{self.total}] {self.titles[key]}{f' ({where})' if where else ''}: {detail} "
                           f"in {duration(wall)}")
            self._refresh()

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join()
            self._ticker = None
        with self._lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None

    # -- drawing ---------------------------------------------------------------------------------------

    def _line(self, line: str) -> None:
        with self._lock:
            if self.bar is not None:
                self.bar.write(line, file=self.file)
            else:
                self.say(line)

    def _refresh(self) -> None:
        with self._lock:
            if self.bar is None:
                return
            work = sum(r.estimate for r in self.runs.values())
            self.bar.n = int(1000 * sum(r.estimate * r.share for r in self.runs.values()) / work)
            self.bar.set_description_str(self.describe(), refresh=False)
            self.bar.refresh()

    def _tick(self) -> None:
        """Redraw every :data:`TICK_SECONDS` until closed: the elapsed time goes on when no unit reports."""
        while not self._stop.wait(TICK_SECONDS):
            self._refresh()


def _make_bar(file: TextIO) -> Any:
    """A bar out of thousandths: a notebook widget in a notebook, text elsewhere (the same text)."""
    if in_notebook():
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm(total=1000, leave=False, file=file, dynamic_ncols=True, bar_format="{percentage:3.0f}%|{bar}| {desc}")
