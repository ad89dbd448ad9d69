"""The ``adaptive`` executor: jobs train inline until they prove heavy enough to pay for a process pool, then in one.

Why: a pool's workers each start a Python process that imports torch and the client's code (for a Flower ClientApp,
the app and whatever it imports: seconds of wall time). For a run whose jobs take milliseconds that start is most of
the run; for one whose jobs take seconds it is repaid within a round. Which of the two a run is cannot be told
before its first jobs have trained, so this executor measures instead of guessing.

The rule: jobs train in this process, as ``inline`` trains them, and the wall time they take is summed; once it
reaches ``executor.switch_after`` seconds, the pool of ``workers`` processes (:class:`~simfl.train.pool.
ProcessExecutor`) starts, without waiting for it: jobs go on training inline while its workers import what they need
(on the cores the inline job leaves free: a run is given this executor only where its threads leave cores over), and
every job not yet trained once the pool is ready goes to it (those submitted before and still waiting too). A run
whose training never reaches ``switch_after`` never starts a pool; one that does pays for the start mostly with
cores that would otherwise be idle, so ``switch_after`` (default 1 s) can be well under what a pool takes to start.

The choice never changes a number: every job trains with the same torch threads inline and in a worker
(:meth:`~simfl.train.configs.ExecutorConfig.train_threads`, the rule of :mod:`simfl.train.executor`), its result depends
only on the job, so the files are the same byte for byte as under ``inline`` or ``process``, whichever moment the
switch comes at.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from simfl.train.configs import ExecutorConfig
from simfl.train.executor import Executor, InlineExecutor, Training
from simfl.train.local import Job
from simfl.train.message import Reply

if TYPE_CHECKING:
    from simfl.train.pool import ProcessExecutor


class AdaptiveExecutor(Executor):
    """Inline until ``switch_after`` seconds of training, then a process pool (the module docstring)."""

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> AdaptiveExecutor:
        """Inline now, the section's pool (``workers``, threads, start method) once the training is heavy enough."""
        return cls(InlineExecutor.of(config, training), config, training)

    def __init__(self, inline: InlineExecutor, config: ExecutorConfig, training: Training) -> None:
        self.inline = inline
        self.config = config
        self.training = training
        self.pool: ProcessExecutor | None = None
        self.trained = 0.0
        """Wall seconds of the jobs trained inline so far."""
        self.handles: dict[int, tuple[Executor, int]] = {}
        self.dues: dict[int, float | None] = {}
        """The collection times of the jobs submitted inline (the pool's order, should they move to it)."""
        self.next_handle = 0

    def submit(self, job: Job, due: float | None = None) -> int:
        handle = self.next_handle
        self.next_handle += 1
        if self.pool is not None and self.pool.ready():
            self.handles[handle] = (self.pool, self.pool.submit(job, due))
        else:
            self.handles[handle] = (self.inline, self.inline.submit(job, due))
            self.dues[handle] = due
        return handle

    def collect(self, handle: int) -> Reply:
        if self._pool_ready():
            self._move_waiting()
        target, inner = self.handles.pop(handle)
        self.dues.pop(handle, None)
        if target is not self.inline:
            return target.collect(inner)
        start = time.perf_counter()
        reply = target.collect(inner)
        self.trained += time.perf_counter() - start
        if self.pool is None and self.trained >= self.config.switch_after:
            self.pool = self._start_pool()
        return reply

    def _pool_ready(self) -> bool:
        return self.pool is not None and self.pool.ready()

    def _move_waiting(self) -> None:
        """Hand the pool the jobs submitted inline that have not trained yet (inline trains a job when it is
        collected), so that they too train side by side."""
        assert self.pool is not None
        for handle, (target, inner) in list(self.handles.items()):
            if target is self.inline and inner in self.inline.pending:
                job = self.inline.pending.pop(inner)
                self.handles[handle] = (self.pool, self.pool.submit(job, self.dues.pop(handle)))

    def _start_pool(self) -> ProcessExecutor:
        """The process pool the section asks for, starting (imported here: a run that never switches never loads it)."""
        from simfl.train.pool import ProcessExecutor

        t = self.training
        return ProcessExecutor(t.model, t.layout, t.shards, t.train, t.seed, workers=self.config.pool_size(),
                               threads=self.config.train_threads(), start_method=self.config.start_method,
                               client=t.client, wait=False)

    def discard(self, handle: int) -> None:
        self.dues.pop(handle, None)
        entry = self.handles.pop(handle, None)
        if entry is not None:
            entry[0].discard(entry[1])

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
        self.inline.close()

    @property
    def pooled(self) -> bool:
        """Whether the pool is ready (jobs not yet trained train in it)."""
        return self._pool_ready()
