"""What each part of a run costs: bytes of memory and disk per thing a run keeps, and seconds per thing it does.

Each constant is one model of one store or one step, with where its figure was measured; the functions turn
what the components state (the model's bytes and FLOPs, the dataset's sizes, the executor's threads) and what
bounds a run (:mod:`simfl.schema.bounds`: updates, evaluations, events) into bytes and seconds. Seconds are
counted at :class:`Speeds`: this machine's, as ``simfl run`` measured and cached them (:mod:`simfl.speeds`), else
the reference machine's (the constants marked so, fitted on one machine on one day). The estimate
(:mod:`simfl.schema.estimate`) adds them up. Where the per-client vectors live, RAM or disk, is decided here
too (:func:`store_spec`), for the estimate and the run alike.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from simfl import speeds
from simfl.algorithms.configs import StoreKind, StoreSpec
from simfl.data.configs import DataFacts

RUNTIME_BYTES = 1 << 30
"""Memory of the process before the scenario's own stores: Python with PyTorch, pandas, matplotlib and simfl
loaded (a run of the tiny quickstart, ``budget.time: 30``, peaked at 0.96-1.0 GiB on Linux x86-64 with
PyTorch's CPU build)."""
PURE_RUNTIME_BYTES = 768 << 20
"""The same for a process that runs no PyTorch kernel (``executor: {kind: none}``, pure latency): a run of 50
clients in constant rounds, 9,565 events, peaked at 771 MiB, and at 780 MiB with 383,000 events (``wait4``'s peak
of the ``constant`` case of ``python -m benchmarks.estimate --quick --only constant`` and of ``--only constant``,
2026-11-27)."""
EVENT_BYTES = 256
"""Memory of one events row in ``SimState.events`` (a slotted object of eight fields and its floats: 256 bytes
measured with tracemalloc)."""
METRIC_BYTES = 512
"""Memory of one metrics row in ``SimState.metrics`` (a frozen object, its floats and its dict of extra scores)."""
EVENT_CSV_BYTES = 96
"""Bytes of one events.csv line (90 measured on the quickstart: full-precision floats)."""
METRIC_CSV_BYTES = 96
"""Bytes of one metrics.csv line (90 measured on the quickstart, with its extra scores)."""
CSV_COPIES = 2
"""Copies of a run's CSV text in memory when its files are made at the end (the text, then its bytes)."""
RECORD_COPIES = 4
"""Copies of a run's recording in memory at its peak: the rows kept per aggregation, the stacked array, the
``.npy`` buffer and its bytes handed to the writer (a 300 MiB recording raised the peak by 987 MiB, 3.3x; a
1000 MiB one by 3.5 GiB, 3.5x). One more when runs follow each other in one process: the previous run's rows
stay until the cyclic garbage collector frees its state (two 500 MiB recordings in turn: 5.1x)."""
NPY_HEADER_BYTES = 128
"""Header of a ``.npy`` file."""
RUN_FILES_BYTES = 16 << 10
"""Disk of a run's small files (numerics.json, the folder, and the block each file starts)."""
FOLDER_BYTES = 256 << 10
"""Disk of a result folder's own files: scenario.yaml, summary.csv, accuracy.png, the marker."""
CHECKPOINT_BASE_BYTES = 16 << 10
"""A run's checkpoint without its tensors and rows (the zip container, the latency and random-stream states)."""
CHECKPOINT_TENSOR_BYTES = 256
"""What a checkpoint adds to each model-sized tensor it holds (its record in the zip file and pickle)."""
CHECKPOINT_EVENT_BYTES = 64
"""One event in a checkpoint (a pickled tuple; 51 measured on the quickstart)."""
CHECKPOINT_METRIC_BYTES = 160
"""One metric in a checkpoint (a pickled dict)."""
CHECKPOINT_CLIENT_BYTES = 512
"""One client's record in a checkpoint without its weights (phase, times, counters)."""
CHECKPOINT_TUPLE_BYTES = 120
"""Memory of one event turned into a tuple while a checkpoint is made."""
WORKER_BYTES = 720 << 20
"""Memory of one executor worker process (``process`` workers, Ray actors) beside its model's copies: Python with
PyTorch and the trainer loaded; the clients' data is shared, not copied (the quickstart with two process workers:
peaks of 686 and 759 MiB, ``VmHWM``)."""
CPU_FLOPS = 7e9
"""Reference value (a machine whose training was not measured, :class:`Speeds`): training FLOPs per second of
one thread under the portable kernels (``SIMFL_NUMERICS``'s default) for a model of :data:`REFERENCE_FLOPS` per
sample: LeNet5 on MNIST, batches of 128, ran at 5.5e9 and 7.4e9 in two runs of ``python -m benchmarks.train_step``
with nothing else running."""
REFERENCE_FLOPS = 1.5e6
"""Training FLOPs per sample of the model :data:`CPU_FLOPS` was measured on (LeNet5 on MNIST)."""
FLOPS_EXPONENT = 0.25
"""Reference value: how the speed grows with a model's FLOPs per sample (larger layers keep the vector units
busier): ``CPU_FLOPS * (flops / REFERENCE_FLOPS) ** FLOPS_EXPONENT``, fitted to LeNet5 (7.4e9), VGG11 on CIFAR-10
(913 MFLOP per sample, batch 32: 3.75e10) and MobileNetV2 on CIFAR-100 (3.9 GFLOP as FlopCounterMode counts
it: 9.0e10), by ``python -m benchmarks.train_step`` with nothing else running. One formula for every model: it
missed some by 2x (the small CNN), which is why ``simfl run`` measures the model's own step."""


STEP_SECONDS = 0.6e-3
"""Reference value: the fixed cost of one optimizer step beside its FLOPs (forward, backward and update calls):
the quickstart's small CNN on one sample per batch took 0.7 ms a step under load and 0.9 ms with nothing else
running (``python -m benchmarks.train_step``: ``smallcnn_b1_ms``)."""
UPDATE_SECONDS = 1e-4
"""Reference value: what one update with training adds beside its steps: the job handed over and its reply
read."""
EVAL_BATCH = 1024
"""Test samples per evaluation batch (:class:`simfl.train.evaluate.Evaluator`)."""
NULL_ARRIVAL_SECONDS = 45e-6
"""Reference value: wall time of one arrival without training (``executor: {kind: none}``): the rules, the
latency draw, the event row. Fitted with the three values below to the grid of ``python -m benchmarks.estimate``
(nothing else running, the probe at :data:`PROBE_ARRIVAL_SECONDS`): FedAsync serving 10^3 to 10^6 clients,
100,000 arrivals, took 4.8 s beyond the launch at 10^4 clients (48 us an arrival with the population's setup).
Where the engine was measured on this machine, it is scaled by :attr:`Speeds.factor`, as are the other
per-thing seconds of the engine below."""
PROBE_ARRIVAL_SECONDS = 38e-6
"""Reference value: CPU seconds per arrival of the engine's probe (:data:`simfl.launch.measure_speeds.PROBE`:
FedAsync serving 1,000 clients with lognormal latencies, the mean of three runs) at which the engine's constants
here describe this project's 2-core VM. A machine's measured probe over this is its :attr:`Speeds.factor`, a
ratio of speeds, not an arrival's cost. Refitted on the grid of ``benchmarks/estimate_grid_2026-11-28.txt``:
its 35 cases without training, recomputed at a probe of 48 us (``python -m benchmarks.estimate --against``, a
cache holding that probe), ran a median 0.80 of their estimate (0.56-1.31), so the constants fit a probe of
48 x 0.80 us. That grid's probe took the shortest of five runs of 3,000 updates, about what a longer run
reads at the same moment: in five processes, twelve such runs one after another read 36-78 us, two runs of
30,000 after them 34-47 us; and the two probes spread alike in fresh processes, 35-63 us the old and 25-53 us
the new (by hand, nothing else running). A single measurement's factor is as uncertain as that; the estimate reads the median of
the moments sampled (:data:`simfl.launch.measure_speeds.ENGINE_RESAMPLE_SECONDS`)."""
DRAW_SECONDS = 14e-6
"""Reference value: the part of :data:`NULL_ARRIVAL_SECONDS` that is the round time's draw, as the engine's probe
draws it (lognormal); a delay model that states its own draw (:attr:`simfl.latency.base.RoundTimes.draw`) has
its arrivals counted with that instead. The grids ``benchmarks/estimate_grid_2026-11-27d.txt``, ``-11-28.txt``
and ``-11-28b_stopped.txt`` (by hand: each case's measured wall less 2.5 s of launch, over its estimated
arrivals): the constant model's 383,000 arrivals took 21-25 us each, the other 50-client delay models' 22-42 us,
about 32 in the middle; the
constant model reads its round times and draws none: 10 of those 32 us, 14 of the 45 at the reference."""
ARRIVAL_BYTES_COUNTED = 4096
"""Model bytes up to which the arrivals without training of a rule that states no passes over the model
(:attr:`simfl.algorithms.configs.AlgorithmConfig.arrival_passes`) are counted as the engine's probe's without a
word: beyond it they cost more than the estimate counts, and the estimate says so (:attr:`Estimate.unstated
<simfl.schema.estimate.Estimate.unstated>`) and learns nothing from such a run. ``python -m
benchmarks.arrival_bytes`` (2026-11-28, nothing else running, CPU time on one thread, MLPs of 2,440 and 76,840
bytes, 100 and 1,000 clients): 0.35-1.76 ns more an arrival per byte of the model for FedAsync, FedBuff, OrthoFL,
FedAvg and FedAdam, more at 1,000 clients than at 100, and CA2FL 1.67 and 22.9 ns (its mean over every client's
cache taken at each buffer's end: work that grows with the clients); against 10.7-47.5 us an arrival at the small
model (CA2FL 158 us at 1,000 clients). At 4,096 bytes the uncounted part would be at most about half of
:data:`NULL_ARRIVAL_SECONDS` scaled to that machine, for every built-in rule but CA2FL."""
SERVED_ARRIVAL_SECONDS = 20e-6
"""Reference value: what an arrival adds where a server serves a population (``server: {concurrency}``: an idle,
present client drawn for each freed slot). The grid of ``python -m benchmarks.estimate`` of 2026-11-27 with its
pure-latency cases lengthened (120,000-420,000 arrivals, nothing else running; output in
``benchmarks/estimate_grid_2026-11-27c.txt``): those of 50 clients all in flight measured 0.78-1.46 of their
estimate without it, the served populations 1.42-1.68 (FedAsync over 10^3 to 10^6 clients, 100,000 arrivals: 27 to
65 us an arrival beyond the estimate; FedAvg served, 120,000: 19 us)."""
ROUND_SECONDS = 200e-6
"""Reference value: what a synchronous round costs beyond its arrivals (its clients drawn, its deadline's event, its
close and the server's model made). Fitted on ``sync_deadline`` of ``python -m benchmarks.estimate`` (FedAvg, 10
clients a round over-selected by 0.3 under a 40 s deadline, about 28,500 rounds over three seeds), which ran 1.35
and 1.37 times its untaught estimate without it in the grids of 2026-11-27c and d (4.9 s and 5.7 s more: 172 and
200 us a round, the second at a probe 0.81 of the reference's) and 1.05 with it (d); ``sync_served``, 6,000
rounds: 1.32 and 1.15 without it (c, d), 1.04 with it (d)."""
STORE_ARRIVAL_SECONDS = 110e-6
"""Reference value: added per arrival without training by an algorithm with per-client vectors (OrthoFL's
calibration), beside the passes over the model it states (:attr:`simfl.algorithms.configs.AlgorithmConfig.
arrival_passes`, which count its RAM store's rows). The value fitted before the rules stated their passes, on the
OrthoFL cases of ``python -m benchmarks.estimate`` (20,000 arrivals, 10^3 and 10^4 clients), is kept: at 65 us,
what ``python -m benchmarks.arrival_bytes`` reads in one warm process at the small model (OrthoFL 16-25 us an
arrival more than FedAsync, at a probe of 0.30 of the reference's), the cases of 12,040 bytes ran 1.26-1.49 times
their estimate (``benchmarks/estimate_passes_2026-11-28e.txt``): a launched run's store costs more."""
DISK_SECONDS_PER_BYTE = 0.58e-9
"""Reference value: per arrival and byte of a client's vectors, what the disk store adds to the RAM store's work.
Set from ``orthofl_n1000_h256`` of ``python -m benchmarks.estimate`` (20,000 arrivals, 76,840-byte rows; its
OrthoFL, ``shift_source: chain`` served, keeps one row per client, its kept model) taken as two rows a client:
0.18 ns a byte at a probe of 0.30 of the reference's. On disk and in RAM the case ran 3.6 and 3.2 s
(``benchmarks/estimate_passes_2026-11-28e.txt``) and 3.5 and 2.9 s (``-28f``): 20-30 us an arrival, 0.26-0.39 ns a
byte of its one row, so this counts about half the disk's cost; its disk cases ran 0.96-1.36 times their estimate
in the 28f grid."""
PROBE_MODEL_BYTES = 432
"""Bytes of the engine's probe's model (:data:`simfl.launch.measure_speeds.PROBE`: an MLP of 108 parameters), whose
work at an arrival :data:`NULL_ARRIVAL_SECONDS` includes: a rule's passes count the bytes beyond it."""
PASS_SECONDS_PER_BYTE = 0.33e-9
"""Reference value: one pass over a byte of the model (an elementwise operation over its vector) at an arrival
without training. ``python -m benchmarks.arrival_bytes`` of 2026-11-28 read one ``a + b`` over 307,240 bytes at
0.096-0.144 ns a byte (0.10 in most of its runs), at a probe of 0.30 of the reference's: 0.10 / 0.30."""
PASS_GROWTH = 0.15
"""A pass costs this much more per tenfold of the clients beyond 10 (the weights they hold leave the caches):
``python -m benchmarks.arrival_bytes --small 8 --large 1024`` of 2026-11-28 at 10, 100, 1,000 and 10,000 clients,
ns a byte: FedAsync 0.93, 1.10, 1.16, 1.24, FedBuff 0.71, 0.80, 0.95, 1.12, OrthoFL 0.47-0.69, 0.83, 0.94-1.01,
1.22, FedAvg 0.32, 0.36, 0.56, 0.58 (x1.0, 1.15, 1.30, 1.45 from 10 clients: within 1.5x of each)."""
LAUNCH_SECONDS = 2.5
"""Reference value: what a launch adds once beyond its runs: the result folder's tables and plots (pandas and
matplotlib loaded) and its summary. The rest of the smallest case of ``python -m benchmarks.estimate`` (FedAsync,
10^3 clients: 5.6 s measured beyond ``simfl validate``, 3.5 s of them arrivals)."""
TRAINER_START_SECONDS = 2.7
"""Reference value: what the first local training job of a process adds: its optimizer loads PyTorch's compiler
front end (``torch.optim`` imports ``torch._dynamo`` when its first optimizer is made), once per process. On this
VM the import alone took 2.5-2.9 s in three fresh processes and a first job 2.0-3.0 s more than the jobs after it
(four models, by hand, when this was set); ``python -m benchmarks.trainer_phases`` (three fresh processes per
case, twice, nothing else running) gave the import 1.70-2.52 s and the small CNN's and the MLP's first job
1.54-2.45 s more: this sits at the top of what it measures."""
CLIENT_SECONDS = 15e-6
"""Reference value: setup time per client of the population: its partition, state, latency stream and selection
entry. The grid of ``python -m benchmarks.estimate``: FedAsync at 10^5 clients 1.0 s of setup beyond its
arrivals and launch, at 10^6 clients 21 s (the larger population's memory is slower to fill); this sits
between (measured over estimated wall 0.94 and 1.27)."""
CLIENT_BYTES = 768
"""Memory per client of the population beside its data: the same records. ``python -m benchmarks.estimate``,
FedAsync from 10^3 to 10^6 clients: peak resident memory 1.02 to 2.26 GiB, measured over estimated
0.97-1.02."""


SUSTAINED = 1.25
"""Reference value: a run's training jobs and evaluations take on average this many times the measurement's
(:mod:`simfl.launch.measure_speeds`: the shortest of a few warm calls, timed in about a second). Set from the small
CNN's job on one client, whose mean over 400 jobs in a row was 1.15-1.35x the shortest of its first three in three
fresh processes (by hand), and from the training runs of ``benchmarks/estimate_grid_2026-11-28.txt``, which kept
1.20-1.83 as their measured over estimated wall without it. ``python -m benchmarks.trainer_phases`` (the same
comparison, a committed command, three fresh processes twice, nothing else running) gave the small CNN 0.62-1.13
and 1.05-1.14 and the MLP 0.98-1.08: this VM's moment moves it as much as the drift itself."""


@dataclass(frozen=True)
class Speeds:
    """How fast this machine runs each part of a run: measured here and cached (:mod:`simfl.speeds`, measured by
    ``simfl run``), else the reference machine's constants above.

    A local training job takes ``job`` beside its steps, a step of ``b`` samples ``step + b * sample`` seconds and
    an evaluation ``eval_batch`` per batch of :data:`EVAL_BATCH` plus ``eval_sample`` per sample; an arrival
    without training ``arrival``;
    ``factor`` is this machine's engine time against the reference's (the probe's arrival over
    :data:`PROBE_ARRIVAL_SECONDS`), by which the engine's per-thing seconds (arrivals, clients set up, per-client
    vectors, the launch) are scaled.
    """

    job: float
    step: float
    sample: float
    eval_batch: float
    eval_sample: float
    arrival: float = NULL_ARRIVAL_SECONDS
    factor: float = 1.0
    measured: tuple[str, ...] = ()
    """What was measured on this machine (``training``, ``engine``); the rest is the reference machine's."""
    learned: float = 1.0
    """How this machine's finished runs of the same model, batch and shape (or pure-latency runs) compared with
    their estimates: the median of their measured over estimated wall seconds (:func:`simfl.speeds.observed`,
    bounded by :data:`LEARNED_BOUND`), by which a run's wall is scaled; 1 before :data:`LEARNED_FROM` such runs
    finished here."""
    runs: int = 0
    """The finished runs :attr:`learned` comes from."""
    lesson: dict[str, Any] | None = None
    """What finished runs of this kind teach and these speeds read (:func:`lesson`; None: none read, and a finished
    run teaches nothing: also where the estimate knows it omits a cost, :data:`ARRIVAL_BYTES_COUNTED`)."""

    @classmethod
    def reference(cls, flops: float) -> Speeds:
        """The reference machine's speeds for a model of ``flops`` training FLOPs per sample: one thread at
        :func:`flops_per_second`, :data:`UPDATE_SECONDS` per job, :data:`STEP_SECONDS` per step and per evaluation
        batch, a forward pass a third of the training FLOPs."""
        per_sample = flops / flops_per_second(flops)
        return cls(UPDATE_SECONDS, STEP_SECONDS, per_sample, STEP_SECONDS, per_sample / 3)

    def with_training(self, measured: speeds.Speed) -> Speeds:
        """These speeds with a training step and evaluation measured here (:data:`TRAINED` figures), as a run
        sustains them (:data:`SUSTAINED`)."""
        job, step, sample, eval_batch, eval_sample = (SUSTAINED * measured[k] for k in TRAINED)
        return replace(self, job=job, step=step, sample=sample, eval_batch=eval_batch, eval_sample=eval_sample,
                       measured=(*self.measured, "training"))

    def with_engine(self, measured: speeds.Speed) -> Speeds:
        """These speeds with the engine measured here (:data:`ENGINE` figures): the reference's per-thing seconds
        of the engine scaled by the probe's arrival over :data:`PROBE_ARRIVAL_SECONDS`."""
        factor = measured["arrival"] / PROBE_ARRIVAL_SECONDS
        return replace(self, arrival=NULL_ARRIVAL_SECONDS * factor, factor=factor,
                       measured=(*self.measured, "engine"))


LEARNED_BOUND = 3.0
"""Finished runs scale an estimate by at most this much either way: a run slowed by an unusual load teaches
little."""
LEARNED_FROM = 3
"""Finished runs teach an estimate once at least this many of its kind have finished here: one run's ratio carries
this VM's speed at that moment (the grid of ``benchmarks/estimate_grid_2026-11-27d.txt``: its first case's one
10.5 s run taught the engine x0.79, and the 34 pure-latency, population and store cases after it then ran 0.72-1.40
times their untaught estimate and 0.88-1.67 times their taught one; the same ``constant`` case ran 13.9 s in the
grid before)."""
LEARNED_AFTER = 10.0
"""A finished run teaches the estimate (:func:`simfl.speeds.observe`) when it took at least this many wall seconds:
a shorter one is mostly its start's noise. Why: a speed is measured in a second or less on a cache miss, and this
project's VM ran the same work up to 2x slower over minutes than in a short measurement (VGG11 on CIFAR-10 in the
grid of ``benchmarks/estimate_grid_2026-11-27b.txt``: 732.5 s measured against 474.8 s estimated from speeds
measured just before; the same case's estimate was 581.7 s in the grid before, for 764.6 s measured)."""


ENGINE_LEARNED_AFTER = 2.0
"""...but a run without training teaches from this many wall seconds: its engine's speed is what the probe reads
least well, and its own wall the best. In the grid stopped on 2026-11-28 after seven cases
(``benchmarks/estimate_grid_2026-11-28c_stopped.txt``: a fresh cache, nothing else running) the probe read 50 us
an arrival and every case ran 0.43-0.66 of its estimate; their runs, 4-6 s each but the first, taught nothing at
10 s, while the same cases' walls moved less from grid to grid (``constant`` 10.5-12.4 s over the grids of
2026-11-27d, 2026-11-28 and this one, ``exponential`` 11.6-15.6 s) than the probe at their starts (35-50 us).
A pure-latency run has no first training job inside its clock, and its setup is not timed with it."""


def learned_after(lesson: dict[str, Any]) -> float:
    """The wall seconds from which a finished run teaches ``lesson`` (:func:`lesson`): :data:`LEARNED_AFTER`, or
    :data:`ENGINE_LEARNED_AFTER` for a run without training."""
    return ENGINE_LEARNED_AFTER if speeds.ENGINE in lesson else LEARNED_AFTER


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
    if len(ratios) >= LEARNED_FROM:
        middle = statistics.median(ratios)
        found = replace(found, learned=min(max(middle, 1 / LEARNED_BOUND), LEARNED_BOUND), runs=len(ratios))
    return found


def lesson(model: Any, shape: tuple[int, ...], classes: int, batch: int, trains: bool) -> dict[str, Any]:
    """What a finished run teaches (:func:`simfl.speeds.observe`): a run that trains, the estimate of its model at
    its batch and shape (another model's measurement errs its own way); a pure-latency run, the engine's."""
    if trains:
        return {speeds.TRAINING: speeds.training(model, shape, classes, batch)}
    return {speeds.ENGINE: speeds.ENGINE_FACTS}


def flops_per_second(flops: float) -> float:
    """Reference training FLOPs per second of one thread for a model of ``flops`` per sample."""
    return CPU_FLOPS * (max(flops, 1.0) / REFERENCE_FLOPS) ** FLOPS_EXPONENT


def dataset_bytes(facts: DataFacts, clients: int) -> int:
    """Training and test data (clients gather their rows from it, :class:`simfl.data.base.Shards`), 16 bytes of
    labels and indices per sample, and :data:`CLIENT_BYTES` per client."""
    samples = facts.train + facts.test
    return samples * math.prod(facts.shape) * facts.item_bytes + 16 * samples + CLIENT_BYTES * clients


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
    return (STORE_ARRIVAL_SECONDS + (rows * model_bytes * DISK_SECONDS_PER_BYTE if on_disk else 0.0)) * speed.factor


def pass_seconds(passes: float, model_bytes: int, clients: int, speed: Speeds) -> float:
    """Wall seconds of ``passes`` passes over the model's bytes beyond the probe's (:data:`PROBE_MODEL_BYTES`) at
    one arrival without training on ``clients`` clients (:data:`PASS_SECONDS_PER_BYTE`, :data:`PASS_GROWTH`)."""
    growth = 1.0 + PASS_GROWTH * math.log10(max(clients, 10) / 10)
    return passes * max(model_bytes - PROBE_MODEL_BYTES, 0) * PASS_SECONDS_PER_BYTE * growth * speed.factor


def null_run_seconds(steps: float, updates: float, rows: int, model_bytes: int, on_disk: bool, speed: Speeds,
                     served: bool = False, draw: float | None = None, passes: float = 0.0, clients: int = 0) -> float:
    """Wall seconds of one run's ``steps`` rounds (updates, failed and late rounds) without training: each
    ``speed.arrival`` (with the delay model's ``draw`` in place of :data:`DRAW_SECONDS` where it states one, and
    :data:`SERVED_ARRIVAL_SECONDS` more where a server draws who is served, ``served``), and each of its
    ``updates`` the rule's ``passes`` over the model on ``clients`` clients (:func:`pass_seconds`) and the
    store's work on ``rows`` per-client vectors (:func:`store_seconds`)."""
    stated = 0.0 if draw is None else draw - DRAW_SECONDS
    each = speed.arrival + (stated + (SERVED_ARRIVAL_SECONDS if served else 0.0)) * speed.factor
    stored = store_seconds(rows, model_bytes, on_disk, speed)
    return steps * each + updates * (stored + pass_seconds(passes, model_bytes, clients, speed))


def training_run_seconds(updates: float, evaluations: float, samples: int, epochs: int, batch_size: int, test: int,
                         parallel: float, speed: Speeds) -> float:
    """Wall seconds of one run's ``updates`` trained ``parallel`` at a time (:func:`update_seconds`) and its
    ``evaluations`` (:func:`eval_seconds`)."""
    return (updates * update_seconds(samples, epochs, batch_size, speed) / max(parallel, 1.0)
            + evaluations * eval_seconds(test, speed))


def rounds_seconds(rounds: float, speed: Speeds) -> float:
    """Wall seconds of ``rounds`` synchronous rounds beyond their arrivals (:data:`ROUND_SECONDS` each)."""
    return rounds * ROUND_SECONDS * speed.factor


def setup_seconds(clients: int, speed: Speeds) -> float:
    """Wall seconds of setting up a population of ``clients`` (:data:`CLIENT_SECONDS` each)."""
    return clients * CLIENT_SECONDS * speed.factor


def launch_seconds(speed: Speeds, trains: bool) -> float:
    """What a launch adds once beyond its runs (:data:`LAUNCH_SECONDS`), and where its runs train, what a process's
    first training job adds (:data:`TRAINER_START_SECONDS`: the processes that train pay it side by side)."""
    return (LAUNCH_SECONDS + (TRAINER_START_SECONDS if trains else 0.0)) * speed.factor


def rows_bytes(events: float, evaluations: float, csv_bytes: float) -> int:
    """Events and metrics of one run in RAM: :data:`EVENT_BYTES` per event and :data:`METRIC_BYTES` per evaluation,
    plus :data:`CSV_COPIES` of their CSV text (``csv_bytes``) when the files are made."""
    return count(events) * EVENT_BYTES + count(evaluations) * METRIC_BYTES + CSV_COPIES * count(csv_bytes)


def csv_bytes(events: float, evaluations: float) -> int:
    """One run's events.csv and metrics.csv."""
    return count(events) * EVENT_CSV_BYTES + count(evaluations) * METRIC_CSV_BYTES


def checkpoint_bytes(tensors: int, model_bytes: int, events: float, evaluations: float, clients: int) -> int:
    """One run's checkpoint file with ``tensors`` model-sized tensors: each plus :data:`CHECKPOINT_TENSOR_BYTES`,
    :data:`CHECKPOINT_EVENT_BYTES` per event, :data:`CHECKPOINT_METRIC_BYTES` per evaluation,
    :data:`CHECKPOINT_CLIENT_BYTES` per client and :data:`CHECKPOINT_BASE_BYTES`."""
    return (tensors * (model_bytes + CHECKPOINT_TENSOR_BYTES) + count(events) * CHECKPOINT_EVENT_BYTES
            + count(evaluations) * CHECKPOINT_METRIC_BYTES + clients * CHECKPOINT_CLIENT_BYTES + CHECKPOINT_BASE_BYTES)


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
    """Memory of the process before the scenario's stores: :data:`RUNTIME_BYTES` where it trains or evaluates a
    model, :data:`PURE_RUNTIME_BYTES` where it does not."""
    return RUNTIME_BYTES if trains else PURE_RUNTIME_BYTES


def count(x: float) -> int:
    """A count of items as an integer that stays finite (at most 10^18)."""
    return int(min(max(x, 0.0), 1e18)) if x == x else 0


def executor_bytes(processes: int, model_bytes: int) -> int:
    """Memory of the executor's worker processes: :data:`WORKER_BYTES` each and four copies of the model (its
    weights, the job's start and trained weights, the gradients)."""
    return processes * (WORKER_BYTES + 4 * model_bytes)


def activation_bytes(per_sample: tuple[int, int], trained: int, evaluated: int) -> int:
    """Memory the model's activations hold at their peak: ``per_sample`` (training, evaluation) bytes a sample,
    times the ``trained`` samples of the batches that train at once, plus an evaluation batch of ``evaluated``
    samples. Added, not the larger of the two: after a training step the allocator keeps most of
    what it freed, so that the evaluation's batch adds to it (MobileNetV2 on CIFAR-100, ``python -m
    benchmarks.estimate``: peak resident memory 1.8 GiB above the estimate without activations, 1.6 GiB of them
    counted this way)."""
    training, evaluation = per_sample
    return trained * training + evaluated * evaluation
