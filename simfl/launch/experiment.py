"""Runs a scenario: every (algorithm, seed) pair on shared data, initial model and delay draws.

For one seed, all algorithms see the same client partition (stream
``(seed, "partition")``), the same initial weights (``(seed, "init")``), the
same k-th round latency of each client (``(seed, "latency", m)``) and the same
batch order for the same (client, round) (``(seed, "train", m, k)``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import nn

from simfl import collector, rng
from simfl.algorithms import Setup
from simfl.algorithms.configs import StoreSpec, run_name
from simfl.data import Dataset
from simfl.data.base import Shards
from simfl.data.partition import hold_out, split
from simfl.errors import InputError
from simfl.latency import Workload, stragglers
from simfl.latency.availability import Availability
from simfl.models import Layout
from simfl.models.configs import FlowerAppModelConfig
from simfl.models.cost import exchanged_bytes, training_flops_per_sample
from simfl.output.recording import LayerRecorder
from simfl.schema import costs, plugins
from simfl.schema.scenario import Scenario
from simfl.sim.engine import Budget, Checkpointing, Concurrency, Phased, Progress, RoundRules, Simulation
from simfl.sim.pulse import Pulse
from simfl.sim.state import SimState
from simfl.sim.verify import RunStopped
from simfl.train import app_evaluation
from simfl.train.client_eval import ClientEvaluator
from simfl.train.configs import DEFAULT_TIMEOUT, ClientConfig, EntryTrainConfig, TrainConfig
from simfl.train.evaluate import Evaluator, Scores
from simfl.train.executor import Executor, Training, build
from simfl.train.flower import no_model

if TYPE_CHECKING:
    from simfl.algorithms.serverapp import AppStart

Engine = Literal["auto", "simpy", "heap"]


@dataclass
class Federation:
    """What every algorithm of one seed shares: data shards, the initial model, the workload."""

    seed: int
    dataset: Dataset
    shards: Shards
    model: nn.Module
    layout: Layout
    init: torch.Tensor
    workload: Workload
    evaluate: Callable[[torch.Tensor], Scores] | None = None
    """How the global model is scored, when not by simfl on the test set: a Flower app's model by the app's
    evaluate_fn (:class:`~simfl.algorithms.serverapp.AppEvaluation`), or not at all."""
    train_config: dict[str, Any] | None = None
    """The config of the first train message of a Flower app's ServerApp, which the train messages of simfl's own
    algorithms carry to its ClientApp (``client.train_config``); None: the scenario's."""

    def client(self, scenario: Scenario) -> ClientConfig | None:
        """The scenario's ``client:``, its ``train_config`` the app's (:attr:`train_config`) when the scenario gives
        none."""
        if scenario.client is None or self.train_config is None or scenario.client.train_config:
            return scenario.client
        return scenario.client.model_copy(update={"train_config": dict(self.train_config)})

    @property
    def client_sizes(self) -> list[int]:
        return list(self.workload.samples)


@dataclass
class RunResult:
    """The outcome of one (algorithm, seed) run."""

    algorithm: str
    seed: int
    state: SimState
    wall_seconds: float
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """The algorithm's own per-run tables (:meth:`~simfl.algorithms.base.Algorithm.tables`)."""
    cpu_seconds: float = 0.0
    """CPU seconds of this process over the same span as ``wall_seconds`` (every thread of it; a pool's worker
    processes not counted)."""


def load_dataset(scenario: Scenario) -> Dataset:
    """Load the scenario's dataset (the same for every seed)."""
    return plugins.lookup("dataset", scenario.data.dataset).load(scenario.data)


def build_model(scenario: Scenario, dataset: Dataset, seed: int) -> nn.Module:
    """The model, initialised from the stream (seed, "init") without touching the global generator."""
    builder = plugins.lookup("model", scenario.model.name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(rng.torch_seed(seed, "init"))
        return builder.build(scenario.model, dataset.input_shape, dataset.num_classes)


def federation(scenario: Scenario, dataset: Dataset, seed: int, entry: int | None = None) -> Federation:
    """Partition the data and build the initial model for ``seed``, for the algorithm ``entry`` (None: any).

    A Flower app's own model (``model: flower_app``) is the app's to hold under its ServerApp, which starts in the
    run itself (:func:`~simfl.models.arrays.held`); simfl's own algorithms need it as weights first
    (:func:`app_model`)."""
    labels = dataset.y_train.numpy()
    with collector.paused():  # the clients' parts and shards, built at once (simfl/collector.py)
        parts = split(scenario.data.partition, labels, rng.stream(seed, "partition"), dataset.groups_train)
        scenario.check_clients(len(parts))
        sizes = parts.sizes()  # what latency and weights see, with or without a validation set
        validation = getattr(scenario.data, "validation", None)
        if validation is not None:  # scored on rows held out of the clients' data, never on the test set
            parts, held_rows = hold_out(parts, validation, rng.stream(seed, "validation"))
            dataset = dataset.scored_on(held_rows)
        shards = Shards(dataset.x_train, dataset.y_train, parts)
    start = None
    model: nn.Module
    flops: int | Callable[[], int]
    if isinstance(scenario.model, FlowerAppModelConfig):
        entries = scenario.algorithms if entry is None else [scenario.algorithms[entry]]
        if all(a.holds_model for a in entries):
            from simfl.models.arrays import held

            model = held()
        else:
            model, start = app_model(scenario.model, len(parts), seed)
        flops = 0  # the app's network is not simfl's to run
    else:
        model = build_model(scenario, dataset, seed)
        flops = functools.partial(training_flops_per_sample, model, dataset.x_train[0])  # counted if a delay needs it
    layout = Layout.of(model)
    evaluate: Callable[[torch.Tensor], Scores] | None = None
    if start is not None:
        from simfl.algorithms.serverapp import AppEvaluation

        evaluate = no_evaluation if start.evaluate_fn is None else AppEvaluation(layout, start, seed)
    workload = Workload(model_bytes=exchanged_bytes(layout), flops=flops, samples=sizes,
                        epochs=scenario.train.epochs)
    return Federation(seed, dataset, shards, model, layout, layout.flatten(model), workload, evaluate,
                      None if start is None else start.config)


def app_model(config: FlowerAppModelConfig, nodes: int, seed: int) -> tuple[nn.Module, AppStart]:
    """A Flower app's model for simfl's own algorithms: the arrays its ServerApp sends first (on a grid of ``nodes``,
    seeded as a ServerApp run of ``seed`` starts), with what the app did before (its ``evaluate_fn`` scores the model,
    NaN without one; its message's config is what simfl's train messages carry)."""
    from simfl.algorithms.serverapp import probe
    from simfl.models.arrays import ArraysNet

    start = probe(config.app, config.run_config, nodes, seed, DEFAULT_TIMEOUT)
    if not start.arrays:
        raise InputError("model.name", no_model(f"simfl's algorithms take the model from the ServerApp's first train "
                                                f"message, and the ServerApp {config.app} sends none with one "
                                                "ArrayRecord of the model's weights"))
    floating = [k for k, v in start.arrays.items() if np.issubdtype(v.dtype, np.floating)]
    if not floating:
        raise InputError("model.name", f"flower_app takes the model of simfl's own algorithms from the first train "
                         f"message of the ServerApp {config.app}, whose arrays hold no floating-point values "
                         f"({', '.join(f'{k}: {v.dtype}' for k, v in list(start.arrays.items())[:3])}): nothing "
                         "to train; name a model, or run the app's ServerApp")
    return ArraysNet(start.arrays), start


def entry_train(scenario: Scenario, algo_index: int) -> TrainConfig:
    """The local training of entry ``algo_index``: the scenario's ``train:``, with what the entry's own ``train:`` sets."""
    own: EntryTrainConfig | None = getattr(scenario.algorithms[algo_index], "train", None)
    return scenario.train if own is None else own.over(scenario.train)


def make_executor(scenario: Scenario, fed: Federation, train: TrainConfig | None = None) -> Executor:
    """The executor the scenario asks for (``executor.kind``, by name: :data:`simfl.train.configs.EXECUTORS`),
    training on private copies of the model (with ``train``, default the scenario's ``train:``).

    CPU executors train with ``scenario.executor.train_threads()`` torch
    threads, so ``inline``, ``process`` and ``ray`` give bit-identical results.
    """
    training = Training(fed.model, fed.layout, fed.shards, scenario.train if train is None else train, fed.seed,
                        fed.client(scenario))
    return build(scenario.executor, training)


def no_evaluation(weights: torch.Tensor) -> Scores:
    """Pure-latency mode records no accuracy: every score is NaN."""
    return Scores(float("nan"), float("nan"))


def federated_scoring(fed: Federation, clients: ClientEvaluator, updates: Callable[[], int]
                      ) -> Callable[[torch.Tensor], Scores] | None:
    """The ClientApp's federated evaluation of the global model (:mod:`simfl.train.app_evaluation`) where simfl cannot
    score it itself: the app's model without a server-side ``evaluate_fn``, or no test set; None elsewhere."""
    if fed.evaluate is not no_evaluation and (fed.evaluate is not None or len(fed.dataset.y_test)):
        return None
    return app_evaluation.federated(clients, updates)


def chain(callbacks: list[Progress]) -> Progress | None:
    """One engine callback calling ``callbacks`` in order (None for none)."""
    if len(callbacks) <= 1:
        return callbacks[0] if callbacks else None

    def call(state: SimState) -> None:
        for callback in callbacks:
            callback(state)

    return call


@dataclass(frozen=True)
class RunOptions:
    """How one run is run (beside what it runs): progress, verification, checkpoints, resume, engine."""

    progress: Progress | None = None
    verify: bool = False
    """Check invariants while running (:mod:`simfl.sim.verify`); a broken one raises RunStopped."""
    checkpointing: Checkpointing | None = None
    """Save the simulation's data on this schedule."""
    resume: dict[str, Any] | None = None
    """Such saved data: continue that run."""
    on_update: Progress | None = None
    """Called with the state after every aggregation (live tracking)."""
    say: Callable[[SimState, str], None] | None = None
    """Where a run's own lines go (a ServerApp's rounds), with the state then (the unit's progress)."""
    pulse: Progress | None = None
    """Called with the state as the run starts and then every few wall seconds from within it
    (:class:`~simfl.sim.pulse.Pulse`): how far it is, between its metric rows."""
    engine: Engine = "auto"
    """The clock of :class:`~simfl.sim.engine.Simulation` (:mod:`simfl.sim.clock`): ``simpy`` or ``heap``, the
    same rules and order on both (the same events and state); ``auto``: the heap clock in pure-latency mode
    (``executor.kind: none``), where events dominate, SimPy otherwise."""


def store_for(scenario: Scenario, clients: int, params: int) -> StoreSpec:
    """Where this run keeps its per-client vectors (``client_state``; see :func:`costs.store_spec`)."""
    spec = costs.store_spec(scenario, clients * params * 4 * costs.store_rows(scenario))
    if spec.kind == "disk" and scenario.client_state is not None:
        scenario.client_state.check_dir()
    return spec


def run_one(
    scenario: Scenario, fed: Federation, algo_index: int, options: RunOptions | None = None, **changes: Any,
) -> RunResult:
    """Run algorithm ``scenario.algorithms[algo_index]`` on federation ``fed``.

    ``options`` (with ``changes`` to its fields, e.g. ``engine="simpy"``) says how; a run stopped
    by verification raises :class:`~simfl.sim.verify.RunStopped` naming the algorithm and seed.
    """
    opts = dataclasses.replace(options or RunOptions(), **changes)
    progress, verify, checkpointing, resume, engine = (opts.progress, opts.verify, opts.checkpointing, opts.resume,
                                                       opts.engine)
    config = scenario.algorithms[algo_index]
    null = not scenario.executor.trains
    sim: Simulation  # built below; the callbacks read it once it runs
    clients = ClientEvaluator(fed.model, fed.layout, fed.shards, fed.seed, fed.client(scenario),
                              lambda m: sim.state.clients[m].memory)  # what m keeps, once the simulation is built
    told = opts.say
    say = None if told is None else (lambda line: told(sim.state, f"[{sim.world.clock.now:g} s] {line}"))
    setup = Setup(fed.layout, fed.init.clone(), len(fed.shards), tuple(fed.client_sizes), fed.seed,
                  store_for(scenario, len(fed.shards), fed.init.numel()), None if null else clients,
                  say, data_held=fed.dataset.name != "flower_app")
    algorithm = plugins.lookup("algorithm", config.name)(config, setup)
    latency_cls = plugins.lookup("latency", scenario.latency.model)
    network, latency_config, fleet = scenario.network, scenario.latency, None
    read = getattr(latency_cls, "read", None)  # a fleet trace's devices
    if network is not None and read is not None:  # in phases a fleet's draw is its compute: the network transfers
        latency_config = latency_config.model_copy(update={"transfers": 0})
        fleet = tuple(d.bandwidth for d in read(latency_config))
    with collector.paused():  # the clients' streams and absences, built at once (simfl/collector.py)
        latency = stragglers.over(latency_cls(latency_config, len(fed.shards), fed.seed, fed.workload),
                                  scenario.stragglers, fed.seed)
        trace = latency.absences()
        availability = None if scenario.availability is None and trace is None else Availability(
            scenario.availability, len(fed.shards), fed.seed, trace, latency_cls.absence_source(scenario.latency))
    evaluator: Callable[[torch.Tensor], Scores] = (
        no_evaluation if null
        else algorithm.scoring() or federated_scoring(fed, clients, lambda: sim.state.updates) or fed.evaluate
        or Evaluator(copy.deepcopy(fed.model), fed.layout, fed.dataset.x_test, fed.dataset.y_test)
    )
    recorder = None if scenario.record is None else LayerRecorder(algorithm, fed.layout, scenario.record.layer)
    observers = [o for o in (recorder, opts.on_update) if o is not None]
    updates = scenario.budget.updates if config.stopped_by_updates() else None  # else its own end or budget.time
    budget = Budget(scenario.budget.time, updates)
    executor = make_executor(scenario, fed, entry_train(scenario, algo_index))
    server = scenario.server
    concurrency = None if server is None else Concurrency(server.concurrency, server.selection)
    sim = Simulation(
        algorithm, latency, executor, evaluator, fed.client_sizes, budget, scenario.eval.every, fed.seed,
        availability=availability, server_time=scenario.server_time, progress=progress, on_update=chain(observers),
        eval_each_update=scenario.eval.after_each_update,
        rounds=None if scenario.rounds is None else RoundRules(scenario.rounds.deadline, scenario.rounds.over_select),
        concurrency=concurrency,
        verify=verify, checkpointing=checkpointing, resume=resume,
        clock="heap" if engine == "heap" or (engine == "auto" and null) else "simpy",
        observers=() if opts.pulse is None else (Pulse(opts.pulse),),
        phased=None if network is None else Phased(network, fed.workload.model_bytes, fleet),
        epochs=scenario.train.epochs,
    )
    start, cpu = time.perf_counter(), time.process_time()
    try:
        state = sim.run()
    except RunStopped as exc:
        raise RunStopped(exc.message, exc.state, run_name(config), fed.seed, exc.cause) from None
    finally:
        executor.close()
        algorithm.close()
    return RunResult(run_name(config), fed.seed, state, time.perf_counter() - start, algorithm.tables(),
                     time.process_time() - cpu)
