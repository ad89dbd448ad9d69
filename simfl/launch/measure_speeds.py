"""Measure this machine's speeds for a scenario's estimate, where :mod:`simfl.speeds` has none cached yet.

``simfl run`` calls :func:`ensure` before its estimate (torch is loaded for the run anyway); what it measures is
cached, so ``simfl validate`` and later runs read it without torch. A run that finishes alone on this machine
then says how its wall compared with the estimate's (:func:`learn`): a speed measured in a second does not say
how the machine holds up over minutes. Two measurements, both in CPU time on one
thread under simfl's numerics pin (:mod:`simfl.numerics`), and neither touching the global random generators:

- **training** (per model config, sample shape and batch): the scenario's own model trained by simfl's own
  trainer (:class:`~simfl.train.local.LocalTrainer`) on random samples, jobs of one step and of several (two for
  a large model, up to twenty for a small one) at the scenario's batch and at a batch of two, each warmed up once
  and then timed in a short loop. Their difference over the added steps is a step as a job's later steps take it
  (its first makes the optimizer's state: it counts with the job); the line through the two batches' steps gives
  the step's fixed cost and its cost per sample, the one-step job less its step what a job costs beside its
  steps. The evaluator (:class:`~simfl.train.evaluate.Evaluator`) on a
  batch and on two samples gives likewise the cost of an evaluation and per evaluated sample. About fifteen
  steps' time in all for VGG11 (some seconds), well under a second for a small model.
- **engine** (per machine): a fixed pure-latency run of the real engine (:data:`PROBE`), after a short one that
  warms the engine up; its CPU time over its updates is the cost of an arrival. About a second and a half. Taken again
  at later launches (:data:`ENGINE_RESAMPLE_SECONDS`): the estimate reads the median of the moments it was taken.
"""

from __future__ import annotations

import copy
import functools
import math
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from simfl import numerics, speeds
from simfl.speeds import Speed

if TYPE_CHECKING:
    from simfl.schema.scenario import Scenario

PROBE: dict[str, Any] = {
    "name": "speed-probe", "seeds": [0],
    "data": {"dataset": "synthetic", "train_size": 4000, "test_size": 10, "features": 8, "classes": 4,
             "partition": {"kind": "iid", "clients": 1000}},
    "model": {"name": "mlp", "hidden": [8]}, "train": {"epochs": 1},
    "latency": {"model": "lognormal", "mean": 5.0, "std": 2.0}, "eval": {"every": 1e9},
    "algorithms": [{"name": "fedasync", "alpha": 0.6}], "executor": {"kind": "none"},
    "server": {"concurrency": 1000},
}
"""The engine's probe: FedAsync over 1,000 clients with lognormal latencies, in pure-latency mode (as the
population cases of ``python -m benchmarks.estimate``). Changing it means raising the version in
:data:`simfl.speeds.ENGINE_FACTS`."""
ENGINE_RESAMPLE_SECONDS = 1800.0
"""A launch measures the engine once more where its newest sample is older than this (:func:`ensure`); the
estimate reads the median of the latest samples (:func:`simfl.speeds.add_sample`). This VM's speed moves from
moment to moment more than between machines of a kind: the probe gave 34-69 us an arrival in one process at
3 s intervals, and 35-75 us in fresh processes one after another (by hand, nothing else running); a run of
minutes is timed across such moments, one probe at one of them. A new sample costs about a second of a
launch; every half hour keeps that to launches that are rare or long anyway."""
PROBE_UPDATES = (3_000, 10_000)
"""The probe's budgets of updates: a warm-up (the first run in a process loads the engine's compiled kernels),
then the timed one, run :data:`PROBE_TIMED` times, their CPU time over their updates: a run's arrival as it is
sustained, not at the machine's fastest moment. The probe taken before, the shortest of five runs of 3,000
updates, gave 35-63 us an arrival in fresh processes, and its runs 36-78 us one after another in one process;
three runs of 20,000 updates, their mean, 24-50 us in fourteen fresh processes (median 41.6 us): this VM's speed
moves over seconds, which no probe of a few seconds averages out (by hand, nothing else running). Its
population's setup, 1,000 clients, is about 1% of its time; the probe takes about a second and a half."""
PROBE_TIMED = 3
"""Timed runs of the probe, their mean taken (:data:`PROBE_UPDATES`)."""
SMALL_BATCH = 2
"""The samples of the small timed jobs (batch norm cannot train on one)."""
TIMED_SECONDS = 0.05
"""Each of the six timed calls of a model (two jobs at two batches, two evaluations) repeats for this long (and at
least three times, unless a call is long), keeping the shortest: a small model's measurement stays well under a
second."""
LONG_CALL_SECONDS = 0.5
"""A timed call is repeated no more once it has been timed :data:`LONG_CALLS` times, each this long or more:
repeating a long call for :data:`TIMED_SECONDS` and three times made a large model's measuring minutes long
(MobileNetV2 on CIFAR-100 at a batch of 64: :func:`ensure` took 183 s beside the test suite)..."""
LONG_CALLS = 2
"""...and timing it once left one call's noise in it: MobileNetV2's step on CIFAR-100 at a batch of 32 was measured
0.64 s and 1.14 s by two processes, alone on this VM, against 0.89-1.01 s a step in ten-step jobs after (by hand:
``training`` then three ten-step jobs in fresh processes, native numerics)."""
JOB_SECONDS = 0.05
"""CPU seconds the longer timed job should take at least, in steps of the scenario's batch, so that the difference
of the two jobs, a step's time, stands out of their noise..."""
MAX_STEPS = 20
"""...in at most this many steps..."""
MIN_STEPS = 5
"""...and at least this many: a large model's step is its longer job's time less its one-step job's over the steps
beyond the first, and with two steps that difference carried both jobs' noise whole (VGG11 and MobileNetV2 on
CIFAR at a batch of 32: a ten-step job took 0.82-1.49 times what it was estimated from two-step jobs timed cold,
0.94-1.21 from five-step jobs each run once untimed first; by hand, ``training`` and three ten-step jobs in fresh
processes, alone, native numerics)."""


def ensure(scenario: Scenario, max_memory: int | None = None) -> None:
    """Measure and cache what the estimate of ``scenario`` reads and the cache lacks: the engine's arrival (a
    sample more where the newest is older than :data:`ENGINE_RESAMPLE_SECONDS`), and
    where the scenario trains its model on the CPU, the model's local training and evaluation, unless its runs
    are estimated to need more memory than ``max_memory`` (default: :func:`~simfl.schema.limits.default_max_memory`):
    such a run is refused for its memory, and timing its model would build it first (a synthetic scenario of 10^8
    features: 17 GiB for its MLP of 8 hidden units, before the refusal)."""
    from simfl.schema import limits
    from simfl.schema.estimate import data_facts, estimate

    samples, at = speeds.sampled(speeds.ENGINE, speeds.ENGINE_FACTS)
    now = time.time()
    if samples == 0 or not 0 <= now - at < ENGINE_RESAMPLE_SECONDS:
        try:
            speeds.add_sample(speeds.ENGINE, speeds.ENGINE_FACTS, "arrival", engine()["arrival"], now)
        except Exception:  # noqa: BLE001 - a probe that fails leaves the reference speeds, never the run undone
            pass
    facts = data_facts(scenario.data)
    executor = scenario.executor
    if facts is None or not facts.shape or not executor.trains or executor.cpu_threads() is None:
        return
    from simfl.models import measured
    from simfl.schema import costs

    cost = measured.stated(scenario.model, facts.shape, facts.classes)
    if cost is not None and cost.unknown is not None:
        return  # sized only once the run starts: no step to time ahead
    batch = scenario.train.batch_size
    key = speeds.training(scenario.model, facts.shape, facts.classes, batch)
    if speeds.cached(speeds.TRAINING, key) is None:
        try:
            needs = estimate(scenario, learned=False).memory  # the reference speeds do not change it
        except Exception:  # noqa: BLE001 - the run's own checks say what is wrong with the scenario
            return
        if needs > (max_memory or limits.default_max_memory()):
            return
        tokens = measured.takes(scenario.model) == "tokens"
        speed = training(scenario, facts.shape, facts.classes, batch, tokens)
        if all(k in speed for k in costs.TRAINED):
            speeds.store(speeds.TRAINING, key, speed)


def run_wall(scenario: Scenario) -> float:
    """One run's estimated wall seconds at this machine's speeds (measured and cached first where the cache lacks
    them: :func:`ensure`), for a launch's progress before its runs report; 1 where the estimate states none."""
    from simfl.schema.estimate import estimate

    ensure(scenario)
    return estimate(scenario).wall_seconds or 1.0


def learn(scenario: Scenario, entry: str, wall: float) -> None:
    """Teach this machine's estimates from a finished run of ``scenario``'s entry ``entry`` that took ``wall`` seconds
    (its CPU time where it measures the run's work, :meth:`~simfl.train.configs.ExecutorConfig.timed_by_cpu`, else
    its wall with no other run beside it): that over the estimate's at the measured speeds (before what earlier runs
    taught) less the setup before the run's clock starts (:attr:`~simfl.schema.estimate.Run.setup_seconds`: the
    wall is timed from there), kept in the cache (:func:`simfl.speeds.observe`) where the run took at least
    :func:`~simfl.schema.costs.learned_after` seconds and the estimate states its wall."""
    from simfl.schema import costs
    from simfl.schema.estimate import estimate

    if wall < min(costs.LEARNED_AFTER, costs.ENGINE_LEARNED_AFTER):
        return
    try:
        est = estimate(scenario, learned=False)
    except Exception:  # noqa: BLE001 - what a finished run teaches is never worth failing it
        return
    run = next((r for r in est.entries if r.name == entry), None)
    planned = 0.0 if run is None or run.wall_seconds is None else run.wall_seconds - run.setup_seconds
    lesson = est.speeds.lesson
    if planned > 0 and lesson is not None and wall >= costs.learned_after(lesson):  # both from the clock's start
        speeds.observe(lesson, wall / planned)


@contextmanager
def measuring() -> Iterator[None]:
    """One thread under the numerics pin, the global random generators (torch's, Python's, numpy's) and the
    thread count restored after."""
    import numpy as np
    import torch

    from simfl.train.executor import torch_threads

    state, legacy = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]), numerics.applied(), torch_threads(1):
            yield
    finally:
        random.setstate(state)
        np.random.set_state(legacy)


def training(scenario: Scenario, shape: tuple[int, ...], classes: int, batch: int, tokens: bool) -> Speed:
    """CPU seconds per local training job beside its steps (``job``: the weights loaded and read back, the optimizer
    made), per step beside its samples (``step``), per training sample (``sample``), per evaluation beside its
    samples (``eval``) and per evaluated sample (``eval_sample``) of the scenario's model on one thread, as simfl's
    own trainer and evaluator take them; none where the model does not build or run on such samples (the run
    itself then says why)."""
    import torch

    from simfl.models.flat import Layout
    from simfl.schema import plugins
    from simfl.train.evaluate import Evaluator
    from simfl.train.local import Job, LocalTrainer

    config = scenario.model
    small = min(SMALL_BATCH, batch)
    with measuring():
        torch.manual_seed(0)

        def samples(n: int) -> tuple[torch.Tensor, torch.Tensor]:
            x = torch.zeros((n, *shape), dtype=torch.long) if tokens else torch.randn(n, *shape)
            return x, torch.randint(0, classes, (n,))

        try:
            model = plugins.lookup("model", config.name).build(config, shape, classes)
            scoring = copy.deepcopy(model)  # as a run's evaluator holds it: not in the trainer's memory format
            layout = Layout.of(model)
            start = layout.flatten(model)
            train = scenario.train.model_copy(update={"epochs": 1})

            def jobs(steps: int) -> list[Callable[[], object]]:
                """A job of ``steps`` steps at the small batch and one at the scenario's."""
                trainer = LocalTrainer(model, layout, [samples(steps * n) for n in (small, batch)], train, 0)
                return [functools.partial(trainer.run, Job(m, 0, start)) for m in (0, 1)]

            first = jobs(1)
            for call in first:  # warm-up: the process's first optimizer, and each batch's first allocations
                call()
            one = [per_call(call, warmup=0) for call in first]
            many = max(MIN_STEPS, min(MAX_STEPS, math.ceil(JOB_SECONDS / max(one[1], 1e-9))))
            job = list(zip(one, [per_call(call, warmup=0) for call in jobs(many)], strict=True))
            scored = [per_call(functools.partial(Evaluator(scoring, layout, *samples(n)), start), warmup=0)
                      for n in (small, batch)]
        except Exception:  # noqa: BLE001 - a model that does not build or run is the run's to report
            return {}
    at_small, at_batch = (max(longer - single, 0.0) / (many - 1) for single, longer in job)  # a step beyond the first
    sample = (at_batch - at_small) / (batch - small) if batch > small else 0.0
    if sample <= 0.0:  # noise, or a single batch size: the whole step per sample
        sample = at_batch / batch
    evaluated = (scored[1] - scored[0]) / (batch - small) if batch > small else 0.0
    if evaluated <= 0.0:
        evaluated = scored[1] / batch
    return {"job": max(job[1][0] - at_batch, 0.0), "step": max(at_batch - batch * sample, 0.0), "sample": sample,
            "eval": max(scored[1] - batch * evaluated, 0.0), "eval_sample": evaluated}


def probe() -> Callable[[], object]:
    """The engine's probe, ready to time (inside :func:`measuring`): a call that serves ``PROBE_UPDATES[1]``
    updates, the process warmed up by one run of ``PROBE_UPDATES[0]``."""
    from simfl.launch import experiment
    from simfl.schema.scenario import validate

    first, timed = (validate({**PROBE, "budget": {"updates": n}}) for n in PROBE_UPDATES)
    fed = experiment.federation(first, experiment.load_dataset(first), 0)
    experiment.run_one(first, fed, 0)
    return functools.partial(experiment.run_one, timed, fed, 0)


def engine() -> Speed:
    """CPU seconds per arrival without training (``arrival``): the probe's :data:`PROBE_TIMED` runs' CPU time over
    their updates, after a warm-up (:data:`PROBE_UPDATES`): the mean, as a run sustains it, not the shortest."""
    with measuring():
        call = probe()
        start = time.process_time()
        for _ in range(PROBE_TIMED):
            call()
        seconds = time.process_time() - start
    return {"arrival": seconds / (PROBE_TIMED * PROBE_UPDATES[1])}


def per_call(call: Callable[[], object], warmup: int = 1, least: int = 3, seconds: float = TIMED_SECONDS) -> float:
    """This thread's CPU seconds in one ``call()``: ``warmup`` calls first, then at least ``least`` timed ones and as
    many as fit in ``seconds``, or :data:`LONG_CALLS` that each take :data:`LONG_CALL_SECONDS` or more; the
    shortest. CPU time, not wall time, and the shortest: the machine's own
    speed, which the cache keeps, as little moved as can be by other processes' load (on two cores shared with four
    other processes the wall time of the same steps was twice their CPU time and varied by 2x from one minute to
    the next; their median CPU time by up to 2x too)."""
    for _ in range(warmup):
        call()
    times: list[float] = []
    deadline = time.perf_counter() + seconds
    while len(times) < least or time.perf_counter() < deadline:
        start = time.thread_time()
        call()
        times.append(time.thread_time() - start)
        if len(times) >= LONG_CALLS and min(times) >= LONG_CALL_SECONDS:
            break
    return min(times)
