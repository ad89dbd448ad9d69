"""This machine's speeds: measured by ``simfl run`` on a cache miss, cached per machine and per model, batch and
shape, read by ``simfl validate`` without torch, and used by the estimate's wall time (hand-computed)."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from simfl import speeds
from simfl.cli import main
from simfl.launch import measure_speeds
from simfl.models.configs import MLPConfig, SmallCNNConfig
from simfl.schema import costs, estimate
from simfl.schema.scenario import Scenario, load, validate
from tests.conftest import tiny_scenario


def set_constant(monkeypatch: pytest.MonkeyPatch, name: str, value: float) -> None:
    """The constant ``name`` of the estimate's table (``simfl/schema/costs.json``) at ``value`` for one test."""
    monkeypatch.setitem(costs.table(), name, dataclasses.replace(costs.table()[name], value=value))


ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(speeds.ENV, str(folder))
    return folder


def test_each_model_batch_shape_and_mode_has_its_own_entry(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    facts = speeds.training(SmallCNNConfig(channels=8), (1, 8, 8), 10, 32)
    measured = {"job": 1e-4, "step": 1e-3, "sample": 1e-4, "eval": 1e-4, "eval_sample": 1e-5}
    speeds.store(speeds.TRAINING, facts, measured)
    assert speeds.cached(speeds.TRAINING, facts) == measured
    assert speeds.path() == cache / speeds.FILE
    for other in (speeds.training(SmallCNNConfig(channels=8), (1, 8, 8), 10, 64),
                  speeds.training(SmallCNNConfig(channels=16), (1, 8, 8), 10, 32),
                  speeds.training(MLPConfig(hidden=[8]), (1, 8, 8), 10, 32),
                  speeds.training(SmallCNNConfig(channels=8), (1, 16, 16), 10, 32)):
        assert speeds.cached(speeds.TRAINING, other) is None
    monkeypatch.setenv("SIMFL_NUMERICS", "native")
    assert speeds.cached(speeds.TRAINING, facts) is None
    monkeypatch.setattr(speeds, "_torch_version", lambda: "0.0.1")
    assert speeds.key(speeds.TRAINING, facts) != json.dumps([{}, speeds.TRAINING, facts])


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"layout": 99, "entries": {}}', "\xff\xfe",
                                  '{"layout": 1, "entries": {"k": {"step": "import os"}}}'])
def test_a_corrupt_or_foreign_cache_is_ignored_and_replaced(cache: Path, text: str) -> None:
    cache.mkdir()
    (cache / speeds.FILE).write_text(text, errors="surrogateescape")
    assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) is None
    est = estimate.estimate(validate(tiny_scenario(executor={"kind": "none"})))
    assert est.speeds.measured == () and "speeds: reference machine" in "\n".join(est.lines())
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, {"arrival": 5e-5})
    assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) == {"arrival": 5e-5}
    assert json.loads((cache / speeds.FILE).read_text())["layout"] == speeds.LAYOUT
    assert [p.name for p in cache.iterdir()] == [speeds.FILE]  # no temporary file left


def test_an_unwritable_cache_is_no_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv(speeds.ENV, str(blocker / "cache"))  # below a file: cannot be made
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, {"arrival": 1e-5})
    assert speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) is None


def test_the_wall_time_is_counted_at_the_measured_speeds(cache: Path) -> None:
    """The tiny scenario on the quickstart's data and model (listed: no torch): rounds of 1, 2.5 and 4 s for 8 s give
    8 + 3 + 2 = 13 updates, each one epoch over 1,500 / 3 = 500 samples in batches of 16 (32 steps), and evaluations
    at 0, 2, ..., 8 s (5) of the 297 test samples; 3 clients set up. The engine measured at twice the reference probe
    arrival scales the engine's other costs by 2."""
    scn = validate(tiny_scenario(data={"dataset": "digits", "partition": {"kind": "iid", "clients": 3}},
                                 model={"name": "smallcnn", "channels": 8}))
    before = estimate.estimate(scn)
    assert before.speeds.measured == () and before.speeds_text().startswith("speeds: reference machine")
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    job, step, sample, evaluation, eval_sample = 0.03, 0.01, 0.002, 0.02, 0.0005
    arrival = 2 * costs.PROBE_ARRIVAL_SECONDS
    speeds.store(speeds.TRAINING, speeds.training(scn.model, facts.shape, facts.classes, 16),
                 {"job": job, "step": step, "sample": sample, "eval": evaluation, "eval_sample": eval_sample})
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, {"arrival": arrival})
    est = estimate.estimate(scn)
    assert (facts.train, facts.test) == (1500, 297)
    update = costs.SUSTAINED * (job + 32 * step + 500 * sample)  # as a run sustains the measured speeds
    wall = (13 * update + 5 * costs.SUSTAINED * (evaluation + 297 * eval_sample)  # 297: one batch
            + 3 * 2 * costs.CLIENT_SECONDS)
    assert est.wall_seconds == pytest.approx(wall, rel=1e-9) and not math.isclose(wall, before.wall_seconds or 0.0)
    assert est.launch_seconds == pytest.approx(2 * (costs.LAUNCH_SECONDS + costs.TRAINER_START_SECONDS))
    assert "(speeds: training, engine measured on this machine)" in "\n".join(est.lines())


def test_a_training_launch_adds_the_trainer_start_and_a_measured_speed_counts_no_flops(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch whose runs train adds what a process's first training job does beside its steps (its optimizer
    loads PyTorch's compiler front end), a pure-latency one does not. The model's FLOPs (counted by a FLOP counter
    that loads the same front end) are counted for the reference speeds only: not where this machine's training
    speed is cached."""
    from simfl.models import cost

    counted: list[int] = []
    count = cost.training_flops_per_sample
    monkeypatch.setattr(cost, "training_flops_per_sample", lambda *a: counted.append(1) or count(*a))
    model = {"name": "mlp", "hidden": [7]}  # not in the table of measured built-ins: its FLOPs are counted
    scn = validate(tiny_scenario(model=model))
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    before = estimate.estimate(scn)
    assert counted == [1] and before.speeds.measured == ()
    engine = 2 * costs.PROBE_ARRIVAL_SECONDS
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, {"arrival": engine})
    speeds.store(speeds.TRAINING, speeds.training(scn.model, facts.shape, facts.classes, scn.train.batch_size),
                 {"job": 0.03, "step": 0.01, "sample": 0.002, "eval": 0.02, "eval_sample": 0.0005})
    trained = estimate.estimate(validate(tiny_scenario(model=model)))
    assert counted == [1] and trained.speeds.measured == ("training", "engine")
    assert trained.launch_seconds == pytest.approx(2 * (costs.LAUNCH_SECONDS + costs.TRAINER_START_SECONDS))
    pure = estimate.estimate(validate(tiny_scenario(model=model, executor={"kind": "none"})))
    assert pure.launch_seconds == pytest.approx(2 * costs.LAUNCH_SECONDS)


def tiny_written(tmp_path: Path) -> tuple[Path, Scenario, dict[str, Any]]:
    """The tiny scenario written to a file, validated, and the cache's facts of its model's training."""
    raw = tiny_scenario()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    scn = validate(raw)
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    return path, scn, speeds.training(scn.model, facts.shape, facts.classes, 16)


def test_run_measures_on_a_miss(cache: Path, tmp_path: Path) -> None:
    path, _, key = tiny_written(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    trained = speeds.cached(speeds.TRAINING, key)
    engine = speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS)
    assert trained is not None and set(trained) == set(costs.TRAINED) and trained["sample"] > 0
    assert engine is not None and 1e-7 < engine["arrival"] < 1e-2


def test_a_run_refused_for_its_memory_builds_no_model_to_time(cache: Path, tmp_path: Path) -> None:
    """Timing a model builds it: a scenario over the memory limit is refused before that (a model of 10^8
    inputs would take gigabytes to time, then be refused)."""
    path, scn, key = tiny_written(tmp_path)
    needs = estimate.estimate(scn, learned=False).memory
    measure_speeds.ensure(scn, needs - 1)
    assert speeds.cached(speeds.TRAINING, key) is None
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--max-memory", str(needs - 1)]) == 2
    assert speeds.cached(speeds.TRAINING, key) is None and not (tmp_path / "out").exists()
    measure_speeds.ensure(scn, needs)
    assert speeds.cached(speeds.TRAINING, key) is not None


def test_the_engine_is_read_at_the_middle_of_the_moments_it_was_measured(cache: Path) -> None:
    """A sample per moment, the latest nine kept, their median read; a measurement stored whole is one sample."""
    facts = {"case": 1}
    speeds.store(speeds.ENGINE, facts, {"arrival": 7.0})
    assert speeds.sampled(speeds.ENGINE, facts) == (1, 0.0)
    speeds.add_sample(speeds.ENGINE, facts, "arrival", 1.0, 100.0)
    assert speeds.cached(speeds.ENGINE, facts) == {"arrival": 4.0, "at": 100.0, "0": 7.0, "1": 1.0}
    for i in range(10):
        speeds.add_sample(speeds.ENGINE, facts, "arrival", 10.0 + i, 200.0 + i)
    kept = speeds.cached(speeds.ENGINE, facts)
    assert kept is not None and [kept[str(i)] for i in range(9)] == [11.0 + i for i in range(9)] and "9" not in kept
    assert kept["arrival"] == 15.0 and speeds.sampled(speeds.ENGINE, facts) == (9, 209.0)


def test_a_launch_samples_the_engine_again_once_its_newest_sample_is_old(cache: Path) -> None:
    scn = validate(tiny_scenario(executor={"kind": "none"}))
    now = time.time()
    speeds.add_sample(speeds.ENGINE, speeds.ENGINE_FACTS, "arrival", 1.0, now)
    measure_speeds.ensure(scn)
    assert speeds.sampled(speeds.ENGINE, speeds.ENGINE_FACTS) == (1, now)  # fresh: not measured again
    old = now - measure_speeds.ENGINE_RESAMPLE_SECONDS - 1
    speeds.add_sample(speeds.ENGINE, speeds.ENGINE_FACTS, "arrival", 1.0, old)
    measure_speeds.ensure(scn)
    kept = speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS)
    assert kept is not None and kept["at"] >= now and kept["0"] == kept["1"] == 1.0 and 1e-7 < kept["2"] < 1e-2
    assert kept["arrival"] == 1.0  # the median of three: two samples of 1.0 and the probe's


@pytest.mark.parametrize("how", ["api run", "api sweep", "cli sweep", "cli resume"])
def test_every_launch_measures_on_a_miss(how: str, cache: Path, tmp_path: Path) -> None:
    """Every way of starting runs counts their progress at this machine's speeds: a miss is measured first."""
    import simfl
    from tests.reliability.helpers import interrupted_run

    raw = tiny_scenario()
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    if how == "api run":
        simfl.run(raw, out, quiet=True)
    elif how == "api sweep":
        simfl.sweep(raw, {"train.lr": [0.05]}, out, quiet=True)
    elif how == "cli sweep":
        assert main(["sweep", str(path), "--set", "sweep={train.lr: [0.05]}", "--out", str(out), "--quiet"]) == 0
    else:
        path, _ = interrupted_run(tmp_path)
        raw = yaml.safe_load(path.read_text())
        (cache / "speeds.json").unlink()  # resumed where the cache is empty (another machine, a cleared cache)
        assert main(["run", "--resume", str(out), "--quiet"]) == 0
    scn = validate(raw)
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    trained = speeds.cached(speeds.TRAINING, speeds.training(scn.model, facts.shape, facts.classes, 16))
    assert trained is not None and speeds.cached(speeds.ENGINE, speeds.ENGINE_FACTS) is not None


def test_a_long_call_is_timed_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call of LONG_CALL_SECONDS or more is timed LONG_CALLS times after its warm-up; a short one at least three
    times."""
    calls: list[int] = []
    monkeypatch.setattr(measure_speeds, "LONG_CALL_SECONDS", 0.0)
    assert measure_speeds.per_call(lambda: calls.append(1), warmup=1) >= 0.0
    assert len(calls) == 1 + measure_speeds.LONG_CALLS == 3
    calls.clear()
    monkeypatch.setattr(measure_speeds, "LONG_CALL_SECONDS", 10.0)
    measure_speeds.per_call(lambda: calls.append(1), warmup=0, seconds=0.0)
    assert len(calls) == 3


def test_the_evaluation_is_timed_on_a_replica_as_the_run_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's evaluator scores a copy of the model taken before a trainer put it in channels-last layout
    (simfl/launch/experiment.py); the timed evaluation scores such a copy too, not the trainer's model (on portable
    numerics MobileNetV2's evaluation ran 2x slower in channels-last layout, VGG11's faster)."""
    from simfl.train import evaluate as evaluation

    scored: list[torch.nn.Module] = []

    class Seen(evaluation.Evaluator):
        def __init__(self, model: torch.nn.Module, *args: object, **kwargs: object) -> None:
            scored.append(model)
            super().__init__(model, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluation, "Evaluator", Seen)
    scn = validate(tiny_scenario(model={"name": "smallcnn", "channels": 4}))
    assert set(measure_speeds.training(scn, (1, 8, 8), 3, 16, tokens=False)) == set(costs.TRAINED)
    convs = [m.weight for model in scored for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert scored and convs and all(w.is_contiguous() for w in convs)


def test_measuring_leaves_the_random_state_and_threads() -> None:
    scn = validate(tiny_scenario())
    torch.manual_seed(7)
    state, threads = torch.random.get_rng_state(), torch.get_num_threads()
    speed = measure_speeds.training(scn, (8,), 3, 16, tokens=False)
    assert torch.equal(torch.random.get_rng_state(), state) and torch.get_num_threads() == threads
    assert set(speed) == set(costs.TRAINED)


def test_validate_reads_a_warm_cache_without_torch(cache: Path) -> None:
    """The quickstart's speeds cached: validate counts them and says so, and still loads no torch; on a miss it
    says the speeds are the reference machine's."""
    scn = load(QUICKSTART)
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    code = ("import sys; from simfl.cli import main; rc = main(['validate', sys.argv[1]]); "
            "print(rc, sorted(m for m in ('torch', 'numba', 'matplotlib', 'pandas') if m in sys.modules))")

    def validated() -> list[str]:
        out = subprocess.run([sys.executable, "-c", code, str(QUICKSTART)], capture_output=True, text=True,
                             check=True).stdout.strip().splitlines()
        assert out[-1] == "0 []"
        return [line for line in out if line.startswith("#   wall time:")]

    cold = validated()
    assert len(cold) == 1 and "(speeds: reference machine; `simfl run` measures this one)" in cold[0]
    speeds.store(speeds.TRAINING, speeds.training(scn.model, facts.shape, facts.classes, scn.train.batch_size),
                 {"job": 0.0, "step": 1.0, "sample": 0.0, "eval": 0.0, "eval_sample": 0.0})
    speeds.store(speeds.ENGINE, speeds.ENGINE_FACTS, {"arrival": costs.PROBE_ARRIVAL_SECONDS})
    warm = validated()
    assert len(warm) == 1 and "(speeds: training, engine measured on this machine)" in warm[0]
    assert "h in all" in warm[0]  # a second per step: hours of steps


def test_a_run_teaches_its_wall_against_the_part_of_the_estimate_it_times(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's wall (``RunResult.wall_seconds``) is timed from its clock's start, after its population was set up:
    what it teaches compares it with the estimate less that setup (10^4 clients: 0.15 s at the reference speed),
    or a large population's run would teach its estimate down."""
    set_constant(monkeypatch, "ENGINE_LEARNED_AFTER", 0.0)
    scn = validate(tiny_scenario(data={"dataset": "synthetic", "train_size": 20_000, "test_size": 10, "features": 4,
                                       "classes": 2, "partition": {"kind": "iid", "clients": 10_000}},
                                 latency={"model": "lognormal", "mean": 5.0, "std": 2.0},
                                 executor={"kind": "none"}, server={"concurrency": 100}))
    run = estimate.estimate(scn, learned=False).entries[0]
    assert run.wall_seconds is not None and run.setup_seconds >= 10_000 * costs.CLIENT_SECONDS
    measure_speeds.learn(scn, run.name, 2 * (run.wall_seconds - run.setup_seconds))
    assert speeds.observed(costs.lesson(scn.model, (4,), 2, scn.train.batch_size, False)) == pytest.approx([2.0])


def test_a_run_without_training_teaches_from_a_few_seconds(cache: Path) -> None:
    """A pure-latency run teaches the engine's lesson from ENGINE_LEARNED_AFTER seconds; a training run of as long
    teaches nothing (its first job's compiler load is inside its clock)."""
    pure = validate(tiny_scenario(executor={"kind": "none"}, budget={"time": 600.0}))
    trains = validate(tiny_scenario(budget={"time": 600.0}))
    facts = estimate.data_facts(pure.data)
    assert facts is not None
    lessons = [costs.lesson(s.model, facts.shape, facts.classes, s.train.batch_size, t)
               for s, t in ((pure, False), (trains, True))]
    wall = (costs.ENGINE_LEARNED_AFTER + costs.LEARNED_AFTER) / 2
    assert costs.ENGINE_LEARNED_AFTER < wall < costs.LEARNED_AFTER
    for scn in (pure, trains):
        measure_speeds.learn(scn, "fedasync", costs.ENGINE_LEARNED_AFTER / 2)
        measure_speeds.learn(scn, "fedasync", wall)
    run = estimate.estimate(pure, learned=False).entries[0]
    assert run.wall_seconds is not None
    assert speeds.observed(lessons[0]) == pytest.approx([wall / (run.wall_seconds - run.setup_seconds)])
    assert speeds.observed(lessons[1]) == []


def test_a_run_whose_estimate_omits_its_models_bytes_teaches_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pure-latency run of a rule that states no passes over the model (a plugin's), on a model over
    ARRIVAL_BYTES_COUNTED (an MLP of 12 h + 3 float32 parameters: 4,140 bytes at h = 86), is estimated without its
    work on those bytes, so its wall would teach the engine's estimate for every other pure-latency run what this
    one omits: it teaches nothing; at h = 85 (4,092 bytes) it does, and so does FedAsync, which states its passes."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    wall = costs.ENGINE_LEARNED_AFTER * 2
    lesson = {speeds.ENGINE: speeds.ENGINE_FACTS}
    for hidden, rule, taught in ((86, "tests.plugins.rules:FedFoo", 0), (85, "tests.plugins.rules:FedFoo", 1),
                                 (86, "fedasync", 2)):
        scn = validate(tiny_scenario(executor={"kind": "none"}, budget={"time": 600.0}, algorithms=[{"name": rule}],
                                     model={"name": "mlp", "hidden": [hidden]}))
        entry = estimate.estimate(scn, learned=False).entries[0]
        assert entry.wall_seconds is not None
        measure_speeds.learn(scn, entry.name, wall)
        assert len(speeds.observed(lesson)) == taught


def test_a_finished_run_teaches_the_estimate(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that finished alone says how its wall compared with the estimate's (at the measured speeds, before
    what runs taught): once LEARNED_FROM have, the next estimate of the same model at its batch and shape is scaled
    by the median of those ratios, within LEARNED_BOUND, and says so; another model's is not. A run shorter than
    LEARNED_AFTER teaches nothing. What it teaches is its CPU time (its jobs inline on one thread), at most its
    wall; beside others too (test_cpu_time_teaches_beside_other_runs)."""
    raw = tiny_scenario(seeds=[0, 1])
    scn = validate(raw)
    facts = estimate.data_facts(scn.data)
    assert facts is not None
    taught = costs.lesson(scn.model, facts.shape, facts.classes, scn.train.batch_size, True)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "short"), "--quiet", "--workers", "1"]) == 0
    assert speeds.observed(taught) == []  # about a second each: mostly its start
    set_constant(monkeypatch, "LEARNED_AFTER", 0.0)
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--workers", "1"]) == 0
    planned = estimate.estimate(scn, learned=False).entries[0]
    assert planned.wall_seconds is not None
    raw_wall = planned.wall_seconds - planned.setup_seconds  # a run's wall is timed from its clock's start
    with (tmp_path / "out" / "summary.csv").open() as fh:
        walls = [float(line.split(",")[6]) for line in fh.read().splitlines()[1:]]
    ratios = speeds.observed(taught)
    assert len(ratios) == 2 and all(0.3 * w / raw_wall < r <= 1.05 * w / raw_wall + 1e-3  # summary.csv rounds walls
                                    for r, w in zip(ratios, walls, strict=True))
    assert speeds.observed(costs.lesson(scn.model, facts.shape, facts.classes, scn.train.batch_size, False)) == []  # they trained
    assert costs.LEARNED_FROM == 3
    untaught = estimate.estimate(scn)  # two runs: one moment of this machine's speed
    assert untaught.speeds.runs == 0 and untaught.speeds.learned == 1.0 and "finished" not in untaught.speeds_text()
    speeds.observe(taught, 1.5)
    ratios = speeds.observed(taught)
    other = validate(tiny_scenario(model={"name": "mlp", "hidden": [5]}))
    assert estimate.estimate(other).speeds.runs == 0  # another model: its own measurement's error, not this one's
    learned = estimate.estimate(scn)
    middle = min(max(sorted(ratios)[1], 1 / costs.LEARNED_BOUND), costs.LEARNED_BOUND)  # a tiny run: its start's noise
    assert learned.speeds.runs == 3 and learned.speeds.learned == pytest.approx(middle)
    assert learned.entries[0].wall_seconds == pytest.approx(planned.wall_seconds * learned.speeds.learned)
    assert f"x{learned.speeds.learned:.2f} as 3 finished runs here compared" in learned.speeds_text()
    for _ in range(speeds.OBSERVED_KEPT):
        speeds.observe(taught, 10.0)
    assert speeds.observed(taught) == [10.0] * speeds.OBSERVED_KEPT  # the latest kept
    assert estimate.estimate(scn).speeds.learned == costs.LEARNED_BOUND


def test_cpu_time_teaches_beside_other_runs(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue: lessons learned from wall times that other processes inflated tripled every later estimate. A
    run whose every job is in its own process on one thread (inline or none) teaches its CPU time instead, which
    other processes do not inflate, so it teaches side by side too (two runs at --workers 2, two lessons, each
    ratio below its wall's); one whose jobs run in a pool's processes teaches nothing there."""
    set_constant(monkeypatch, "ENGINE_LEARNED_AFTER", 0.0)
    raw = tiny_scenario(seeds=[0, 1], executor={"kind": "none"}, budget={"time": 2000.0})
    scn = validate(raw)
    assert scn.executor.timed_by_cpu()
    lesson = {speeds.ENGINE: speeds.ENGINE_FACTS}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--out", str(tmp_path / "side"), "--quiet", "--workers", "2"]) == 0
    planned = estimate.estimate(scn, learned=False).entries[0]
    assert planned.wall_seconds is not None
    with (tmp_path / "side" / "summary.csv").open() as fh:
        walls = [float(line.split(",")[6]) for line in fh.read().splitlines()[1:]]
    ratios = speeds.observed(lesson)
    assert len(ratios) == 2 and all(0 < r for r in ratios)
    assert max(ratios) <= max(walls) / (planned.wall_seconds - planned.setup_seconds) * 1.05 + 1e-3
    assert not validate(tiny_scenario(executor={"kind": "process", "workers": 2})).executor.timed_by_cpu()
    assert not validate(tiny_scenario(executor={"kind": "inline", "threads": 2})).executor.timed_by_cpu()
