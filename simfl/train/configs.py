"""The configs of local training (``train:``), of the executor (``executor:``) and of who trains a client
(``client:``), importable without torch.

``simfl validate`` needs only these. Validating ``client.flower_app`` loads the app as every run
does (:func:`load_app`, which imports Flower only when called), so it lives here too.
"""

from __future__ import annotations

import math
import os
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from simfl.errors import InputError, as_field_error
from simfl.fields import NonNegFloat, PositiveFloat, PositiveInt, Section
from simfl.names import import_object
from simfl.rng import importing

INSTALL = "pip install 'simfl[flower]'"
"""What installs Flower (named when it is missing)."""
Scalar = bool | int | float | str
"""A ``run_config`` value (Flower's ``UserConfigValue``)."""
DEFAULT_TIMEOUT = 600.0
"""Seconds one call of a ClientApp may run by default (``client.timeout``)."""
MAX_TIMEOUT = 1e6
"""The longest ``client.timeout`` (about 11.6 days; longer waits overflow the platform's timers)."""
CLIENT_APP_HOOKS = frozenset({"prox_mu"})
"""The hooks an algorithm's message may ask of a Flower ClientApp: FedProx's term alone, which reaches the app as the
config key Flower's FedProx sends (``proximal-mu``, :class:`simfl.train.flower.ClientAppTrainer`); the app's own code
trains, so no other hook can change its training."""


def wall_limit(value: float | None) -> float | None:
    """A limit of wall-clock seconds on user code (``client.timeout``, a ServerApp's ``timeout``), checked."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise ValueError(f"must be a number of seconds in (0, {MAX_TIMEOUT:g}] or null (no limit), got {value}")
    return value


class TrainConfig(Section):
    """Local training on each client."""

    epochs: PositiveInt = Field(5, description="Local epochs E per round.")
    batch_size: PositiveInt = Field(32, description="Mini-batch size.")
    lr: PositiveFloat = Field(0.01, description="SGD learning rate.")
    momentum: NonNegFloat = Field(0.0, description="SGD momentum (fresh every round).")
    weight_decay: NonNegFloat = Field(0.0, description="SGD weight decay.")


class EntryTrainConfig(Section):
    """One algorithm entry's own local training options, over the scenario's ``train:`` section (``simfl tune``
    writes each entry's tuned learning rate here). ``epochs`` is not among them: it sets every client's compute
    time, which all entries of a scenario share (the same k-th latency of each client)."""

    batch_size: PositiveInt | None = Field(None, description="Mini-batch size (default: train.batch_size).")
    lr: PositiveFloat | None = Field(None, description="SGD learning rate (default: train.lr).")
    momentum: NonNegFloat | None = Field(None, description="SGD momentum (default: train.momentum).")
    weight_decay: NonNegFloat | None = Field(None, description="SGD weight decay (default: train.weight_decay).")

    def over(self, train: TrainConfig) -> TrainConfig:
        """``train`` with the options this entry sets."""
        return train.model_copy(update=self.model_dump(exclude_none=True))


ExecutorKind = Literal["inline", "process", "adaptive", "ray", "cuda", "none"]
"""Where local training runs (``executor.kind``; :mod:`simfl.train.executor`)."""
EXECUTORS: dict[str, str] = {
    "inline": "simfl.train.executor:InlineExecutor",
    "process": "simfl.train.pool:ProcessExecutor",
    "adaptive": "simfl.train.adaptive:AdaptiveExecutor",
    "ray": "simfl.train.ray_executor:RayExecutor",
    "cuda": "simfl.train.cuda:CudaExecutor",
    "none": "simfl.train.executor:NullExecutor",
}
"""Each ``executor.kind``'s class (``module:Class``), imported when a run builds one (:func:`simfl.train.executor.build`:
the class's ``of`` reads the ``executor:`` section), as the other components list their built-ins by name."""


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


class ExecutorConfig(Section):
    """Where local training runs."""

    kind: ExecutorKind = Field(
        "inline",
        description=(
            "inline: in the simulating process, one job at a time. process: a pool of CPU worker "
            "processes training in-flight clients concurrently. adaptive: inline until the jobs trained have "
            "taken switch_after seconds, then a process pool (the same numbers either way). "
            "ray: Ray actors (a local Ray instance unless address is set). "
            "cuda: one GPU, several in-flight clients at once on CUDA streams. "
            "none: pure-latency mode, no training and no evaluation (see simfl.train.executor.NullExecutor)."
        ),
    )
    workers: PositiveInt | None = Field(
        None, description="Concurrent training jobs (process/ray workers, cuda streams); default: cores (cuda: 4)."
    )
    threads: PositiveInt | None = Field(
        None,
        description=(
            "Torch threads per training job, also for inline (default: max(1, cores // workers)). "
            "Runs with the same threads are bit-identical across inline, process and ray."
        ),
    )
    start_method: Literal["spawn", "forkserver", "fork"] = Field(
        "spawn", description="How process workers start (spawn is safe with torch's thread pools)."
    )
    switch_after: PositiveFloat = Field(
        1.0, description="adaptive only: wall seconds of inline training after which a process pool starts, "
        "taking the jobs submitted once it is ready.",
    )
    address: str | None = Field(None, description="ray only: address of an existing Ray cluster (default: local).")
    update_scale: PositiveFloat = Field(
        1e-3, description="none only: size of the deterministic pseudo-update added to the start weights."
    )

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> ExecutorConfig:
        if self.address is not None and self.kind != "ray":
            raise ValueError(f"address only applies to kind ray, not {self.kind}")
        return self

    def pool_size(self) -> int:
        """Concurrent jobs: ``workers``, else the core count (cuda: 4 streams)."""
        if self.workers is not None:
            return self.workers
        return 4 if self.kind == "cuda" else cores()

    def train_threads(self) -> int:
        """Torch threads each training job runs with (the same rule for every CPU executor)."""
        if self.threads is not None:
            return self.threads
        workers = self.workers if self.workers is not None else cores()
        return max(1, cores() // workers)

    # -- what the executor states of its costs (the estimate, and how many runs fit the machine) --

    @property
    def trains(self) -> bool:
        """Whether clients train at all (``none``: pure-latency mode, no training and no evaluation)."""
        return self.kind != "none"

    def inline(self) -> bool:
        """Whether jobs train in the simulating process, one at a time (``inline``)."""
        return self.kind == "inline"

    def pooled(self) -> bool:
        """Whether jobs may train in parallel on the CPU, in worker processes or Ray actors (``adaptive``'s pool once it
        has started: its costs are counted as the pool's, the most it can take)."""
        return self.kind in ("process", "adaptive", "ray")

    def jobs(self) -> int:
        """Training jobs that run at once: one inline, the pool's workers (or streams) otherwise."""
        return 1 if self.kind in ("inline", "none") else self.pool_size()

    def cores_busy(self) -> int:
        """Cores one run keeps busy: its threads, times the workers where jobs train in parallel on the CPU."""
        if self.pooled():
            return self.pool_size() * self.train_threads()
        return self.train_threads()

    def cpu_threads(self) -> int | None:
        """Threads one training job runs on when it trains on the CPU; None on a GPU, whose speed is not stated."""
        return None if self.kind == "cuda" else self.train_threads()

    def timed_by_cpu(self) -> bool:
        """Whether a run's CPU time in its own process is its work at one thread, which the estimate states: every
        job trains there (inline, or none) on one thread. Unlike its wall time, other processes on the machine do
        not inflate it, so such a run teaches the estimate even beside others (:func:`simfl.launch.measure_speeds.learn`)."""
        return self.kind in ("inline", "none") and self.train_threads() == 1

    def trains_ahead(self) -> bool:
        """Whether jobs are trained before the engine collects them, so that each client in flight may hold its
        trained weights until its arrival (the pools of workers or streams); inline and none train a job only
        when it is collected."""
        return self.pooled() or self.kind == "cuda"

    def in_actors(self) -> bool:
        """Whether jobs run in Ray actors, which hold their own cores (a unit's Ray task is declared without them)."""
        return self.kind == "ray"

    def planned_workers(self) -> int | None:
        """The workers as a plan fixes them: a process or Ray pool's size (its default, the planning machine's
        cores), else ``workers`` as given."""
        return self.pool_size() if self.pooled() else self.workers

    def processes(self) -> int:
        """Processes beside the simulating one, each holding the runtime and a model (process workers, Ray
        actors)."""
        return self.pool_size() if self.pooled() else 0

    def spared(self, pool: int) -> ExecutorConfig:
        """The executor a run takes when its launch leaves it ``pool`` spare cores' workers (a Flower App's ClientApp
        calls, :func:`simfl.launch.flwr_app.spare_pool`): ``adaptive`` over them where jobs train ``inline``, so that
        a pool starts once training proves heavy; itself otherwise, or with fewer than two workers."""
        if pool >= 2 and self.inline():
            return self.model_copy(update={"kind": "adaptive", "workers": pool})
        return self


class ClientConfig(Section):
    """Who trains a client: simfl's own local SGD (``train:``), or a Flower ClientApp."""

    flower_app: str | None = Field(
        None, description="Import path package.module:app of a Flower ClientApp (flwr.clientapp.ClientApp, "
        "Message API) that trains each client in place of simfl's local SGD (needs --allow-imports and "
        "`pip install 'simfl[flower]'`). The latency model still decides virtual time (train.epochs sets the "
        "compute work it is given). See docs/flower.md.",
    )
    run_config: dict[str, Scalar] = Field(
        default_factory=dict, description="flower_app only: the app's run config (context.run_config), "
        "e.g. {local-epochs: 1, lr: 0.01}, as [tool.flwr.app.config] gives it under Flower.",
    )
    app_hash: str | None = Field(
        None, description="Written by simfl flwr run: the SHA-256 of the app folder's files that Flower would bundle "
        "(flwr build's selection: its code, pyproject.toml without federations). simfl flwr run --resume refuses "
        "an app whose files changed since, so that one folder never mixes two versions of an app.",
    )
    train_config: dict[str, Scalar] = Field(
        default_factory=dict, description="flower_app only: the ConfigRecord a train message of simfl's own "
        "algorithms carries (a Flower strategy or ServerApp sends its own), with server-round, the client's "
        "round from 1, e.g. {lr: 0.01}. With the app's own model (model: flower_app), each run of simfl's own "
        "algorithms takes it from the first train message of the app's ServerApp instead.",
    )
    timeout: float | None = Field(
        DEFAULT_TIMEOUT, description="flower_app only: wall-clock seconds one call of the app (one client's train "
        "or evaluate message) may run, at most 1e6; a call still running then ends the run in one line naming the "
        "app and this limit (exit 2). null: no limit. Each call runs in a thread of the training process that "
        "waits this long; a call past the limit cannot be stopped and is left to end with the process.",
    )

    @property
    def replaces_training(self) -> bool:
        """Whether a ClientApp trains in place of simfl's local SGD (its cost is the app's, not stated ahead)."""
        return self.flower_app is not None

    @field_validator("flower_app")
    @classmethod
    def _an_app(cls, path: str | None) -> str | None:
        """The app is loaded as every run loads it, so that ``simfl validate`` refuses what the run would."""
        if path is not None:
            with as_field_error():
                load_app(path)
        return path

    @field_validator("timeout")
    @classmethod
    def _seconds(cls, value: float | None) -> float | None:
        return wall_limit(value)

    @field_validator("run_config")
    @classmethod
    def _keys(cls, value: dict[str, Scalar]) -> dict[str, Scalar]:
        for key in value:
            if not key:
                raise ValueError("run_config keys must not be empty")
        return value


def require(where: str) -> None:
    """One line when Flower is not installed."""
    try:
        import flwr  # noqa: F401
    except ImportError:
        raise InputError(where, f"needs Flower (flwr), which is not installed: {INSTALL}") from None


def load_app(path: str) -> Any:
    """The ClientApp at ``path`` (import paths need the user's permission, see :mod:`simfl.names`)."""
    require("client.flower_app")
    from flwr.clientapp import ClientApp

    with importing():
        app = import_object(path, "client.flower_app")
    if not isinstance(app, ClientApp):
        raise InputError("client.flower_app", f"'{path}' is a {type(app).__name__}, not a Flower ClientApp "
                         "(flwr.clientapp.ClientApp)")
    return app
