"""What each part of a run costs: bytes of memory and disk per thing a run keeps, and seconds per thing it does.

The constants are measured data: ``costs.json`` beside this module holds one entry per constant, with its value,
unit, what it is, what measured it (the benchmark and its command), when and on which machine; a refit rewrites
that file (``python -m benchmarks.costs``), not this code. Here are only the formulas, which read each constant by
name (:func:`number`, :func:`whole`; the file is read once, without torch). They turn what the components state
(the model's bytes and FLOPs, the dataset's sizes, the executor's threads) and what bounds a run
(:mod:`simfl.schema.bounds`: updates, evaluations, events) into bytes and seconds. Seconds are counted at
:class:`Speeds`: this machine's, as ``simfl run`` measured and cached them (:mod:`simfl.speeds`), else the
reference machine's (the entries marked ``reference``, fitted on one machine on one day). The estimate
(:mod:`simfl.schema.estimate`) adds them up. Where the per-client vectors live, RAM or disk, is decided here too
(:func:`store_spec`), for the estimate and the run alike. What follows from the code itself, not from a
measurement (an evaluation's batch, a ``.npy`` header, the probe's model), stays below as code.
"""

from __future__ import annotations

import functools
import json
import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from simfl import speeds
from simfl.algorithms.configs import StoreKind, StoreSpec
from simfl.data.configs import DataFacts

TABLE = Path(__file__).with_name("costs.json")
"""The measured constants: a JSON object, name -> an entry of :data:`FIELDS` (:class:`CostConstant`)."""
FIELDS = ("value", "unit", "reference", "what", "measured_by", "when", "machine", "notes")
"""The fields of an entry, in the file's order."""

EVAL_BATCH = 1024
"""Test samples per evaluation batch (:class:`simfl.train.evaluate.Evaluator`)."""
NPY_HEADER_BYTES = 128
"""Header of a ``.npy`` file."""
CSV_COPIES = 2
"""Copies of a run's CSV text in memory when its files are made at the end (the text, then its bytes)."""
PROBE_MODEL_BYTES = 432
"""Bytes of the engine's probe's model (:data:`simfl.launch.measure_speeds.PROBE`: an MLP of 108 parameters), whose
work at an arrival ``NULL_ARRIVAL_SECONDS`` includes: a rule's passes count the bytes beyond it."""


@dataclass(frozen=True)
class CostConstant:
    """One measured constant of :data:`TABLE` and where it came from."""

    name: str
    value: int | float
    """A whole number (bytes, copies, runs) or a real one (seconds, ratios)."""
    unit: str
    reference: bool
    """A speed of the reference machine: scaled by this machine's measured engine (:attr:`Speeds.factor`), or
    replaced by its measured training, where ``simfl run`` measured them."""
    what: str
    measured_by: str
    """The benchmark and its command, or how else it was measured ("not recorded": not said)."""
    when: str
    machine: str
    notes: str
    """The figures it was read from."""


@functools.cache
def table() -> dict[str, CostConstant]:
    """The constants of :data:`TABLE` by name, read once and checked: every field there, each a string but the
    value (a number) and ``reference`` (a flag)."""
    constants = {}
    for name, entry in json.loads(TABLE.read_text()).items():
        if set(entry) != set(FIELDS):
            raise ValueError(f"{TABLE}: {name} has the fields {sorted(entry)}, not {sorted(FIELDS)}")
        value = entry["value"]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{TABLE}: {name}'s value {value!r} is not a finite number")
        if not isinstance(entry["reference"], bool) or not all(
                isinstance(entry[f], str) for f in FIELDS if f not in ("value", "reference")):
            raise ValueError(f"{TABLE}: {name}: reference must be true or false, and the other fields strings")
        constants[name] = CostConstant(name, **entry)
    return constants


def number(name: str) -> float:
    """The constant ``name`` of :data:`TABLE`."""
    return float(table()[name].value)


def whole(name: str) -> int:
    """The constant ``name`` of :data:`TABLE`, a whole number (bytes, copies, runs)."""
    value = table()[name].value
    if not isinstance(value, int):
        raise ValueError(f"{TABLE}: {name} must be a whole number, got {value!r}")
    return value


def __getattr__(name: str) -> int | float:
    """``costs.NAME``: the constant of that name, for what reads one outside the formulas (messages, tests)."""
    found = None if name.startswith("__") else table().get(name)  # the import system asks for __path__ and its kin
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return found.value


@dataclass(frozen=True)
class Speeds:
    """How fast this machine runs each part of a run: measured here and cached (:mod:`simfl.speeds`, measured by
    ``simfl run``), else the reference machine's (the entries of :data:`TABLE` marked ``reference``).

    A local training job takes ``job`` beside its steps, a step of ``b`` samples ``step + b * sample`` seconds and
    an evaluation ``eval_batch`` per batch of :data:`EVAL_BATCH` plus ``eval_sample`` per sample; an arrival
    without training ``arrival``;
    ``factor`` is this machine's engine time against the reference's (the probe's arrival over
    ``PROBE_ARRIVAL_SECONDS``), by which the engine's per-thing seconds (arrivals, clients set up, per-client
    vectors, the launch) are scaled.
    """

    job: float
    step: float
    sample: float
    eval_batch: float
    eval_sample: float
    arrival: float = field(default_factory=lambda: number("NULL_ARRIVAL_SECONDS"))
    factor: float = 1.0
    measured: tuple[str, ...] = ()
    """What was measured on this machine (``training``, ``engine``); the rest is the reference machine's."""
    learned: float = 1.0
    """How this machine's finished runs of the same model, batch and shape (or pure-latency runs) compared with
    their estimates: the median of their measured over estimated wall seconds (:func:`simfl.speeds.observed`,
    bounded by ``LEARNED_BOUND``), by which a run's wall is scaled; 1 before ``LEARNED_FROM`` such runs
    finished here."""
    runs: int = 0
    """The finished runs :attr:`learned` comes from."""
    lesson: dict[str, Any] | None = None
    """What finished runs of this kind teach and these speeds read (:func:`lesson`; None: none read, and a finished
    run teaches nothing: also where the estimate knows it omits a cost, ``ARRIVAL_BYTES_COUNTED``)."""

    @classmethod
    def reference(cls, flops: float) -> Speeds:
        """The reference machine's speeds for a model of ``flops`` training FLOPs per sample: one thread at
        :func:`flops_per_second`, ``UPDATE_SECONDS`` per job, ``STEP_SECONDS`` per step and per evaluation
        batch, a forward pass a third of the training FLOPs."""
        per_sample = flops / flops_per_second(flops)
        step = number("STEP_SECONDS")
        return cls(number("UPDATE_SECONDS"), step, per_sample, step, per_sample / 3)

    def with_training(self, measured: speeds.Speed) -> Speeds:
        """These speeds with a training step and evaluation measured here (:data:`TRAINED` figures), as a run
        sustains them (``SUSTAINED``)."""
        job, step, sample, eval_batch, eval_sample = (number("SUSTAINED") * measured[k] for k in TRAINED)
        return replace(self, job=job, step=step, sample=sample, eval_batch=eval_batch, eval_sample=eval_sample,
                       measured=(*self.measured, "training"))

    def with_engine(self, measured: speeds.Speed) -> Speeds:
        """These speeds with the engine measured here (:data:`ENGINE` figures): the reference's per-thing seconds
        of the engine scaled by the probe's arrival over ``PROBE_ARRIVAL_SECONDS``."""
        factor = measured["arrival"] / number("PROBE_ARRIVAL_SECONDS")
        return replace(self, arrival=number("NULL_ARRIVAL_SECONDS") * factor, factor=factor,
                       measured=(*self.measured, "engine"))



def learned_after(lesson: dict[str, Any]) -> float:
    """The wall seconds from which a finished run teaches ``lesson`` (:func:`lesson`): ``LEARNED_AFTER``, or
    ``ENGINE_LEARNED_AFTER`` for a run without training."""
    return number("ENGINE_LEARNED_AFTER") if speeds.ENGINE in lesson else number("LEARNED_AFTER")


TRAINED = ("job", "step", "sample", "eval", "eval_sample")
"""The figures of a measured training step (:data:`simfl.speeds.TRAINING`): seconds per local training job beside
its steps, per step beside its samples, per training sample, per evaluation beside its samples (counted per batch
of :data:`EVAL_BATCH`), per evaluated sample."""
ENGINE = ("arrival",)
"""The figure of a measured engine (:data:`simfl.speeds.ENGINE`): seconds per arrival without training."""


def speeds_of(model: Any, shape: tuple[int, ...], classes: int, batch: int, flops: Callable[[], float],
              trains: bool, learned: bool = True) -> Speeds:
    """This machine's speeds for training ``model`` (a model config) on samples of ``shape`` in batches of
    ``batch`` (``trains``: the run trains it at all): what was measured here and cached, else the reference's at
    the model's training FLOPs per sample (``flops()``, called only then: counting them loads PyTorch's compiler
    front end, seconds that an estimate from a measured speed need not take); with what finished runs of the
    same part taught (``learned``)."""
    trained = speeds.cached(speeds.TRAINING, speeds.training(model, shape, classes, batch)) if trains else None
    if trained is not None and all(k in trained for k in TRAINED):
        found = Speeds.reference(0.0).with_training(trained)
    else:
        found = Speeds.reference(flops())
    engine = speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS)
    if engine is not None and all(k in engine for k in ENGINE) and engine["arrival"] > 0:
        found = found.with_engine(engine)
    found = replace(found, lesson=lesson(model, shape, classes, batch, trains))
    ratios = speeds.observed(found.lesson) if learned and found.lesson is not None else []
    if len(ratios) >= whole("LEARNED_FROM"):
        middle = statistics.median(ratios)
        bound = number("LEARNED_BOUND")
        found = replace(found, learned=min(max(middle, 1 / bound), bound), runs=len(ratios))
    return found


def lesson(model: Any, shape: tuple[int, ...], classes: int, batch: int, trains: bool) -> dict[str, Any]:
    """What a finished run teaches (:func:`simfl.speeds.observe`): a run that trains, the estimate of its model at
    its batch and shape (another model's measurement errs its own way); a pure-latency run, the engine's."""
    if trains:
        return {speeds.TRAINING: speeds.training(model, shape, classes, batch)}
    return {speeds.ENGINE: speeds.ENGINE_FACTS}


def flops_per_second(flops: float) -> float:
    """Reference training FLOPs per second of one thread for a model of ``flops`` per sample."""
    return number("CPU_FLOPS") * (max(flops, 1.0) / number("REFERENCE_FLOPS")) ** number("FLOPS_EXPONENT")


def dataset_bytes(facts: DataFacts, clients: int) -> int:
    """Training and test data (clients gather their rows from it, :class:`simfl.data.base.Shards`), 16 bytes of
    labels and indices per sample, and ``CLIENT_BYTES`` per client."""
    samples = facts.train + facts.test
    return samples * math.prod(facts.shape) * facts.item_bytes + 16 * samples + whole("CLIENT_BYTES") * clients


def update_seconds(samples: int, epochs: int, batch_size: int, speed: Speeds) -> float:
    """Wall seconds of one client's local training: ``epochs`` over its ``samples`` in steps of ``batch_size`` at
    one thread's ``speed`` (more threads per job are not counted: the small models gain little), plus the job's own
    cost."""
    steps = epochs * math.ceil(max(samples, 1) / batch_size)
    return speed.job + steps * speed.step + samples * epochs * speed.sample


def eval_seconds(test: int, speed: Speeds) -> float:
    """Wall seconds of one evaluation of the global model on ``test`` samples in batches of :data:`EVAL_BATCH`."""
    return test * speed.eval_sample + math.ceil(test / EVAL_BATCH) * speed.eval_batch


def store_seconds(rows: int, model_bytes: int, on_disk: bool, speed: Speeds) -> float:
    """Wall seconds the stores add to one update without training (``executor: {kind: none}``) beside the rule's
    passes (:func:`pass_seconds`): with ``rows`` per-client vectors of ``model_bytes`` each, their store's own work
    (on disk, their bytes written and read); none without."""
    if not rows:
        return 0.0
    disk = rows * model_bytes * number("DISK_SECONDS_PER_BYTE") if on_disk else 0.0
    return (number("STORE_ARRIVAL_SECONDS") + disk) * speed.factor


def pass_seconds(passes: float, model_bytes: int, clients: int, speed: Speeds) -> float:
    """Wall seconds of ``passes`` passes over the model's bytes beyond the probe's (:data:`PROBE_MODEL_BYTES`) at
    one arrival without training on ``clients`` clients (``PASS_SECONDS_PER_BYTE``, ``PASS_GROWTH``)."""
    growth = 1.0 + number("PASS_GROWTH") * math.log10(max(clients, 10) / 10)
    return passes * max(model_bytes - PROBE_MODEL_BYTES, 0) * number("PASS_SECONDS_PER_BYTE") * growth * speed.factor


def null_run_seconds(steps: float, updates: float, rows: int, model_bytes: int, on_disk: bool, speed: Speeds,
                     served: bool = False, draw: float | None = None, passes: float = 0.0, clients: int = 0) -> float:
    """Wall seconds of one run's ``steps`` rounds (updates, failed and late rounds) without training: each
    ``speed.arrival`` (with the delay model's ``draw`` in place of ``DRAW_SECONDS`` where it states one, and
    ``SERVED_ARRIVAL_SECONDS`` more where a server draws who is served, ``served``), and each of its
    ``updates`` the rule's ``passes`` over the model on ``clients`` clients (:func:`pass_seconds`) and the
    store's work on ``rows`` per-client vectors (:func:`store_seconds`)."""
    stated = 0.0 if draw is None else draw - number("DRAW_SECONDS")
    each = speed.arrival + (stated + (number("SERVED_ARRIVAL_SECONDS") if served else 0.0)) * speed.factor
    stored = store_seconds(rows, model_bytes, on_disk, speed)
    return steps * each + updates * (stored + pass_seconds(passes, model_bytes, clients, speed))


def training_run_seconds(updates: float, evaluations: float, samples: int, epochs: int, batch_size: int, test: int,
                         parallel: float, speed: Speeds) -> float:
    """Wall seconds of one run's ``updates`` trained ``parallel`` at a time (:func:`update_seconds`) and its
    ``evaluations`` (:func:`eval_seconds`)."""
    return (updates * update_seconds(samples, epochs, batch_size, speed) / max(parallel, 1.0)
            + evaluations * eval_seconds(test, speed))


def rounds_seconds(rounds: float, speed: Speeds) -> float:
    """Wall seconds of ``rounds`` synchronous rounds beyond their arrivals (``ROUND_SECONDS`` each)."""
    return rounds * number("ROUND_SECONDS") * speed.factor


def setup_seconds(clients: int, speed: Speeds) -> float:
    """Wall seconds of setting up a population of ``clients`` (``CLIENT_SECONDS`` each)."""
    return clients * number("CLIENT_SECONDS") * speed.factor


def launch_seconds(speed: Speeds, trains: bool) -> float:
    """What a launch adds once beyond its runs (``LAUNCH_SECONDS``), and where its runs train, what a process's
    first training job adds (``TRAINER_START_SECONDS``: the processes that train pay it side by side)."""
    return (number("LAUNCH_SECONDS") + (number("TRAINER_START_SECONDS") if trains else 0.0)) * speed.factor


def _tracker_costs() -> dict[str, tuple[float, float, float]]:
    """Per tracker whose costs ``costs.json`` holds: its start, its cost per run and per evaluation (seconds)."""
    return {"tensorboard": (number("TRACKER_TENSORBOARD_START_SECONDS"), number("TRACKER_TENSORBOARD_RUN_SECONDS"),
                            number("TRACKER_TENSORBOARD_EVAL_SECONDS")),
            "mlflow": (number("TRACKER_MLFLOW_START_SECONDS"), number("TRACKER_MLFLOW_RUN_SECONDS"),
                       number("TRACKER_MLFLOW_EVAL_SECONDS"))}


TRACKERS_TIMED = ("tensorboard", "mlflow")
"""The trackers whose costs ``costs.json`` holds (``python -m benchmarks.trackers``); W&B's are not measured
(its offline mode starts a service process of its own)."""


def tracking_seconds(trackers: tuple[str, ...], evaluations: float) -> float:
    """What the live trackers add to one run: ``TRACKER_<T>_RUN_SECONDS`` and ``_EVAL_SECONDS`` per evaluation."""
    table = _tracker_costs()
    return sum(table[t][1] + evaluations * table[t][2] for t in trackers)


def tracking_start_seconds(trackers: tuple[str, ...]) -> float:
    """What they add once to a launch: each one's start (``TRACKER_<T>_START_SECONDS``) and the folder's
    comparison run (one more run's ``_RUN_SECONDS``)."""
    table = _tracker_costs()
    return sum(table[t][0] + table[t][1] for t in trackers)


def rows_bytes(events: float, evaluations: float, csv_bytes: float) -> int:
    """Events and metrics of one run in RAM: ``EVENT_BYTES`` per event and ``METRIC_BYTES`` per evaluation,
    plus :data:`CSV_COPIES` of their CSV text (``csv_bytes``) when the files are made."""
    return (count(events) * whole("EVENT_BYTES") + count(evaluations) * whole("METRIC_BYTES")
            + CSV_COPIES * count(csv_bytes))


def csv_bytes(events: float, evaluations: float) -> int:
    """One run's events.csv and metrics.csv (``EVENT_CSV_BYTES`` a line and ``METRIC_CSV_BYTES``)."""
    return count(events) * whole("EVENT_CSV_BYTES") + count(evaluations) * whole("METRIC_CSV_BYTES")


def checkpoint_bytes(tensors: int, model_bytes: int, events: float, evaluations: float, clients: int) -> int:
    """One run's checkpoint file with ``tensors`` model-sized tensors: each plus ``CHECKPOINT_TENSOR_BYTES``,
    ``CHECKPOINT_EVENT_BYTES`` per event, ``CHECKPOINT_METRIC_BYTES`` per evaluation,
    ``CHECKPOINT_CLIENT_BYTES`` per client and ``CHECKPOINT_BASE_BYTES``."""
    return (tensors * (model_bytes + whole("CHECKPOINT_TENSOR_BYTES")) + count(events) * whole("CHECKPOINT_EVENT_BYTES")
            + count(evaluations) * whole("CHECKPOINT_METRIC_BYTES") + clients * whole("CHECKPOINT_CLIENT_BYTES")
            + whole("CHECKPOINT_BASE_BYTES"))


def store_rows(scenario: Any) -> int:
    """Model-sized vectors per client that a run of the scenario's most demanding entry keeps in its stores:
    the algorithm's own (its config's ``vectors_kept()``) and, under ``server:``, each client's kept model."""
    serving = getattr(scenario, "server", None) is not None
    return max((int(algo.vectors_kept()) + (serving and bool(algo.keeps_client_models)) for algo in scenario.algorithms),
               default=0)


def store_spec(scenario: Any, stored_bytes: int) -> StoreSpec:
    """Where a run keeps ``stored_bytes`` of per-client vectors: the scenario's ``client_state.store``, or under
    ``auto`` on disk when they would take more than a quarter of this machine's RAM."""
    config = getattr(scenario, "client_state", None)
    kind: StoreKind = "disk" if stored_bytes > machine_memory() / 4 else "ram"
    if config is not None and config.store != "auto":
        kind = config.store
    return StoreSpec(kind, None if config is None else config.dir)


def machine_memory() -> int:
    """The machine's RAM (5 GiB where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 5 << 30


def runtime_bytes(trains: bool) -> int:
    """Memory of the process before the scenario's stores: ``RUNTIME_BYTES`` where it trains or evaluates a
    model, ``PURE_RUNTIME_BYTES`` where it does not."""
    return whole("RUNTIME_BYTES") if trains else whole("PURE_RUNTIME_BYTES")


def count(x: float) -> int:
    """A count of items as an integer that stays finite (at most 10^18)."""
    return int(min(max(x, 0.0), 1e18)) if x == x else 0


def executor_bytes(processes: int, model_bytes: int) -> int:
    """Memory of the executor's worker processes: ``WORKER_BYTES`` each and four copies of the model (its
    weights, the job's start and trained weights, the gradients)."""
    return processes * (whole("WORKER_BYTES") + 4 * model_bytes)


def activation_bytes(per_sample: tuple[int, int], trained: int, evaluated: int) -> int:
    """Memory the model's activations hold at their peak: ``per_sample`` (training, evaluation) bytes a sample,
    times the ``trained`` samples of the batches that train at once, plus an evaluation batch of ``evaluated``
    samples. Added, not the larger of the two: after a training step the allocator keeps most of
    what it freed, so that the evaluation's batch adds to it (MobileNetV2 on CIFAR-100, ``python -m
    benchmarks.estimate``: peak resident memory 1.8 GiB above the estimate without activations, 1.6 GiB of them
    counted this way)."""
    training, evaluation = per_sample
    return trained * training + evaluated * evaluation
