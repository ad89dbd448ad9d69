"""The ``cuda`` executor: one GPU training several in-flight clients at once.

Each of ``streams`` workers owns a model replica and a CUDA stream and
trains one job at a time in its own thread (kernel launches release the
GIL, so the replicas' kernels overlap on the device). Client shards are
moved to the GPU once. Jobs start in submission order as workers free up;
:meth:`CudaExecutor.collect` waits for that job only and returns CPU
weights.

Status: the GPU path is unverified on the development machine (no GPU);
GPU kernels are not bit-reproducible against CPU training, and the
tolerance between ``cuda`` and ``inline`` is to be documented once measured.
Without CUDA, building this executor raises one clear
:class:`~simfl.errors.InputError`.
"""

from __future__ import annotations

import copy
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future

import torch
from torch import nn

from simfl.errors import InputError
from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig, ExecutorConfig, TrainConfig
from simfl.train.executor import Executor, Training
from simfl.train.local import Job
from simfl.train.message import Reply
from simfl.train.trainers import Trainer, make_trainer


class CudaExecutor(Executor):
    """``streams`` model replicas on one GPU, each training one job at a time on its own stream."""

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> CudaExecutor:
        """The section's streams (its workers)."""
        t = training
        return cls(t.model, t.layout, t.shards, t.train, t.seed, streams=config.pool_size(), client=t.client)

    def __init__(
        self, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]],
        config: TrainConfig, seed: int, streams: int, device: str = "cuda", client: ClientConfig | None = None,
    ) -> None:
        if not torch.cuda.is_available():
            raise InputError(
                "executor.kind", "cuda needs a CUDA GPU, and torch sees none here; use kind: process or inline"
            )
        self.device = torch.device(device)
        on_gpu = [(x.to(self.device), y.to(self.device)) for x, y in shards]
        self._queue: queue.Queue[tuple[Job, Future[Reply]] | None] = queue.Queue()
        self._futures: dict[int, Future[Reply]] = {}
        self._next = 0
        self._threads = []
        for _ in range(streams):
            trainer = make_trainer(copy.deepcopy(model).to(self.device), layout, on_gpu, config, seed, client)
            thread = threading.Thread(target=self._work, args=(trainer, torch.cuda.Stream(self.device)), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _work(self, trainer: Trainer, stream: torch.cuda.Stream) -> None:
        """One replica's loop: train queued jobs on ``stream``, hand back CPU weights."""
        while (item := self._queue.get()) is not None:
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                with torch.cuda.stream(stream):
                    out = trainer.run(Job(job.client, job.round, job.start.to(self.device), job.message, job.epochs))
                    result = Reply(out.weights.to("cpu", non_blocking=False),
                                   {k: v.to("cpu") for k, v in out.arrays.items()}, out.metrics)
                stream.synchronize()
                future.set_result(result)
            except Exception as exc:  # re-raised by collect
                future.set_exception(exc)

    def submit(self, job: Job, due: float | None = None) -> int:
        handle = self._next
        self._next += 1
        future: Future[Reply] = Future()
        self._futures[handle] = future
        self._queue.put((job, future))
        return handle

    def collect(self, handle: int) -> Reply:
        return self._futures.pop(handle).result()

    def discard(self, handle: int) -> None:
        future = self._futures.pop(handle, None)
        if future is not None:
            future.cancel()

    def close(self) -> None:
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
