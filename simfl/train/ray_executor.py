"""The ``ray`` executor: training jobs on Ray actors, a local Ray instance by default.

Each of ``workers`` actors is built once with the model, layout, client
shards (put in Ray's object store once, shared by every actor) and training
config, and trains with the same torch thread count rule as the CPU
executors, so its results equal ``inline`` and ``process`` bit for bit. A job
goes to the actor with the fewest jobs in flight; only the start weights
travel in and the trained weights out. With ``address`` set, the actors run
on that existing cluster (``ray.init(address=...)``); otherwise a local
instance is started with ``workers * threads`` CPUs and no dashboard, and shut
down on :meth:`RayExecutor.close`. Each actor is declared with the ``threads``
cores it trains with, so Ray never packs more actors on a node than it has cores.
Needs the ``ray`` extra.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from simfl import network, numerics
from simfl.errors import InputError, UserCodeFailed
from simfl.models.flat import Layout
from simfl.train.configs import ClientConfig, ExecutorConfig, TrainConfig
from simfl.train.executor import Executor, Training
from simfl.train.local import Job
from simfl.train.message import Message, Reply, from_numpy, to_numpy
from simfl.train.trainers import make_trainer


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


RAY_CONNECT_TIMEOUT = 60.0
"""Seconds ``ray.init`` has to reach a cluster at an address before the command ends in one line
(``$SIMFL_RAY_TIMEOUT`` replaces it, for a cluster far away)."""


def connect_timeout() -> float:
    """:data:`RAY_CONNECT_TIMEOUT`, or ``$SIMFL_RAY_TIMEOUT`` seconds when that is a positive number."""
    text = os.environ.get("SIMFL_RAY_TIMEOUT", "")
    try:
        value = float(text)
    except ValueError:
        if text:
            raise InputError("SIMFL_RAY_TIMEOUT", f"{text!r} is not a number of seconds") from None
        return RAY_CONNECT_TIMEOUT
    if not 0 < value < float("inf"):
        raise InputError("SIMFL_RAY_TIMEOUT", f"{text!r} must be a positive, finite number of seconds")
    return value


_PROBE = """
import logging, sys
import ray
try:
    ray.init(address=sys.argv[1], include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    ray.shutdown()
except Exception as exc:
    print((str(exc).strip().splitlines() or [type(exc).__name__])[0][:200], flush=True)
    sys.exit(1)
"""
"""Connects to the cluster at ``argv[1]`` and leaves; prints why not."""


def quiet_init(ray: Any, where: str, address: str | None = None, address_key: str | None = None,
               **kwargs: Any) -> None:
    """``ray.init`` without Ray's own log lines on the terminal (its C++ core writes to file descriptor 2,
    e.g. one warning a second while it fails to reach a cluster); what it wrote is dropped. Ray failing to
    start or connect ends in one line naming ``where``.

    With an ``address``, every wait is bounded (``ray.init`` itself retries for minutes in silence): a
    ``host:port`` that does not accept a TCP connection is refused within :data:`simfl.network.CONNECT_TIMEOUT`
    seconds, and a first connection is tried in a child process given :func:`connect_timeout` seconds, killed
    after that, so that nothing of a connection that never completes stays in this process. Both end in one
    line naming ``address_key`` (default ``where``), the setting that gave the address."""
    if address is not None:
        _probe(address, address_key or where)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                           "logging_level": logging.ERROR, **kwargs}
                if address is not None:
                    options["address"] = address
                ray.init(**options)
            except Exception as exc:
                raise InputError(where, f"cannot start or reach Ray: {_first_line(exc)}") from None
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def _probe(address: str, where: str) -> None:
    """Refuse, in one line, an address where no Ray cluster answers within :func:`connect_timeout` seconds."""
    hint = "start the cluster's head (ray start --head) or check the address"
    point = network.endpoint(address, where)
    if point is not None:
        network.check_port(*point, where, hint)
    limit = connect_timeout()
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, address], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=limit, check=False)
    except subprocess.TimeoutExpired:
        raise InputError(where, f"no Ray cluster at {address} answered within {limit:g} s (SIMFL_RAY_TIMEOUT sets "
                         f"the wait): {hint}") from None
    if done.returncode != 0:
        lines = done.stdout.decode(errors="replace").strip().splitlines()
        why = lines[-1] if lines else f"the connection attempt ended with exit code {done.returncode}"
        raise InputError(where, f"cannot reach the Ray cluster at {address}: {why} (a cluster with token "
                         f"authentication needs its RAY_AUTH_TOKEN here)")


class _Trainer:
    """Actor body: one model replica training jobs with a fixed thread count."""

    def __init__(
        self, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]],
        config: TrainConfig, seed: int, threads: int, client: ClientConfig | None = None,
    ) -> None:
        torch.set_num_threads(threads)
        numerics.apply()
        self.trainer = make_trainer(model, layout, shards, config, seed, client)

    def train(
        self, client: int, round_: int, start: np.ndarray, hooks: dict[str, Any], arrays: dict[str, np.ndarray],
        config: dict[str, Any], epochs: int | None = None,
    ) -> tuple[np.ndarray, dict[str, np.ndarray], dict[str, float]]:
        job = Job(client, round_, torch.from_numpy(start.copy()), Message(hooks, from_numpy(arrays), config), epochs)
        reply = self.trainer.run(job)
        return reply.weights.numpy(), to_numpy(reply.arrays), dict(reply.metrics)


class RayExecutor(Executor):
    """``workers`` Ray actors, each training one job at a time."""

    @classmethod
    def of(cls, config: ExecutorConfig, training: Training) -> RayExecutor:
        """The section's actors: its workers, threads per job and cluster address."""
        t = training
        return cls(t.model, t.layout, t.shards, t.train, t.seed, workers=config.pool_size(),
                   threads=config.train_threads(), address=config.address, client=t.client)

    def __init__(
        self, model: nn.Module, layout: Layout, shards: Sequence[tuple[torch.Tensor, torch.Tensor]],
        config: TrainConfig, seed: int, workers: int, threads: int, address: str | None = None,
        client: ClientConfig | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise InputError("executor.kind", "ray needs the 'ray' package: pip install 'simfl[ray]'") from None
        self.ray = ray
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            if address is None:
                quiet_init(ray, "executor", num_cpus=workers * threads)
            else:
                quiet_init(ray, "executor", address=address, address_key="executor.address")
        remote: Any = ray.remote(num_cpus=threads)(_Trainer)  # what each actor really uses
        shards_ref = ray.put(shards)
        self._actors: list[Any] = [remote.remote(model, layout, shards_ref, config, seed, threads, client)
                                   for _ in range(workers)]
        self._load = [0] * workers
        self._jobs: dict[int, tuple[Any, int]] = {}
        self._next = 0

    def submit(self, job: Job, due: float | None = None) -> int:
        handle = self._next
        self._next += 1
        a = min(range(len(self._actors)), key=self._load.__getitem__)
        m = job.message
        ref = self._actors[a].train.remote(job.client, job.round, job.start.numpy(), dict(m.hooks), to_numpy(m.arrays),
                                           dict(m.config), job.epochs)
        self._load[a] += 1
        self._jobs[handle] = (ref, a)
        return handle

    def collect(self, handle: int) -> Reply:
        ref, a = self._jobs.pop(handle)
        try:
            weights, arrays, metrics = self.ray.get(ref)
        except self.ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            if isinstance(cause, InputError | UserCodeFailed):  # the user's mistake or code: raised as such here
                raise cause from None
            raise
        finally:
            self._load[a] -= 1
        return Reply(torch.from_numpy(np.array(weights, copy=True)), from_numpy(arrays), metrics)

    def discard(self, handle: int) -> None:
        job = self._jobs.pop(handle, None)
        if job is not None:
            self._load[job[1]] -= 1  # the actor still runs it; its result is simply never fetched

    def close(self) -> None:
        for actor in self._actors:
            self.ray.kill(actor)
        self._actors = []
        if self._owns_ray:
            self.ray.shutdown()
