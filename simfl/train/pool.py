"""The ``process`` executor: a pool of CPU worker processes training in-flight clients concurrently.

Each worker is started once with the model, layout, client shards (moved to
shared memory, so they are never copied per job) and training config, and
trains with a fixed number of torch threads. Per job only the start
weights travel in and the trained weights out, through two float32 slots in
shared memory owned by the worker; the pipe carries a few integers.

The simulating process runs a small dispatcher thread that hands queued jobs
to idle workers as soon as they free up, so workers keep training while the
engine aggregates or evaluates. With ``spawn`` (default) or ``forkserver``
the shards live in shared memory (``/dev/shm`` must hold them); with ``fork``
the workers inherit them copy-on-write. Queued jobs start earliest-due first (the
virtual time of their arrival, which is the order the engine collects them
in), and a job that is collected before it started jumps the queue. :meth:`ProcessExecutor.collect` blocks on that job only.
"""

from __future__ import annotations

import copy
import heapq
import math
import threading
import traceback
from collections.abc import Sequence
from multiprocessing import connection
from multiprocessing.connection import Connection
from typing import Any, cast

import torch
import torch.multiprocessing as mp
from torch import nn

from simfl import numerics
from simfl.data.base import Shards
from simfl.errors import InputError, UserCodeFailed
from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig, ExecutorConfig, TrainConfig
from simfl.train.executor import Executor, Training
from simfl.train.local import Job
from simfl.train.message import Message, Reply, from_numpy, to_numpy
from simfl.train.trainers import make_trainer

_STOP = None


def _worker(
    conn: Connection, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]],
    config: TrainConfig, seed: int, threads: int, slots: torch.Tensor, index: int,
    who: ClientConfig | None = None,
) -> None:
    """Worker main loop: train each (handle, client, round, message) from ``slots[0, index]`` into ``slots[1, index]``.

    The message's arrays come and the reply's go as numpy copies through the pipe (SCAFFOLD's
    control variates, for one); the weights through the slots."""
    torch.set_num_threads(threads)
    numerics.apply()
    slot_in, slot_out = slots[0, index], slots[1, index]
    # tensors passed to a child arrive in shared memory, so every worker would otherwise train the
    # same parameter storage in place: each worker trains its own private copy
    try:
        trainer = make_trainer(copy.deepcopy(model), layout, shards, config, seed, who)
    except (InputError, UserCodeFailed) as exc:  # the user's ClientApp cannot be loaded: said in one line
        conn.send(("raise", -1, exc, {}, {}))
        return
    conn.send(("ready", -1, "", {}, {}))
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is _STOP:
            return
        handle, client, round_, hooks, arrays, plain, epochs = msg
        try:
            reply = trainer.run(Job(client, round_, slot_in, Message(hooks, from_numpy(arrays), plain), epochs))
            slot_out.copy_(reply.weights)
            conn.send(("done", handle, "", to_numpy(reply.arrays), dict(reply.metrics)))
        except (InputError, UserCodeFailed) as exc:  # a user's mistake or code: raised as such in the parent
            conn.send(("raise", handle, exc, {}, {}))
        except Exception:  # the parent re-raises it when the job is collected
            conn.send(("error", handle, traceback.format_exc(), {}, {}))


class ProcessExecutor(Executor):
    """A pool of ``workers`` processes, each training one job at a time with ``threads`` torch threads."""

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> ProcessExecutor:
        """The section's pool: its workers, threads per job and start method."""
        t = training
        return cls(t.model, t.layout, t.shards, t.train, t.seed, workers=config.pool_size(),
                   threads=config.train_threads(), start_method=config.start_method, client=t.client)

    def __init__(
        self, model: nn.Module, layout: Layout, shards: Shards,
        config: TrainConfig, seed: int, workers: int, threads: int, start_method: str = "spawn",
        client: ClientConfig | None = None, wait: bool = True,
    ) -> None:
        """Start the workers; with ``wait`` (the default) return once every one is ready, else at once (jobs may be
        submitted once :meth:`ready` says so: the ``adaptive`` executor starts a pool while it trains inline)."""
        ctx: Any = mp.get_context(start_method)
        if start_method != "fork":  # in place: the workers map the same pages (forked ones inherit them)
            shards.share_memory_()  # the training data once; each worker gathers its clients' rows
        model = copy.deepcopy(model).cpu()
        self._lock = threading.Condition()
        self._pending: dict[int, Job] = {}
        self._queue: list[tuple[float, int]] = []
        """(due, handle) heap over the pending jobs; entries of jobs no longer pending are skipped."""
        self._results: dict[int, Reply] = {}
        self._errors: dict[int, str | Exception] = {}
        self._dropped: set[int] = set()
        self._next = 0
        self._conns: list[Connection] = []
        self._slots: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._busy: list[int | None] = []
        self._alive: list[bool] = []
        self._procs: list[Any] = []
        self._block = torch.zeros(2, workers, layout.size).share_memory_()
        for w in range(workers):
            slot_in, slot_out = self._block[0, w], self._block[1, w]
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_worker,
                args=(child, model, layout, shards, config, seed, threads, self._block, w, client),
                daemon=True,
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._slots.append((slot_in, slot_out))
            self._busy.append(None)
            self._alive.append(True)
            self._procs.append(proc)
        self._starting = set(range(workers))
        """Workers that have not said they are ready."""
        if wait:  # start timing only once every worker is ready
            while not self.ready(block=True):
                pass

    def ready(self, block: bool = False) -> bool:
        """Whether every worker has started (then the dispatcher runs); ``block``: wait for the next to say so.
        A worker that cannot load the client's code raises its error here, one that died a RuntimeError."""
        for i in sorted(self._starting):
            conn = self._conns[i]
            if not block and not conn.poll():
                continue
            try:
                status, _, problem, _, _ = conn.recv()
            except EOFError:
                self.close()
                raise RuntimeError(f"process executor: worker {i} died while starting") from None
            if status == "raise":
                self.close()
                raise problem
            self._starting.discard(i)
            if block:
                break
        if self._starting or hasattr(self, "_thread"):
            return not self._starting
        self._thread = threading.Thread(target=self._dispatch, name="simfl-process-executor", daemon=True)
        self._thread.start()
        return True

    # -- engine side ---------------------------------------------------------

    def submit(self, job: Job, due: float | None = None) -> int:
        with self._lock:
            handle = self._next
            self._next += 1
            self._pending[handle] = job
            heapq.heappush(self._queue, (math.inf if due is None else due, handle))
            self._fill()
            return handle

    def collect(self, handle: int) -> Reply:
        with self._lock:
            if handle in self._pending:  # wanted now: train it next
                heapq.heappush(self._queue, (-math.inf, handle))
            self._fill()
            while handle not in self._results and handle not in self._errors:
                if not self._thread.is_alive():
                    raise RuntimeError("process executor: every worker has exited")
                self._lock.wait(timeout=1.0)
            if handle in self._errors:
                error = self._errors.pop(handle)
                if isinstance(error, Exception):
                    raise error
                last = (error.strip().splitlines() or ["(no traceback)"])[-1]
                raise RuntimeError(f"process executor: training job failed in a worker: {last}\n{error}")
            return self._results.pop(handle)

    def discard(self, handle: int) -> None:
        with self._lock:
            if self._results.pop(handle, None) is not None or self._errors.pop(handle, None) is not None:
                return
            if self._pending.pop(handle, None) is not None:
                return
            if handle in self._busy:
                self._dropped.add(handle)

    def close(self) -> None:
        for i in getattr(self, "_starting", ()):  # still importing: nothing to finish
            self._procs[i].terminate()
        for conn in self._conns:
            try:
                conn.send(_STOP)
            except OSError:
                pass
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        thread = getattr(self, "_thread", None)
        if thread is not None:
            thread.join(timeout=10)
        for conn in self._conns:
            conn.close()
        self._conns = []

    # -- dispatcher thread ---------------------------------------------------

    def _fill(self) -> None:
        """Hand queued jobs to idle workers (caller holds the lock)."""
        for w, busy in enumerate(self._busy):
            if busy is not None or not self._alive[w]:
                continue
            while self._queue and self._queue[0][1] not in self._pending:
                heapq.heappop(self._queue)
            if not self._queue:
                return
            handle = heapq.heappop(self._queue)[1]
            job = self._pending.pop(handle)
            self._slots[w][0].copy_(job.start)
            m = job.message
            self._conns[w].send((handle, job.client, job.round, dict(m.hooks), to_numpy(m.arrays), dict(m.config),
                                 job.epochs))
            self._busy[w] = handle

    def _dispatch(self) -> None:
        """Receive finished jobs, copy their weights out of the worker's slot, refill the worker."""
        live = {conn: w for w, conn in enumerate(self._conns)}
        while live:
            for ready in connection.wait(list(live)):
                conn = cast(Connection, ready)
                w = live[conn]
                try:
                    msg: tuple[str, int, Any, dict[str, Any], dict[str, float]] = conn.recv()
                except (EOFError, OSError):
                    del live[conn]
                    with self._lock:
                        lost = self._busy[w]
                        self._busy[w] = None
                        self._alive[w] = False
                        if lost is not None and lost not in self._dropped:
                            self._errors[lost] = f"worker {w} exited while training this job"
                        self._lock.notify_all()
                    continue
                status, handle, text, arrays, metrics = msg
                with self._lock:
                    self._busy[w] = None
                    if handle in self._dropped:
                        self._dropped.discard(handle)
                    elif status == "done":
                        self._results[handle] = Reply(self._slots[w][1].clone(), from_numpy(arrays), metrics)
                    else:
                        self._errors[handle] = text
                    self._fill()
                    self._lock.notify_all()
