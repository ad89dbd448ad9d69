"""Executors run training jobs: submitted at dispatch, collected at arrival (docs/architecture.md).

The engine only ever calls :meth:`Executor.submit` and :meth:`Executor.collect`,
so how and where jobs run (inline, a process pool, a GPU, a Ray cluster) is
invisible to the virtual clock.

Reproducibility across executors: a job's result depends on its start
weights, the client's data, its stream ``(seed, "train", client, round)``
and on the number of torch threads it trains with (a parallel reduction may
sum in another order). Every CPU executor therefore trains with the same,
documented thread count, :meth:`ExecutorConfig.train_threads`
(``threads``, default ``max(1, cores // workers)`` with ``workers`` defaulting
to the core count), so switching ``kind`` between ``inline``, ``process``
and ``ray`` with the same ``workers``/``threads`` gives bit-identical results.
The price is that a plain ``kind: inline`` trains with one thread on a
machine whose cores would all go to a default process pool; ``workers: 1``
(or ``threads: N``) gives inline every core.

Pure-latency mode (``executor: {kind: none}``) is for delay sweeps at event
speed: :class:`NullExecutor` trains nothing (a job returns its start weights
plus a fixed pseudo-update), evaluation records NaN for every score, and the
run goes through the heap clock of :mod:`simfl.sim.clock` (the same rules as the
SimPy clock, event for event; docs/architecture.md, "Clocks"). The
algorithms keep their real state over the scenario model's real layout, so
state size and per-arrival aggregation cost are those of the real model;
pick a small model (and the synthetic dataset) when only the event trace
matters.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from simfl import registry, rng
from simfl.data.base import Shards
from simfl.models.flat import Layout
from simfl.train.configs import EXECUTORS, ClientConfig, TrainConfig

# ExecutorConfig and cores stay importable from here (simfl.launch, tests and benchmarks import them from this module).
from simfl.train.configs import ExecutorConfig as ExecutorConfig
from simfl.train.configs import cores as cores
from simfl.train.local import Job
from simfl.train.message import Reply
from simfl.train.trainers import Trainer, make_trainer


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run the body with ``n`` torch intra-op threads, restoring the previous count after."""
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if before != n:
            torch.set_num_threads(before)


@dataclass(frozen=True)
class Training:
    """What an executor trains from: the model (each trainer trains a private copy), its layout, the clients' shards,
    the local training (``train:``, with the entry's own options), the seed, and who trains (``client:``; None:
    simfl's own SGD)."""

    model: nn.Module
    layout: Layout
    shards: Shards
    train: TrainConfig
    seed: int
    client: ClientConfig | None = None


def build(config: ExecutorConfig, training: Training) -> Executor:
    """The executor ``config.kind`` names (its class from :data:`~simfl.train.configs.EXECUTORS`, imported now),
    built by its :meth:`Executor.of` from ``config`` and ``training``."""
    kind: type[Executor] = registry.load(EXECUTORS[config.kind])
    return kind.of(config, training)


class Executor(ABC):
    """Runs jobs; a handle is the integer :meth:`submit` returns."""

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> Executor:
        """The executor the ``executor:`` section ``config`` asks for, training from ``training`` (each kind of
        :data:`~simfl.train.configs.EXECUTORS` says how it reads the section)."""
        raise NotImplementedError(f"{cls.__name__} is not built from an executor: section")

    @abstractmethod
    def submit(self, job: Job, due: float | None = None) -> int:
        """Start (or queue) ``job``; returns its handle.

        ``due`` is the virtual time at which the engine will collect the result
        (the client's arrival), a scheduling hint: an executor that queues jobs
        starts the earliest-due first, so little work is wasted on jobs still
        in flight when the run ends. It never changes a result.
        """

    @abstractmethod
    def collect(self, handle: int) -> Reply:
        """The client's reply to the job behind ``handle``: trained weights, arrays, metrics (blocks until done)."""

    @abstractmethod
    def discard(self, handle: int) -> None:
        """Forget a job whose result will never be collected (a failed round, the end of a run)."""

    def close(self) -> None:  # noqa: B027 - optional hook, most executors hold nothing
        """Release workers."""


class LazyExecutor(Executor):
    """Keeps submitted jobs and computes each one in this process when it is collected."""

    def __init__(self) -> None:
        self.pending: dict[int, Job] = {}
        self.next_handle = 0

    def submit(self, job: Job, due: float | None = None) -> int:
        handle = self.next_handle
        self.next_handle += 1
        self.pending[handle] = job
        return handle

    def collect(self, handle: int) -> Reply:
        return self.compute(self.pending.pop(handle))

    def discard(self, handle: int) -> None:
        self.pending.pop(handle, None)

    @abstractmethod
    def compute(self, job: Job) -> Reply:
        """The reply to ``job``."""


class InlineExecutor(LazyExecutor):
    """Trains each job in this process, lazily, when its result is collected.

    Training runs with ``threads`` torch threads (the process's count is
    restored afterwards, so evaluation and aggregation are unaffected).
    """

    def __init__(self, trainer: Trainer, threads: int | None = None) -> None:
        super().__init__()
        self.trainer = trainer
        self.threads = threads

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> InlineExecutor:
        """One trainer on a private copy of the model, at the section's threads per job."""
        t = training
        return cls(make_trainer(copy.deepcopy(t.model), t.layout, t.shards, t.train, t.seed, t.client),
                   threads=config.train_threads())

    def compute(self, job: Job) -> Reply:
        if self.threads is None:
            return self.trainer.run(job)
        with torch_threads(self.threads):
            return self.trainer.run(job)


class NullExecutor(LazyExecutor):
    """Pure-latency mode: no training; a job returns its start weights plus a cheap pseudo-update.

    The pseudo-update of client m's round k is ``scale * D[(m + k) % K]``, one of
    ``K`` fixed random directions drawn once from the stream ``(seed, "null")``,
    so results are deterministic, algorithms see non-zero, non-parallel updates
    and keep real state, and each job costs one vector addition. No hook runs, so the
    reply carries no arrays and no metrics.
    """

    DIRECTIONS = 8

    def __init__(self, size: int, seed: int, scale: float = 1e-3) -> None:
        super().__init__()
        gen = rng.torch_generator(seed, "null")
        self.directions = list((torch.randn(self.DIRECTIONS, size, generator=gen) * scale).unbind())

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> NullExecutor:
        """Pseudo-updates of the model's size at the section's ``update_scale``."""
        return cls(training.layout.size, training.seed, config.update_scale)

    def compute(self, job: Job) -> Reply:
        return Reply(torch.add(job.start, self.directions[(job.client + job.round) % self.DIRECTIONS]))
