"""``simfl tune``: search each algorithm entry's hyperparameters with the same budget, on a validation split.

For every entry of the scenario, an Optuna study (its SQLite storage ``optuna.db`` in the output folder)
searches the keys the ``tune:`` section marks (:mod:`simfl.schema.tuning`). Every entry gets the same number of
trials (``tune.trials``; an entry whose whole grid is smaller runs each point once) and each trial the
scenario's budget, seeds, data and delays: a trial is an ordinary scenario with that entry alone, its values
set and ``data.validation`` on (:func:`simfl.launch.experiment.federation` then scores the global model on rows
held out of the clients' training data, never on the test set), run by the runner into an ordinary result
folder ``trials/<entry>/trial<k>/``. Its score is ``tune.score`` of its summary (or metrics), averaged over the
seeds.

Same command, same trials, whatever runs them: trials are asked in fixed batches (``tune.batch`` per entry, batch
``b`` holding trial numbers ``b * batch`` to ``(b + 1) * batch - 1``), every trial of a batch is scored before
the next batch is asked, and the sampler is seeded afresh for each trial from the scenario's first seed, the
entry and the trial number (a grid's trials take its points in an order shuffled once per entry, and
``tune.given_first`` puts the entry's written values first: both are enqueued as fixed trials). What a trial
gets thus never depends on which trial finished first, on ``--workers`` or ``--ray``, or on where a stopped
tune was resumed: the storage holds the trials asked and scored, and a batch cut short is finished as it was
asked.

Fair early stopping (``tune.halving``, :class:`~simfl.schema.tuning.HalvingConfig`): successive halving on rungs
of virtual time that are the same for every entry (:func:`~simfl.schema.tuning.rung_times`).
Every trial of a bracket runs to the first rung; each entry's best ``1/eta`` of it there (rounded up, and every
trial level with the last one kept: :func:`~simfl.schema.tuning.survivors`) runs to the next, and so on to the
budget; the others are pruned. A bracket is an entry's trials (grid and random samplers draw them alike in any
batches, :func:`bracket_size`), or with TPE, which learns from the scores, each batch. A trial
run to a rung is the scenario with ``budget.time`` set to the rung: runs are deterministic and the budget only
stops a run, so its curve is the full trial's up to that time (:func:`score_at` reads the same score from either).
A trial that goes on continues from where its rung stopped (:func:`continues`): each of its runs is kept as its
rung's budget stopped it (``trials/<entry>/trial<k>/rung<j>.end/``, :attr:`~simfl.launch.runner.Target.keep`) and
resumed with the next rung's budget, which is the run to that budget, file for file (the kept state is removed once
the next rung has run, or when the trial is pruned); a run without a kept state (an entry whose runs cannot be
checkpointed, a ServerApp; a tune folder of an older simfl) is run afresh from time 0, to the same files. Which
trials go on is decided from the scores of the whole batch at that rung, never from which finished first, so
``--workers``, ``--ray`` and ``--resume`` give the same trials. Each rung of a trial has its own folder
``trials/<entry>/trial<k>/rung<j>/``; only trials that reached the budget compete for ``best.yaml``.
docs/fair-comparisons.md says where this keeps equal terms and where it does not (a rule that learns late and then
overtakes).

Grid edge extension (``tune.extend``, :func:`extension`): once every entry's grid has run, each axis of numbers whose
best value is its lowest or highest is carried one step further in that direction (the grid's own spacing,
:func:`~simfl.schema.tuning.grid_step`), and the points of the wider grid the entry lacks run as trials, round after
round up to the limit. Every round is decided from the trials' folders, as halving is, so that it too is the same
whoever runs it; its trials are fixed points, kept outside Optuna's studies. The rule is the same for every entry,
the count is not: an entry whose best lies inside its grid gets no more trials (docs/fair-comparisons.md).

The output folder holds ``tune.yaml`` (the scenario tuned), ``started.json`` (what it started as, which
``--resume`` holds tune.yaml to: :func:`check_started`), ``optuna.db`` (checked before Optuna opens it on a resume:
:func:`check_storage`), the trials' folders,
``trials.csv`` (one row per trial run so far: entry, number, state, values, score per seed and mean), ``trials.png``
(:func:`simfl.output.tuning.trials_figure`) and ``best.yaml``: the scenario with each entry's best values
(local-training options as the entry's own ``train:``), ``tune:`` removed and fresh seeds (``tune.seeds``), which
``simfl run`` runs as it is to compare the tuned entries on the test set; its header names each best value at an
end of what was searched and each trial whose model broke (its evaluation loss not finite). The three are written
again after each trial and when a tune resumes, so a long tune shows what it found while it runs and after a stop:
a trial's state is ``scored`` once Optuna has its score, ``waiting`` while the rest of its batch runs (its score is
final either way).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import hashlib
import itertools
import json
import math
import shutil
import sqlite3
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from simfl import outdir, rng, yamlsafe
from simfl.algorithms.configs import run_name
from simfl.errors import InputError
from simfl.schema import scenario as scenario_mod
from simfl.schema.limits import DiskNeed
from simfl.schema.scenario import Scenario
from simfl.schema.tuning import (
    SCORES,
    HalvingConfig,
    Space,
    TuneConfig,
    entry_spaces,
    given_value,
    grid_step,
    rung_times,
    survivors,
    value_problem,
    with_values,
)

if TYPE_CHECKING:  # the runner and the result tables load torch and pandas: imported where a tune runs or reads,
    # so that `simfl validate` of a scenario with a tune: section stays light
    import optuna

    from simfl.launch.runner import Launch
    from simfl.schema.estimate import Estimate

TUNE_FILE = "tune.yaml"
STARTED_FILE = "started.json"
"""What the tune started as: tune.yaml's text and its SHA-256, which ``--resume`` compares (:func:`check_started`)."""
STARTED_FORMAT = "simfl-tune-started/1"
STORAGE_FILE = "optuna.db"
TRIALS_FILE = "trials.csv"
BEST_FILE = "best.yaml"
FIGURE_FILE = "trials.png"
SCORED, WAITING, PRUNED = "scored", "waiting", "pruned"
"""A trial's ``state`` in trials.csv: Optuna has its score; run, the rest of its batch still running; stopped at a
rung of halving (its score is the rung's)."""
TRIALS_DIR = "trials"
INSTALL = "pip install 'simfl[tune]'"
_DROPPED = ("tune", "sweep", "tracking", "record")
"""Keys a trial's scenario leaves out: the search itself, a sweep grid, live trackers and extra recordings."""
CONTINUE_RUNGS = True
"""Whether a promoted trial continues from its rung's kept runs (:func:`continues`). Tests set it False to run every
rung from time 0 and compare: the files are the same; the costs the tune states are the plan's either way."""


@dataclass(frozen=True)
class Entry:
    """One algorithm entry's search."""

    index: int
    """Its position in the scenario's ``algorithms``."""
    name: str
    """Its run name, also the name of its Optuna study and of its trials' folder."""
    spaces: dict[str, Space]
    """The keys searched, within the entry (``train.lr``, ``alpha``), and their values."""
    trials: int
    """How many trials it runs: ``tune.trials``, or its whole grid when that is smaller."""
    given: dict[str, Any] | None = None
    """With ``tune.given_first``: its values as the scenario writes them, its first trial."""


@dataclass(frozen=True)
class Plan:
    """A checked tune: the scenario, its ``tune:`` section, each entry's search and the sampler."""

    scn: Scenario
    raw: dict[str, Any]
    """The scenario as plain data, data paths absolute (what every trial's scenario starts from)."""
    estimate: Estimate
    """The estimate of the scenario's runs (:func:`simfl.schema.estimate.estimate`), made once: what the halving's
    rungs, the tune's cost and its disk are counted from."""
    config: TuneConfig
    entries: list[Entry]
    sampler: str
    """``grid``, ``tpe`` or ``random`` (``auto`` resolved)."""
    seeds: list[int]
    """The seeds of ``best.yaml``."""
    rungs: list[float] = field(default_factory=list)
    """Halving's rungs of virtual time, the last the budget; empty without halving."""
    eta: int = 1
    """Halving's factor: each rung keeps the best ``1/eta`` of a batch (1: no halving)."""
    halving_note: str = ""
    """Why halving is off, when it is (a line of the tune's summary); with halving, what its rungs' times say against
    the scenario's mean round time, if anything."""

    def bracket(self, entry: Entry) -> int:
        """The entry's trials asked at a time, which with halving compete at its rungs (:func:`bracket_size`)."""
        return bracket_size(self.config, self.sampler, bool(self.rungs), entry)

    def folder(self, entry: Entry, number: int, rung: int | None = None) -> str:
        """A trial's result folder: ``trials/<entry>/trial<k>``, or its rung's below it with halving."""
        base = trial_folder(entry, number)
        return base if not self.rungs else f"{base}/rung{rung if rung is not None else len(self.rungs) - 1}"

    def kept(self, entry: Entry, number: int, rung: int) -> str:
        """Where a trial's runs are kept as rung ``rung``'s budget stopped them, for the next rung to continue:
        ``trials/<entry>/trial<k>/rung<j>.end`` (:func:`continues`)."""
        return f"{trial_folder(entry, number)}/rung{rung}.end"


def trial_folder(entry: Entry, number: int) -> str:
    """Trial ``number``'s folder of ``entry`` within the tune's: ``trials/<entry>/trial<k>``."""
    return f"{TRIALS_DIR}/{entry.name}/trial{number}"


@dataclass
class Trial:
    """One trial of one entry: its values, and its score once run."""

    entry: Entry
    number: int
    params: dict[str, Any]
    """Optuna's parameters (a categorical value that is not a plain scalar is its label)."""
    scores: list[float] = field(default_factory=list)
    """Per seed, in the scenario's seed order (empty until run)."""
    broken: dict[int, float] = field(default_factory=dict)
    """Per seed whose evaluation loss became not finite for good, the virtual time from which it was (:func:`broken_since`)."""
    waiting: bool = False
    """Run, but not yet told to Optuna: the rest of its batch is still running."""
    rung: int | None = None
    """With halving, the last rung it ran (its scores are that rung's); None without halving."""
    full: bool = True
    """It ran the whole budget (without halving, or to the last rung): only such trials compete for the best."""
    pruned: bool = False
    """Halving stopped it at its rung."""
    at_rungs: list[float] = field(default_factory=list)
    """With halving, its score at each rung it reached (mean over the seeds, :func:`score_at`)."""
    extension: int = 0
    """Its round of grid edge extension (``tune.extend``): 0 for the grid's own trials."""
    straight: bool = False
    """With halving, run straight to the budget: one of an extension round's fewer than eta trials of its entry,
    of which halving would prune none."""
    folder: str = ""
    """Its result folder relative to the tune's (the last rung's with halving, set as it is read); by default
    ``trials/<entry>/trial<k>``."""

    def __post_init__(self) -> None:
        self.folder = self.folder or trial_folder(self.entry, self.number)

    def values(self) -> dict[str, Any]:
        """The entry's values of this trial (categorical labels turned back into their values)."""
        return {key: value_of(space, self.params[key]) for key, space in self.entry.spaces.items()}

    def shown(self) -> str:
        """Its values as the tune's notes and best.yaml's header show them: ``key=value, ...``."""
        return ", ".join(f"{k}={scenario_mod.short_value(v)}" for k, v in self.values().items())

    @property
    def score(self) -> float:
        return _mean(self.scores)


@dataclass
class TuneOutcome:
    """What one ``simfl tune`` call did."""

    out: Path
    plan: Plan
    trials: list[Trial]
    ran: int = 0
    """Trials run by this call (the others were scored before)."""

    def best(self) -> dict[str, Trial]:
        """Each entry's best trial run so far (the lowest number among equal scores)."""
        return best_trials(self.trials)


def best_trials(trials: Sequence[Trial]) -> dict[str, Trial]:
    """Each entry's trial of the highest score, the lowest number among equal ones; trials not scored (NaN) and
    trials halving stopped short of the budget left out."""
    found: dict[str, Trial] = {}
    for trial in trials:
        if math.isnan(trial.score) or not trial.full:
            continue
        held = found.get(trial.entry.name)
        if held is None or (trial.score, -trial.number) > (held.score, -held.number):
            found[trial.entry.name] = trial
    return found


# -- the search space in Optuna's terms -------------------------------------------------------------------------------


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def labels(space: Space) -> list[Any]:
    """A categorical space's choices as Optuna holds them: the values when all are plain scalars, else each one's
    YAML text."""
    if all(_scalar(v) for v in space.choices):
        return list(space.choices)
    return [scenario_mod.short_value(v) for v in space.choices]


def value_of(space: Space, param: Any) -> Any:
    """The entry's value for Optuna's parameter ``param``."""
    if space.grid:
        return copy.deepcopy(space.choices[labels(space).index(param)])
    return int(param) if space.kind == "int" else float(param)


def distribution(space: Space) -> optuna.distributions.BaseDistribution:
    """The Optuna distribution of ``space``."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if space.grid:
        return CategoricalDistribution(labels(space))
    if space.kind == "int":
        return IntDistribution(int(space.low), int(space.high), log=space.log, step=int(space.step or 1))
    return FloatDistribution(space.low, space.high, log=space.log, step=space.step)


def _grid_size(entry_spaces: Mapping[str, Space]) -> int:
    size = 1
    for space in entry_spaces.values():
        size *= len(space.choices)
    return size


MAX_GRID = 100_000
"""The most points a grid may have (``sampler: auto`` takes TPE above it)."""


def _label(space: Space, value: Any) -> Any:
    """Optuna's parameter for the entry's ``value``."""
    if space.grid:
        return labels(space)[next(i for i, c in enumerate(space.choices) if c == value)]
    return value


def grid_order(plan: Plan, entry: Entry) -> list[dict[str, Any]]:
    """Every point of the entry's grid (Optuna's parameters) in the order its trials take them: shuffled by the
    stream ``(first seed, "tune", entry)``, its given values first with ``tune.given_first``."""
    keys = list(entry.spaces)
    points = [dict(zip(keys, combo, strict=True))
              for combo in itertools.product(*(labels(entry.spaces[k]) for k in keys))]
    order = [points[i] for i in rng.stream(plan.scn.seeds[0], "tune", entry.name).permutation(len(points))]
    if entry.given is not None:
        first = {k: _label(entry.spaces[k], entry.given[k]) for k in keys}
        order.remove(first)
        order.insert(0, first)
    return order


def fixed_params(plan: Plan, entry: Entry, number: int) -> dict[str, Any] | None:
    """The parameters trial ``number`` of ``entry`` takes as they are (a grid's point, or the given values first),
    or None when its sampler draws them."""
    if plan.sampler == "grid":
        return grid_order(plan, entry)[number]
    if entry.given is not None and number == 0:
        return {k: _label(space, entry.given[k]) for k, space in entry.spaces.items()}
    return None


def sampler_for(plan: Plan, entry: Entry, number: int) -> optuna.samplers.BaseSampler:
    """The sampler that asks trial ``number`` of ``entry``, seeded from the scenario's first seed, the entry and the
    number, so that it depends on nothing but the trials stored before it (a grid's trials are fixed points, which
    it does not draw)."""
    import optuna

    seed = rng.torch_seed(plan.scn.seeds[0], "tune", entry.name, number) % 2**32
    if plan.sampler == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    return optuna.samplers.RandomSampler(seed=seed)


# -- planning ------------------------------------------------------------------------------------------------------


LEARNING = ("tpe",)
"""The samplers whose later trials depend on the earlier ones' scores: halving takes its share of each batch."""


def bracket_size(config: TuneConfig, sampler: str, halving: bool, entry: Entry) -> int:
    """How many of the entry's trials are asked at a time (and, with halving, compete at its rungs): ``tune.batch``;
    with halving and a sampler that does not learn from scores (grid, random), all of the entry's trials, which it
    would draw alike in any batches, so that the best share is taken of them all."""
    return entry.trials if halving and sampler not in LEARNING else config.batch


def _halving(scn: Scenario, est: Estimate, config: TuneConfig, entries: Sequence[Entry], sampler: str, where: str,
             resume: bool) -> tuple[HalvingConfig | None, list[float], str]:
    """The halving a tune runs with, its rungs, and why it is off when it is. Unset, it is on where it is safe
    (and off in a folder written before halving existed, which a resume continues as it was); asked for where it
    cannot run, it is refused in one line."""
    asked = config.halving
    if asked is False or (asked is None and resume):
        return None, [], "halving off" + (": tune.halving is false" if asked is False else "")
    settings = asked if isinstance(asked, HalvingConfig) else HalvingConfig()
    budget, every = scn.budget.time, scn.eval.every
    times = rung_times(settings, budget, every) if budget is not None else []
    smallest = min(min(bracket_size(config, sampler, True, e), e.trials) for e in entries)
    if budget is None:
        problem = "its rungs are times and the scenario has no budget.time"
    elif len(times) < 2:
        problem = (f"budget.time {budget:g} s leaves no rung on the evaluation grid (eval.every {every:g} s) before "
                   f"it with eta {settings.eta}")
    elif smallest < settings.eta:
        problem = (f"an entry's first batch has {smallest} trial{'s' * (smallest != 1)}, fewer than eta "
                   f"{settings.eta}: none would be pruned (raise tune.{'batch' if sampler in LEARNING else 'trials'})")
    else:
        return _after_first_rounds(scn, est.mean_latency, settings, times, asked is None)
    if asked is None:
        return None, [], f"halving off: {problem}"
    raise InputError(f"{where}: tune.halving", f"cannot run: {problem}; or set tune.halving: false")


def _after_first_rounds(scn: Scenario, first: float | None, settings: HalvingConfig, times: list[float],
                        default: bool) -> tuple[HalvingConfig | None, list[float], str]:
    """Halving's rungs checked against the scenario's mean round time ``first`` (the estimate's): a rung before it
    would cut trials before most clients' first update, on noise. The default then takes fewer rungs (off when fewer
    than two are left); rungs the scenario asks for are kept, and the note says so."""
    budget, every = scn.budget.time, scn.eval.every
    assert budget is not None
    if first is None or times[0] >= first:
        return settings, times, ""
    early = f"a rung before {first:,.0f} s, the mean round time, would cut trials before most clients' first update"
    if not default:
        return settings, times, f"its first rung at {times[0]:g} s comes first: {early}; fewer tune.halving.rungs avoid it"
    while len(times) >= 2 and times[0] < first:
        settings = settings.model_copy(update={"rungs": settings.rungs - 1})
        times = rung_times(settings, budget, every)
    if len(times) < 2:
        return None, [], f"halving off: {early}, and a single rung is the budget"
    return settings, times, f"{settings.rungs} rungs: {early}"


def plan_of(scn: Scenario, where: str = "scenario", resume: bool = False) -> Plan:
    """Check that ``scn`` can be tuned and lay out each entry's search (``resume``: as a folder's tune.yaml, where
    an unset ``tune.halving`` means a folder written before halving existed)."""
    config = scn.tune
    if config is None:
        raise InputError(where, "has no tune: section saying what to search (see docs/fair-comparisons.md)")
    if not scn.executor.trains:
        raise InputError(f"{where}: executor.kind", "none trains nothing and records no accuracy to score a trial "
                         "on; tune with a training executor (inline, process, ray, cuda)")
    if getattr(scn.data, "validation", None) is not None:
        raise InputError(f"{where}: data.validation", "simfl tune holds out its own validation rows (tune.validation); "
                         "leave data.validation out")
    spaces = entry_spaces(config, scn.algorithms)
    grid = all(s.grid for entry in spaces for s in entry.values())
    largest = max(_grid_size(own) if all(s.grid for s in own.values()) else 0 for own in spaces)
    sampler = ("grid" if grid and largest <= MAX_GRID else "tpe") if config.sampler == "auto" else config.sampler
    if sampler == "grid" and largest > MAX_GRID:
        raise InputError(f"{where}: tune.sampler", f"grid: an entry's grid has {largest:,} points, over {MAX_GRID:,}; "
                         "use tpe or random")
    entries = []
    for index, (algo, own) in enumerate(zip(scn.algorithms, spaces, strict=True)):
        if not own:
            raise InputError(f"{where}: tune.params", f"searches nothing of entry {run_name(algo)}; every entry needs "
                             "at least one key (train.lr, for one), so that each gets the same search")
        count = min(config.trials, _grid_size(own)) if sampler == "grid" else config.trials
        given = None
        if config.given_first:
            try:
                given = {k: given_value(algo, scn.train, k, space) for k, space in own.items()}
            except ValueError as exc:
                raise InputError(f"{where}: tune", f"entry {run_name(algo)}: {exc}") from None
        entries.append(Entry(index, run_name(algo), own, count, given))
    if config.extend is not None:
        _check_extend(config, sampler, entries, where)
    raw = yaml.safe_load(scenario_mod.dump(scn))
    for entry in entries:  # every value of every key in the whole scenario: what the run's own checks would say
        for key, space in entry.spaces.items():
            for value in space.ends():
                trial_scenario(raw, entry, {key: value}, config.validation, f"{where}: tune.params: {key}={value!r}")
    top = max(scn.seeds)
    seeds = config.seeds if config.seeds is not None else list(range(top + 1, top + 1 + len(scn.seeds)))
    from simfl.schema import estimate

    est = estimate.estimate(scn)
    halving, rungs, note = _halving(scn, est, config, entries, sampler, where, resume)
    if config.halving is None and not resume:  # tune.yaml states what was chosen, so that a resume continues it
        scn = scn.model_copy(deep=True)
        assert scn.tune is not None
        scn.tune.halving = halving if halving is not None else False
        config = scn.tune
    return Plan(scn, raw, est, config, entries, sampler, seeds, rungs, halving.eta if halving is not None else 1,
                note)


def _check_extend(config: TuneConfig, sampler: str, entries: Sequence[Entry], where: str) -> None:
    """Refuse ``tune.extend`` where an edge says little or a grid is not what is searched: it extends a grid (the
    grid sampler), every point of which has run (a best at the edge of the few points drawn of a larger grid is not
    one at the edge of what was searched)."""
    if sampler != "grid":
        raise InputError(f"{where}: tune.extend", f"extends a grid, and sampler {sampler} does not search one; use "
                         "sampler: grid (every key a list) or leave tune.extend out")
    for entry in entries:
        size = _grid_size(entry.spaces)
        if entry.trials < size:
            raise InputError(f"{where}: tune.extend", f"needs every entry's whole grid searched: entry {entry.name} "
                             f"runs {entry.trials} of its grid's {size} points; raise tune.trials to {size}")


def trial_scenario(raw: Mapping[str, Any], entry: Entry, values: Mapping[str, Any], validation: float,
                   where: str, number: int = 0, budget: float | None = None) -> Scenario:
    """The scenario of trial ``number``: ``entry`` alone with ``values`` set, scored on a validation split, run to
    ``budget`` virtual seconds when given (a rung of halving). Its name, ``<scenario>-<entry>-trial<k>`` (which
    enters no random stream), keeps ``simfl report`` from pooling trials."""
    one = {k: copy.deepcopy(v) for k, v in raw.items() if k not in _DROPPED}
    one["name"] = f"{raw['name']}-{entry.name}-trial{number}"[:200]
    one["algorithms"] = [with_values(raw["algorithms"][entry.index], values)]
    one["data"]["validation"] = validation
    if budget is not None:
        one["budget"] = {**one["budget"], "time": budget}
    scn = scenario_mod.validate(one, where=where)
    clients = getattr(scn.data.partition, "clients", None)
    if clients is not None:
        scn.check_clients(clients)
    return scn


def batch_sizes(plan: Plan, entry: Entry) -> list[int]:
    """How many trials each of the entry's batches holds, in order."""
    size = plan.bracket(entry)
    return [min(size, entry.trials - start) for start in range(0, entry.trials, size)]


def rung_counts(plan: Plan, size: int) -> list[int]:
    """How many trials of a batch of ``size`` run to each rung of halving (all of them at the first)."""
    counts = [size]
    for _ in plan.rungs[1:]:
        counts.append(math.ceil(counts[-1] / plan.eta))
    return counts


def continues(plan: Plan, entry: Entry) -> bool:
    """Whether the entry's trials that go on from a rung continue from where it stopped (with halving): its runs
    can be checkpointed, so that a run kept as its rung's budget stopped it and resumed with the next rung's is the
    run to that budget (:attr:`~simfl.sim.world.Checkpointing.at_end`). A ServerApp entry's cannot (its ``main``
    runs as code, not data): each of its rungs is a run from time 0. A trial's scenario records nothing
    (``record:`` is dropped), so the algorithm alone decides."""
    return bool(plan.rungs) and bool(type(plan.scn.algorithms[entry.index]).checkpointable)


def rung_seconds(plan: Plan, entry: Entry, rung: int) -> float:
    """The virtual seconds of training one seed of a trial of ``entry`` takes to reach rung ``rung``: the rung's
    time where it continues from the rung before (:func:`continues`), else each rung a run from time 0. The one
    rule of a trial's cost (:func:`trial_cost`, :func:`halving_share`)."""
    return plan.rungs[rung] if continues(plan, entry) else sum(plan.rungs[:rung + 1])


def halving_share(plan: Plan) -> float:
    """The virtual seconds of training the tune runs, as a share of the same trials each run to the budget (1.0
    without halving): each trial costs what reaching its last rung does (:func:`rung_seconds`). Planned, so ties at
    a rung (which keep more trials, :func:`~simfl.schema.tuning.survivors`) are not foreseen."""
    if not plan.rungs:
        return 1.0
    ran = whole = 0.0
    for entry in plan.entries:
        for size in batch_sizes(plan, entry):
            counts = rung_counts(plan, size)
            stopped = [n - after for n, after in zip(counts, [*counts[1:], 0], strict=True)]  # last reached rung j
            ran += sum(n * rung_seconds(plan, entry, j) for j, n in enumerate(stopped))
            whole += size * plan.rungs[-1]
    return ran / whole


def disk_needs(plan: Plan, out: Path) -> list[DiskNeed]:
    """What a tune writes to ``out`` at the most: each trial's result folders (one per rung it reaches with
    halving: a folder's own files, and each seed's run files up to that rung, its rows scaled by the rung's share of
    the budget) and the rung states kept at once for the trials that go on (:func:`continues`: every trial of the
    batches under way, until the rung's cut, each at most a checkpoint of the run to the budget)."""
    from simfl.schema.costs import whole
    from simfl.schema.estimate import bytes_text

    est = plan.estimate
    folder, files = whole("FOLDER_BYTES"), whole("RUN_FILES_BYTES")
    rows = max(0.0, (est.results_bytes - folder) / max(1, est.runs) - files)  # a run's rows to the budget
    seeds = len(plan.scn.seeds)
    budget = plan.rungs[-1] if plan.rungs else 1.0
    total = 0.0
    for entry in plan.entries:
        for size in batch_sizes(plan, entry):
            reached = zip(rung_counts(plan, size), plan.rungs, strict=True) if plan.rungs else [(size, budget)]
            total += sum(n * (folder + seeds * (files + rows * t / budget)) for n, t in reached)
    trials = sum(e.trials for e in plan.entries)
    needs = [DiskNeed("trials' results", int(total), out,
                      f"{trials} trials x {seeds} seed{'s' * (seeds != 1)}, a folder per rung reached",
                      "lower the budget or raise eval.every, or give an --out on a larger disk")]
    kept = sum(min(plan.bracket(e), e.trials) for e in plan.entries if continues(plan, e)) * seeds
    if kept and len(plan.rungs) > 1:
        needs.append(DiskNeed("kept rung states", kept * est.checkpoint_bytes, out,
                              f"{bytes_text(est.checkpoint_bytes)} each, {kept} kept at once until their rung's "
                              "cut", "lower tune.batch, or give an --out on a larger disk"))
    return needs


def estimate_line(plan: Plan, cost: tuple[float, float] | None) -> str:
    """How many trials the tune runs, what halving keeps of them, and about how long they take on one worker
    (``cost``: :func:`tune_seconds`)."""
    from simfl.schema import estimate

    trials = sum(e.trials for e in plan.entries)
    runs = trials * len(plan.scn.seeds)
    line = (f"# tune:          {trials} trials ({', '.join(f'{e.name} {e.trials}' for e in plan.entries)}) x "
            f"{len(plan.scn.seeds)} seed{'' if len(plan.scn.seeds) == 1 else 's'} = {estimate.runs_text(runs)}")
    share = halving_share(plan)
    if plan.rungs:
        line += (f"; halving keeps the best 1/{plan.eta} of each {bracket_word(plan)} at "
                 f"{', '.join(f'{t:g}' for t in plan.rungs)} s (the rest pruned): {share:.2f} of the training of "
                 "every trial to the budget")
        afresh = [e.name for e in plan.entries if not continues(plan, e)]
        if afresh:
            line += f" ({', '.join(afresh)}: each rung a run from time 0, as runs that cannot be checkpointed)"
        if plan.halving_note:
            line += f" ({plan.halving_note})"
    else:
        line += f"; {plan.halving_note}"
    if cost is not None:
        line += f"; about {estimate.duration_text(cost[0])} of one worker"
        if plan.rungs:
            line += f" ({estimate.duration_text(cost[1])} without halving)"
    extra = extension_bound(plan)
    if plan.config.extend is not None:
        line += (f"; tune.extend adds up to {extra} trial{'s' * (extra != 1)} where a best is at an edge of its grid"
                 + (f" (up to {estimate.duration_text(cost[1] / runs * extra * len(plan.scn.seeds))} more of one "
                    "worker)" if cost is not None and runs else ""))
    return line


def extension_bound(plan: Plan) -> int:
    """The most trials grid edge extension can add (0 without ``tune.extend``): every axis of numbers that a step
    can continue (:func:`~simfl.schema.tuning.grid_step`) one value wider in each of ``limit`` rounds, its entry's
    grid then the product of the wider axes, less the points it had."""
    if plan.config.extend is None:
        return 0
    total = 0
    for entry in plan.entries:
        wider = 1
        for space in entry.spaces.values():
            steps = grid_step(space, "highest")[0] is not None or grid_step(space, "lowest")[0] is not None
            wider *= len(space.choices) + (plan.config.extend.limit if steps else 0)
        total += wider - _grid_size(entry.spaces)
    return total


def tune_units(plan: Plan) -> int:
    """The runs a batch of the tune holds at the most, side by side: each entry's bracket times the seeds."""
    return sum(min(plan.bracket(e), e.trials) for e in plan.entries) * len(plan.scn.seeds)


def tune_seconds(plan: Plan) -> tuple[float, float] | None:
    """The tune's estimated seconds of one worker, with its halving and without (None: not known ahead): the
    schema's estimate of one run of the scenario, times the trials' runs, times :func:`halving_share`."""
    wall = plan.estimate.wall_seconds
    if wall is None:
        return None
    runs = sum(e.trials for e in plan.entries) * len(plan.scn.seeds)
    return wall * runs * halving_share(plan), wall * runs


# -- scores and tables ----------------------------------------------------------------------------------------------


def score_at(metrics: Any, score: str, time: float = math.inf) -> float:
    """A run's score by the rule ``score`` from its evaluations at or before virtual ``time`` (all of them by
    default): the last one's accuracy, the best, or their mean. The one reading of a score, at a rung of halving
    and at the budget alike."""
    from simfl.output.comparison import accuracy_at, best_until
    if score == "final_accuracy":
        return accuracy_at(metrics, time)
    if score == "best_accuracy":
        return best_until(metrics, time)
    rows = metrics.loc[metrics["virtual_time"] <= time + 1e-9, "accuracy"]
    return float(rows.mean()) if len(rows) else math.nan


def trial_scores(folder: Path, name: str, seeds: Sequence[int], score: str, time: float = math.inf) -> list[float]:
    """A finished trial's score per seed at virtual ``time`` (default: its end), read from its result folder."""
    from simfl.output.results import read_metrics
    return [score_at(read_metrics(folder, name, seed), score, time) for seed in seeds]


def rung_reached(plan: Plan, out: Path, entry: Entry, number: int) -> int | None:
    """With halving, the last rung whose folder the trial has (None: none yet)."""
    found = [j for j in range(len(plan.rungs)) if (out / plan.folder(entry, number, j)).is_dir()]
    return found[-1] if found else None


def broken_since(folder: Path, name: str, seeds: Sequence[int]) -> dict[int, float]:
    """A finished trial's seeds whose model broke, each with the time from which its loss was not finite through
    the end (:func:`simfl.output.results.broken_at` of the seed's metrics)."""
    from simfl.output.results import read_metrics
    return _broken({seed: read_metrics(folder, name, seed) for seed in seeds})


def _broken(metrics: Mapping[int, Any]) -> dict[int, float]:
    """:func:`broken_since` of each seed's metrics, already read."""
    from simfl.output.results import broken_at
    found = {seed: broken_at(table) for seed, table in metrics.items()}
    return {seed: when for seed, when in found.items() if when is not None}


def _read(plan: Plan, out: Path, trial: Trial) -> Trial:
    """``trial`` with its scores and broken seeds read from its finished folder (with halving, its last rung's,
    with its score at every rung up to it)."""
    from simfl.output.results import read_metrics
    if plan.rungs:
        trial.rung = rung_reached(plan, out, trial.entry, trial.number)
        assert trial.rung is not None, "a trial is read once its first rung ran"
        trial.full = trial.rung == len(plan.rungs) - 1
    trial.folder = plan.folder(trial.entry, trial.number, trial.rung)
    metrics = {seed: read_metrics(out / trial.folder, trial.entry.name, seed) for seed in plan.scn.seeds}
    trial.scores = [score_at(table, plan.config.score) for table in metrics.values()]
    trial.broken = _broken(metrics)
    if trial.rung is not None:
        trial.at_rungs = [_mean([score_at(table, plan.config.score, time) for table in metrics.values()])
                          for time in plan.rungs[:trial.rung + 1]]
    return trial


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def broken_notes(trials: Sequence[Trial]) -> list[str]:
    """One line per trial whose model broke in some seed: its low score is a diverged model's, which the score
    alone does not say (a grid's most aggressive corner, a learning rate too large)."""
    return [f"{t.entry.name} trial {t.number}: its loss is not finite from "
            f"{', '.join(f'{when:g} s in seed {seed}' for seed, when in t.broken.items())}" for t in trials if t.broken]


def rule_notes(plan: Plan, out: Path, trials: Sequence[Trial], best: Mapping[str, Trial]) -> list[str]:
    """One line per score rule other than the tune's (:data:`~simfl.schema.tuning.SCORES`): the best trial it would
    choose from the same finished trials (:func:`best_trials` of their scores read again by :func:`trial_scores`),
    for each entry where that is not ``best``'s. A choice that changes with the rule rests on how a trial is scored,
    not only on what it reached (docs/fair-comparisons.md)."""
    notes = []
    for rule in SCORES:
        if rule == plan.config.score:
            continue
        rescored = [replace(t, scores=trial_scores(out / t.folder, t.entry.name, plan.scn.seeds, rule))
                    for t in trials if t.scores and t.entry.name in best]
        moved = [f"{name} trial {chosen.number} ({chosen.shown()}: {chosen.score:.4f})"
                 for name, chosen in best_trials(rescored).items() if chosen.number != best[name].number]
        notes.append(f"{rule}: " + ("; ".join(moved) if moved else "the same best trial of every entry"))
    return notes


def _cell(value: Any) -> Any:
    return value if _scalar(value) else scenario_mod.short_value(value)


def rung_column(time: float) -> str:
    """trials.csv's column of the scores at a rung of halving."""
    return f"score_at_{time:g}s"


def trial_cost(plan: Plan, trial: Trial) -> float:
    """What a trial's runs cost in virtual seconds of training: reaching its last rung (:func:`rung_seconds`), times
    the seeds (wall seconds, which depend on the machine, are in each run's summary.csv, not in the trials table)."""
    if trial.rung is None or trial.straight:
        return (plan.scn.budget.time or math.nan) * len(plan.scn.seeds)
    return rung_seconds(plan, trial.entry, trial.rung) * len(plan.scn.seeds)


def trials_rows(plan: Plan, trials: Sequence[Trial]) -> tuple[list[str], list[dict[str, Any]]]:
    """trials.csv: one row per trial run (entry order, then number), its state, values, scores per seed and mean;
    with halving also the rung it stopped at (its scores are that rung's), its score at each rung and its cost; with
    ``tune.extend`` its extension round (0: the grid's own)."""
    keys = list(dict.fromkeys(k for e in plan.entries for k in e.spaces))
    seeds = [f"score_seed{s}" for s in plan.scn.seeds]
    rungs = [rung_column(t) for t in plan.rungs]
    halving = ["rung", *rungs, "virtual_seconds"] if plan.rungs else []
    extended = ["extension"] if plan.config.extend is not None else []
    columns = ["entry", "trial", "state", *extended, *keys, *seeds, "score", *halving, "folder"]
    rows = []
    for trial in trials:
        values = trial.values()
        row: dict[str, Any] = {"entry": trial.entry.name, "trial": trial.number,
                               "state": WAITING if trial.waiting else PRUNED if trial.pruned else SCORED}
        if extended:
            row["extension"] = trial.extension
        row.update({k: _cell(values[k]) if k in values else None for k in keys})
        row.update(dict(zip(seeds, trial.scores, strict=True)) if trial.scores else {})
        row["score"] = None if math.isnan(trial.score) else trial.score
        if plan.rungs and trial.rung is not None:
            row["rung"] = plan.rungs[trial.rung]
            row.update(dict(zip(rungs, trial.at_rungs, strict=False)))
            row["virtual_seconds"] = trial_cost(plan, trial)
        row["folder"] = trial.folder if trial.scores else None
        rows.append(row)
    return columns, rows


def validation_rows(metrics: Sequence[Any]) -> int | None:
    """The rows of the validation split the ``metrics`` tables were scored on: every accuracy is a count of rows
    over them, so they are the least common multiple of the accuracies' denominators (None: not found, more than
    a million rows, or accuracies that are not such fractions)."""
    from fractions import Fraction

    rows = 1
    for table in metrics:
        for value in table["accuracy"].to_numpy(dtype=float):
            if not math.isfinite(value):
                continue
            fraction = Fraction(float(value)).limit_denominator(1_000_000)
            if abs(float(fraction) - value) > 1e-12:
                return None
            rows = math.lcm(rows, fraction.denominator)
            if rows > 1_000_000:
                return None
    return rows if rows > 1 else None


def resolution_notes(plan: Plan, out: Path, best: Mapping[str, Trial], trials: Sequence[Trial]) -> list[str]:
    """One line per entry whose best two trials the validation split cannot tell apart: their scores differ by less
    than two standard errors of a difference of two accuracies near the best one, sqrt(2 p (1 - p) / (n k)) for n
    validation rows and k seeds (a normal approximation that ignores the pairing of the rows, so it errs on the
    side of saying so), with about how many rows would separate that difference (at least one row's)."""
    from simfl.output.results import read_metrics
    notes = []
    for entry in plan.entries:
        full = sorted((t for t in trials if t.entry.name == entry.name and t.full and not math.isnan(t.score)),
                      key=lambda t: (-t.score, t.number))
        if entry.name not in best or len(full) < 2:
            continue
        first, second = full[0], full[1]
        rows = validation_rows([read_metrics(out / t.folder, entry.name, seed) for t in (first, second)
                                for seed in plan.scn.seeds])
        if rows is None:
            continue
        p, seeds = first.score, len(plan.scn.seeds)
        gap = first.score - second.score
        error = math.sqrt(2 * p * (1 - p) / (rows * seeds)) if 0 < p < 1 else 0.0
        if error == 0.0 or gap >= 2 * error:
            continue
        needed = math.ceil(8 * p * (1 - p) / (max(gap, 1 / rows) ** 2 * seeds))
        apart = f"{gap * rows:.3g} row{'s' * (round(gap * rows, 6) != 1)}"
        notes.append(f"{entry.name}: its best two trials, {first.number} and {second.number}, score {first.score:.4f} "
                     f"and {second.score:.4f}, {apart} apart of the validation split's {rows:,}, within two standard "
                     f"errors ({2 * error:.4f}); about {needed:,} rows would tell such a difference apart "
                     "(tune.validation, or more seeds)")
    return notes


_AT_EDGE = {"lowest": "the lowest of its grid", "highest": "the highest of its grid",
          "low": "at the low end of its range", "high": "at the high end of its range"}


def edge_notes(plan: Plan, best: Mapping[str, Trial]) -> list[str]:
    """One line per entry whose best trial has a value at an end of what was searched (:meth:`Space.edge`; of its
    grid as extended, with ``tune.extend``): the search may have stopped short of a better value, which a wider grid
    or range for every entry would find. With ``tune.extend``, why the grid was not carried further: its limit, or
    a step that is not taken (:func:`step_beyond`)."""
    notes = []
    for entry in plan.entries:
        trial = best.get(entry.name)
        if trial is None:
            continue
        values, spaces = trial.values(), trial.entry.spaces
        found = [(k, where) for k, space in spaces.items() if (where := space.edge(values[k])) is not None]
        if not found:
            continue
        text = ", ".join(f"{k}={scenario_mod.short_value(values[k])} is {_AT_EDGE[where]}" for k, where in found)
        notes.append(f"{entry.name}: {text}; a wider search may score higher{_unextended(plan, trial, found)}")
    return notes


def _unextended(plan: Plan, trial: Trial, edges: Sequence[tuple[str, str]]) -> str:
    """With ``tune.extend``, why a best value at an edge of a grid was not carried further (its limit reached, or
    the next step not taken); nothing without it or for a range."""
    if plan.config.extend is None:
        return ""
    base = plan.entries[trial.entry.index]
    why = []
    for key, where in edges:
        if where not in ("lowest", "highest"):
            continue
        written = base.spaces[key].choices
        steps = sum(v > max(written) if where == "highest" else v < min(written) for v in trial.entry.spaces[key].choices)
        value, problem = step_beyond(plan, base, key, where, steps + 1)  # a step there was left by the rounds' limit
        why.append(f"{key}: tune.extend.limit {plan.config.extend.limit} reached" if value is not None
                   else f"{key} not extended: {problem}")
    return f" ({'; '.join(why)})" if why else ""


def bracket_word(plan: Plan) -> str:
    """What halving takes its best share of: each entry's trials, or with TPE each batch (:func:`bracket_size`)."""
    return "batch" if plan.sampler in LEARNING else "entry"


def halving_note(plan: Plan, trials: Sequence[Trial]) -> str | None:
    """What halving did (its rungs, how many trials it pruned, the training it ran as a share of every trial run to
    the budget), or None without halving."""
    if not plan.rungs:
        return None
    ran = sum(trial_cost(plan, t) for t in trials if t.rung is not None)
    whole = len(trials) * plan.rungs[-1] * len(plan.scn.seeds)
    pruned = sum(t.pruned for t in trials)
    return (f"rungs at {', '.join(f'{t:g}' for t in plan.rungs)} s keeping the best 1/{plan.eta} of each "
            f"{bracket_word(plan)}: "
            f"{pruned} of {len(trials)} trials pruned, {ran / whole if whole else math.nan:.2f} of the training of "
            "every trial run to the budget" + (f" ({plan.halving_note})" if plan.halving_note else ""))


def best_scenario(plan: Plan, best: Mapping[str, Trial], ran: Mapping[str, int], out: Path,
                  broken: Sequence[str], rules: Sequence[str], trials: Sequence[Trial] = ()) -> str:
    """best.yaml: the scenario with each entry's best values, no ``tune:``, the fresh seeds; paths relative to
    ``out``. ``ran``: each entry's trials run so far (its header says when the search is not over); ``broken``: the
    trials whose model broke (:func:`broken_notes`), and ``rules``: what the other score rules would choose
    (:func:`rule_notes`), both named in its header, as is what halving did to ``trials`` (:func:`halving_note`)."""
    raw = {k: copy.deepcopy(v) for k, v in plan.raw.items() if k != "tune"}
    raw["name"] = f"{plan.scn.name}-tuned"
    raw["seeds"] = list(plan.seeds)
    raw["algorithms"] = [with_values(entry, best[e.name].values()) for entry, e in zip(raw["algorithms"],
                                                                                       plan.entries, strict=True)]
    scn = scenario_mod.validate(raw, where=BEST_FILE)
    lines = [f"# {BEST_FILE}: each entry's best trial ({plan.config.score} on a validation split of "
             f"{plan.config.validation:g} of the clients' rows, seeds {plan.scn.seeds}; {TRIALS_FILE} has every trial)."]
    for entry in plan.entries:
        trial = best[entry.name]
        run = f"of {ran[entry.name]} run so far of {entry.trials}" if ran[entry.name] < entry.trials else f"of {entry.trials}"
        if plan.config.extend is not None and ran[entry.name] > entry.trials:
            run = f"of {ran[entry.name]}: {entry.trials} of its grid, {ran[entry.name] - entry.trials} of its extension"
        lines.append(f"#   {entry.name}: trial {trial.number} (best {run}), {trial.shown()}: {trial.score:.4f}")
    lines += [f"# Halving: {note}." for note in [halving_note(plan, trials)] if note is not None]
    if plan.config.extend is not None and all(sum(t.entry.name == e.name for t in trials) >= e.trials
                                              for e in plan.entries):
        grid = [t for t in trials if t.extension == 0]
        lines += [f"# Extended (tune.extend, limit {plan.config.extend.limit}): {note}."
                  for note in extension_notes(plan, extension(plan, out, grid))]
    lines += [f"# At an edge: {note}." for note in edge_notes(plan, best)]
    lines += [f"# Not separated: {note}." for note in resolution_notes(plan, out, best, trials)]
    lines += [f"# Diverged: {note}; its score is a broken model's." for note in broken]
    lines += [f"# Scored by {note}." for note in rules]
    lines.append(f"# Fresh seeds {plan.seeds}: `simfl run {BEST_FILE}` compares the tuned entries on the test set.")
    return "\n".join(lines) + "\n" + scenario_mod.dump(scn, out)


def write_tables(out: Path, outcome: TuneOutcome) -> None:
    """trials.csv, trials.png and (once every entry has a trial run) best.yaml."""
    import pandas as pd

    from simfl.output.results import write_csv
    from simfl.output.tuning import trials_figure

    columns, rows = trials_rows(outcome.plan, outcome.trials)
    write_csv(out / TRIALS_FILE, columns, rows)
    trials_figure(pd.DataFrame(rows, columns=columns), out / FIGURE_FILE, outcome.plan.config.score,
                  title=outcome.plan.scn.name)
    best = outcome.best()
    if all(e.name in best for e in outcome.plan.entries):
        ran = {e.name: sum(t.entry.name == e.name for t in outcome.trials) for e in outcome.plan.entries}
        text = best_scenario(outcome.plan, best, ran, out, broken_notes(outcome.trials),
                             rule_notes(outcome.plan, out, outcome.trials, best), outcome.trials)
        outdir.write_file(out / BEST_FILE, text.encode())


# -- what a resume continues -----------------------------------------------------------------------------------------


def text_digest(text: str) -> str:
    """SHA-256 (hex) of a scenario's text, as ``simfl run --resume`` keeps of a folder's scenario.yaml
    (:func:`simfl.launch.checkpoint.scenario_digest`)."""
    return hashlib.sha256(text.encode()).hexdigest()


_UNSET = object()
"""A key one side of a comparison does not have."""


def _shown(value: Any) -> str:
    """A value in a one-line message: ``12`` for 12.0, ``unset`` for a missing key, else compact YAML."""
    if value is _UNSET:
        return "unset"
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return f"{value:g}"
    return scenario_mod.short_value(value)


def _first_difference(path: str, then: Any, now: Any) -> str:
    """Where two plain values first differ, below ``path``: ``budget.time 12 → 24``."""
    if isinstance(then, dict) and isinstance(now, dict):
        for key in [*now, *(k for k in then if k not in now)]:
            a, b = then.get(key, _UNSET), now.get(key, _UNSET)
            if a != b:
                return _first_difference(f"{path}.{key}", a, b)
    if isinstance(then, list) and isinstance(now, list) and len(then) == len(now):
        for i, (a, b) in enumerate(zip(then, now, strict=True)):
            if a != b:
                return _first_difference(f"{path}[{i}]", a, b)
    return f"{path} {_shown(then)} → {_shown(now)}"


def changes(then: Mapping[str, Any], now: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The top-level keys whose values differ between two scenarios as plain data, and for each where it first
    differs (:func:`_first_difference`)."""
    keys = [k for k in [*now, *(k for k in then if k not in now)] if then.get(k, _UNSET) != now.get(k, _UNSET)]
    return keys, [_first_difference(k, then.get(k, _UNSET), now.get(k, _UNSET)) for k in keys]


def _started(path: Path) -> dict[str, str]:
    """started.json's record, refused in one line when it is not one simfl wrote for this tune."""
    fix = "restore it, or start the tune afresh with another --out"
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc).splitlines()[0]
        raise InputError(str(path), f"is not this tune's record of how it started: cannot read it ({why}); "
                         f"{fix}") from None
    if not (isinstance(record, dict) and record.get("format") == STARTED_FORMAT
            and isinstance(record.get("sha256"), str) and isinstance(record.get("tune_yaml"), str)):
        raise InputError(str(path), f"is not this tune's record of how it started: not {STARTED_FORMAT}; {fix}")
    if text_digest(record["tune_yaml"]) != record["sha256"]:
        raise InputError(str(path), "is not this tune's record of how it started: its text does not have its "
                         f"SHA-256; {fix}")
    return record


def check_started(out: Path, scn: Scenario) -> None:
    """Refuse to continue the tune in ``out`` when ``scn``, its tune.yaml as it now reads, is not the scenario it
    started as (``started.json``): its trials so far were asked and run for that one, and a changed budget, search
    or seed would mix two tunes in one folder and in ``best.yaml``. The comparison is of the scenario as simfl
    writes it (:func:`simfl.schema.scenario.dump`), so a comment, the order of keys or ``30`` for ``30.0`` changes
    nothing: first its digest (:func:`text_digest`, as ``simfl run --resume`` compares a folder's scenario.yaml);
    when that differs, the started text read and written again by this simfl, so that a simfl which writes a
    scenario differently (a new option at its default) still resumes the same tune. simfl's version is not part of
    it: a trial is its scenario, which says what it runs, and ``simfl run --resume`` does not compare the version
    either. A change is refused in one line naming the top-level keys and where each first differs.

    A folder written before ``started.json`` existed has none: it resumes unchecked as before (its ``optuna.db`` is
    still held to the plan, :func:`check_storage`, so a changed searched value is refused there)."""
    path = out / STARTED_FILE
    if not (path.exists() or path.is_symlink()):
        return
    record = _started(path)
    now = scenario_mod.dump(scn, out)
    if text_digest(now) == record["sha256"]:
        return
    raw = yamlsafe.load_file(record["tune_yaml"], str(path))
    if not isinstance(raw, dict):
        raise InputError(str(path), "is not this tune's record of how it started: its text is no scenario; restore "
                         "it, or start the tune afresh with another --out")
    then = scenario_mod.dump(scenario_mod.resolve_paths(scenario_mod.validate(raw, str(path)), out), out)
    if then == now:
        return
    keys, where = changes(yaml.safe_load(then), yaml.safe_load(now))
    raise InputError(str(out / TUNE_FILE), f"{'its ' if keys else ''}{', '.join(keys) or 'it'} changed since the tune "
                     f"started ({'; '.join(where)}); a tune resumes only as it was started: put {TUNE_FILE} back as it "
                     "was, or start a new tune with another --out")


_SQLITE_HEADER = b"SQLite format 3\x00"
_CORE_TABLES = ("studies", "trials", "version_info")
"""Tables without which an SQLite file holds no Optuna study at all."""


@functools.cache
def _optuna_schema() -> tuple[str, tuple[str, ...], frozenset[str]]:
    """This Optuna's storage schema: its head version, every version it knows, and its tables (read from a storage
    it creates in memory, so that they are Optuna's own, whatever its version)."""
    import optuna
    import sqlalchemy

    storage = optuna.storages.RDBStorage("sqlite://")
    try:
        tables = frozenset(sqlalchemy.inspect(storage.engine).get_table_names())
        return storage.get_head_version(), tuple(storage.get_all_versions()), tables
    finally:
        storage.engine.dispose()


@contextlib.contextmanager
def _readable(path: Path) -> Iterator[str]:
    """An SQLite URI that reads ``path`` without writing it: the file itself read-only; or, when a journal or
    write-ahead log lies beside it (a write cut short, which only a writer can roll back), a copy of the three in a
    temporary folder, which SQLite may recover there."""
    sides = [path.with_name(path.name + suffix) for suffix in ("-journal", "-wal", "-shm")]
    if not any(side.exists() for side in sides):
        yield f"{path.resolve().as_uri()}?mode=ro"
        return
    with tempfile.TemporaryDirectory(prefix="simfl-optuna-") as folder:
        copy_ = Path(folder) / path.name
        for source in (path, *sides):
            if source.is_file():
                shutil.copyfile(source, copy_.with_name(source.name))
        yield copy_.as_uri()


def _distribution_text(dist: Any) -> str:
    """An Optuna distribution as a message shows it: ``[0.1, 0.2]`` (choices) or ``float [0.001, 0.3], log``."""
    from optuna.distributions import CategoricalDistribution

    if isinstance(dist, CategoricalDistribution):
        return scenario_mod.short_value(list(dist.choices))
    kind = "int" if type(dist).__name__.startswith("Int") else "float"
    return f"{kind} [{dist.low:g}, {dist.high:g}]{', log' if dist.log else ''}{f', step {dist.step:g}' if dist.step else ''}"


def _holds(space: Space, value: Any) -> bool:
    """Whether ``value``, a parameter as Optuna stores it (a categorical's index, else the number), is one of
    ``space``'s."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return False
    if space.grid:
        return value == int(value) and 0 <= value < len(space.choices)
    slack = 1e-9 * max(1.0, abs(space.low), abs(space.high))
    whole = space.kind != "int" or value == int(value)
    return whole and space.low - slack <= value <= space.high + slack


def _storage_problem(path: Path, plan: Plan) -> tuple[str, str] | None:
    """What makes ``path`` not this tune's Optuna storage, and what to do, or None when it is (read without
    writing it: :func:`_readable`)."""
    import optuna
    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState

    fix = f"restore the tune's own {STORAGE_FILE}, or start the tune afresh with another --out"
    if not path.is_file():
        return ("it is a folder" if path.is_dir() else "it is not a regular file"), fix
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_SQLITE_HEADER))
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})", fix
    if not head:
        return None  # empty: cut short as Optuna created it, which it fills as it does a new file
    if head != _SQLITE_HEADER:
        return "it is not an SQLite database", fix
    latest, known, expected = _optuna_schema()
    entries = {e.name: e for e in plan.entries}
    with _readable(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
        try:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not set(_CORE_TABLES) <= tables:
                listed = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
                return f"it holds no Optuna studies (its tables: {listed or 'none'})", fix
            versions = ([row[0] for row in db.execute("SELECT version_num FROM alembic_version")]
                        if "alembic_version" in tables else [])
            if versions != [latest]:
                found = versions[0] if len(versions) == 1 else None
                if found in known:
                    return (f"its schema is an older Optuna's ({found}; Optuna {optuna.__version__} reads {latest})",
                            f"upgrade it with `optuna storage upgrade --storage sqlite:///{path.resolve()}` (keep a "
                            "copy first), or resume with the Optuna that started the tune")
                return (f"its schema version ({found or 'none'}) is not one Optuna {optuna.__version__} knows",
                        "resume with the Optuna that started the tune")
            missing = sorted(expected - tables)
            if missing:
                return f"it lacks Optuna's tables {', '.join(missing)}", fix
            names = {sid: name for sid, name in db.execute("SELECT study_id, study_name FROM studies")}
            foreign = sorted(n for n in names.values() if n not in entries)
            if foreign:
                return (f"it holds the study {foreign[0]}, which is not one of this tune's entries "
                        f"({', '.join(entries)})"), fix
            for sid, direction, objective in db.execute("SELECT study_id, direction, objective FROM study_directions"):
                if direction != "MAXIMIZE" or objective != 0:
                    return f"its study {names.get(sid, sid)} is not one maximised score", fix
            states = {row[0] for row in db.execute("SELECT DISTINCT state FROM trials")}
            unknown = sorted(str(x) for x in states - {state.name for state in TrialState})
            if unknown:
                return f"it holds trials in a state Optuna does not have ({unknown[0]})", fix
            rows = db.execute("SELECT s.study_name, t.number, p.param_name, p.param_value, p.distribution_json "
                              "FROM trial_params p JOIN trials t ON p.trial_id = t.trial_id "
                              "JOIN studies s ON t.study_id = s.study_id ORDER BY t.study_id, t.number, p.param_name")
            for name, number, key, value, text in rows:
                entry = entries[name]
                trial = f"{name} trial {number}"
                space = entry.spaces.get(key)
                if space is None:
                    return f"{trial} has a value of {key}, which this tune does not search of {name}", fix
                wanted = distribution(space)
                try:
                    stored = json_to_distribution(text)
                except (ValueError, KeyError, TypeError, AttributeError):
                    return f"{trial}'s {key} has a distribution Optuna cannot read", fix
                if stored != wanted:
                    return (f"{trial}'s {key} was drawn from {_distribution_text(stored)}, and {TUNE_FILE} searches "
                            f"{_distribution_text(wanted)}"), f"put {TUNE_FILE} back as the tune started, or {fix}"
                if not _holds(space, value):
                    return f"{trial}'s {key} is stored as {value!r}, which is not among {_distribution_text(wanted)}", fix
        except sqlite3.DatabaseError as exc:
            return f"SQLite cannot read it ({exc})", fix
    return None


def check_storage(path: Path, plan: Plan) -> None:
    """Refuse ``path`` as the tune's ``optuna.db`` unless it is one: an SQLite file of this Optuna's schema whose
    studies are the plan's entries, each maximised, and whose stored parameters are the plan's keys, drawn from the
    plan's distributions and within them. Checked before Optuna opens it, and without writing it (:func:`_readable`),
    because Optuna would write to a foreign file (its tables created in another SQLite file), stop on an older schema
    and fail deep inside a trial on a stored index its distribution does not have; each is one line naming the
    file. A file that is not there, or empty, is left to Optuna to create."""
    if not (path.exists() or path.is_symlink()):
        return
    found = _storage_problem(path, plan)
    if found is not None:
        what, fix = found
        raise InputError(str(path), f"is not this tune's Optuna storage: {what}; {fix}")


# -- the search ----------------------------------------------------------------------------------------------------


@contextlib.contextmanager
def _quiet_optuna() -> Iterator[Any]:
    """Optuna imported, its log lines (one per trial) kept to warnings while the tune runs."""
    try:
        import optuna
    except ImportError:
        raise InputError("simfl tune", f"needs Optuna: {INSTALL}") from None
    before = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with warnings.catch_warnings():  # TPE's constant liar is "experimental" in some versions: no line per trial
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            yield optuna
    finally:
        optuna.logging.set_verbosity(before)


def _prepare(out: Path, plan: Plan, resume: bool) -> None:
    """Create ``out`` with tune.yaml, or check that it holds a tune to continue."""
    outdir.check_path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    held = (out / TUNE_FILE).is_file()
    if resume:
        if not held:
            raise InputError(str(out), f"holds no tune to resume (no {TUNE_FILE})")
        check_storage(out / STORAGE_FILE, plan)
        return
    if held:
        raise InputError(str(out), f"holds a tune already: continue it with `simfl tune --resume {out}`, or use "
                         "another --out")
    if out.is_dir() and any(out.iterdir()):
        raise InputError(str(out), f"folder exists, is not empty and holds no {TUNE_FILE}; use another --out")
    outdir.make_dir(out, exist_ok=True)
    text = scenario_mod.dump(plan.scn, out)
    outdir.write_file(out / TUNE_FILE, text.encode())
    record = {"format": STARTED_FORMAT, "sha256": text_digest(text), "tune_yaml": text}
    outdir.write_file(out / STARTED_FILE, (json.dumps(record, indent=1) + "\n").encode())


def _next_batch(plan: Plan, entry: Entry, study: optuna.Study) -> list[Trial]:
    """The entry's trials of its open batch: those asked and not yet scored, and the rest of the batch asked now."""
    from optuna.trial import TrialState

    distributions = {k: distribution(s) for k, s in entry.spaces.items()}
    for waiting in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):  # a stop came between its two steps
        study.sampler = sampler_for(plan, entry, waiting.number)
        study.ask(distributions)
    stored = study.get_trials(deepcopy=False)
    open_ = [t for t in stored if t.state == TrialState.RUNNING]
    batch = plan.bracket(entry)
    start = (min(t.number for t in open_) // batch) * batch if open_ else len(stored)
    trials = [Trial(entry, t.number, dict(t.params)) for t in sorted(open_, key=lambda t: t.number)]
    asked = len(stored)
    while asked < min(start + batch, entry.trials):
        study.sampler = sampler_for(plan, entry, asked)
        fixed = fixed_params(plan, entry, asked)
        if fixed is not None:
            study.enqueue_trial(fixed)
        new = study.ask(distributions)
        trials.append(Trial(entry, new.number, dict(new.params)))
        asked += 1
    return trials


def _finished(plan: Plan, studies: Sequence[optuna.Study], out: Path) -> list[Trial]:
    """Every entry's trials run so far, entry by entry in number order, their scores read from their folders: those
    told to Optuna, and those of an open batch whose folder is complete (``waiting``)."""
    from optuna.trial import TrialState

    found = []
    for entry, study in zip(plan.entries, studies, strict=True):
        for t in sorted(study.get_trials(deepcopy=False), key=lambda t: t.number):
            trial = Trial(entry, t.number, dict(t.params), waiting=t.state == TrialState.RUNNING,
                          pruned=t.state == TrialState.PRUNED)
            ran = (rung_reached(plan, out, entry, t.number) is not None if plan.rungs
                   else (out / plan.folder(entry, t.number)).is_dir())
            if t.state in (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED) or (trial.waiting and ran):
                found.append(_read(plan, out, trial))
    return with_extension(plan, out, found)


def with_extension(plan: Plan, out: Path, grid: list[Trial]) -> list[Trial]:
    """The grid's ``trials`` and the extension's run so far (:func:`extension`), entry by entry in number order,
    each trial's entry its search as extended (so that an edge is one of the wider grid)."""
    if plan.config.extend is None:
        return grid
    found = extension(plan, out, grid)
    every = [*grid, *found.trials]
    for trial in every:
        trial.entry = found.entries[trial.entry.name]
    order = {e.name: i for i, e in enumerate(plan.entries)}
    return sorted(every, key=lambda t: (order[t.entry.name], t.number))


# -- grid edge extension ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One grid axis of one entry carried one step beyond an edge of its best value in one extension round, or, with
    ``value`` None, the step that was not taken and why."""

    entry: str
    round: int
    key: str
    edge: str
    """``lowest`` or ``highest`` (:meth:`Space.edge`)."""
    value: Any
    why: str = ""


@dataclass
class Extension:
    """What grid edge extension (``tune.extend``) did so far, replayed from the trials' folders (:func:`extension`)."""

    entries: dict[str, Entry]
    """Each entry's search as extended (the plan's own where nothing was)."""
    steps: list[Step] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    """The extension's trials run so far: those of finished rounds, and of the open one those that ran (``waiting``)."""
    pending: list[Trial] = field(default_factory=list)
    """The open round's trials, to run; empty once the extension is over (or the grid's own trials are not)."""


def step_beyond(plan: Plan, entry: Entry, key: str, edge: str, steps: int) -> tuple[Any, str]:
    """The value ``steps`` steps beyond the ``edge`` of the entry's grid axis ``key`` as the scenario wrote it
    (:func:`~simfl.schema.tuning.grid_step`), or None and why: no step in the grid's spacing, or a value the entry
    (or the whole trial scenario) does not accept, such as a share above 1."""
    value, why = grid_step(entry.spaces[key], edge, steps)
    if value is None:
        return None, why
    problem = value_problem(plan.scn.algorithms[entry.index], key, value)
    if problem is None:
        try:
            trial_scenario(plan.raw, entry, {key: value}, plan.config.validation, "")
        except InputError as exc:
            problem = exc.message
    if problem is not None:
        return None, f"{scenario_mod.short_value(value)} does not fit entry {entry.name}: {problem}"
    return value, ""


def new_points(before: Mapping[str, Space], after: Mapping[str, Space]) -> list[dict[str, Any]]:
    """The points (Optuna's parameters) of the grid ``after`` that the grid ``before`` lacks, in the order of the
    product of ``after``'s axes."""
    keys = list(after)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(labels(after[k]) for k in keys))
            if any(label not in labels(before[k]) for k, label in zip(keys, combo, strict=True))]


def _round_read(plan: Plan, out: Path, trials: Sequence[Trial]) -> list[Trial] | None:
    """An extension round's ``trials`` read from their folders once the round is over (with halving, every trial
    run to the rung the rule sends it to, pruned short of the budget otherwise), or None while it is not."""
    if not plan.rungs:
        return [_read(plan, out, t) for t in trials] if all((out / t.folder).is_dir() for t in trials) else None
    alive = [t for t in trials if not t.straight]
    for j in range(len(plan.rungs)):
        if j == len(plan.rungs) - 1:
            alive += [t for t in trials if t.straight]
        if not all((out / plan.folder(t.entry, t.number, j)).is_dir() for t in alive):
            return None
        if j < len(plan.rungs) - 1:
            alive = going_on(plan, out, alive, j)
    read = [_read(plan, out, t) for t in trials]
    for trial in read:
        trial.pruned = not trial.full
    return read


def _ran(plan: Plan, out: Path, trial: Trial) -> bool:
    """Whether the trial has a finished folder (its first rung's with halving)."""
    first = (len(plan.rungs) - 1 if trial.straight else 0) if plan.rungs else None
    return (out / plan.folder(trial.entry, trial.number, first)).is_dir()


def extension(plan: Plan, out: Path, grid: Sequence[Trial]) -> Extension:
    """Grid edge extension replayed from the trials' folders, so that the workers, Ray and a resume make the same
    rounds: once every entry's grid has run (``grid``: its trials read), round r looks at each entry's best trial so
    far (:func:`best_trials`), and each grid axis whose best value is its lowest or highest gets the value one step
    further (:func:`step_beyond`: the r-th step beyond the grid as written, when the entry accepts it); every point
    of the wider grid the entry lacks is a trial of the round, numbered after the entry's last. A round's trials of
    an entry are halved among themselves, by the rule of the grid's. The rounds stop when no entry's grid grew, at
    ``tune.extend.limit``, or at a round not yet over (its trials ``pending``)."""
    found = Extension({e.name: e for e in plan.entries})
    settings = plan.config.extend
    if settings is None or any(t.waiting for t in grid) or any(
            sum(t.entry.name == e.name for t in grid) < e.trials for e in plan.entries):
        return found
    trials = list(grid)
    taken: dict[tuple[str, str, str], int] = {}
    for round_ in range(1, settings.limit + 1):
        best = best_trials(trials)
        new: list[Trial] = []
        for entry in plan.entries:
            now, top = found.entries[entry.name], best.get(entry.name)
            if top is None:
                continue
            values = top.values()
            grown = dict(now.spaces)
            for key, space in now.spaces.items():
                edge = space.edge(values[key]) if space.grid else None
                if edge not in ("lowest", "highest"):
                    continue
                count = taken.get((entry.name, key, edge), 0) + 1
                value, why = step_beyond(plan, entry, key, edge, count)
                found.steps.append(Step(entry.name, round_, key, edge, value, why))
                if value is not None:
                    taken[(entry.name, key, edge)] = count
                    grown[key] = replace(space, choices=(value, *space.choices) if edge == "lowest"
                                         else (*space.choices, value))
            if grown == now.spaces:
                continue
            wider = replace(now, spaces=grown)
            found.entries[entry.name] = wider
            first = 1 + max(t.number for t in trials if t.entry.name == entry.name)
            points = new_points(now.spaces, grown)
            straight = bool(plan.rungs) and len(points) < plan.eta
            new += [Trial(wider, first + i, params, extension=round_, straight=straight)
                    for i, params in enumerate(points)]
        if not new:
            break
        read = _round_read(plan, out, new)
        if read is None:
            found.pending = new
            found.trials += [_read(plan, out, replace(t, waiting=True)) for t in new if _ran(plan, out, t)]
            break
        found.trials += read
        trials += read
    return found


def extension_notes(plan: Plan, found: Extension) -> list[str]:
    """One line per entry on what grid edge extension did (none without ``tune.extend``): each axis's values added,
    by round, and each step not taken and why; or that its best lay inside its grid."""
    if plan.config.extend is None:
        return []
    notes = []
    for entry in plan.entries:
        mine = [s for s in found.steps if s.entry == entry.name]
        if not mine:
            notes.append(f"{entry.name}: nothing, its best is inside its grid")
            continue
        parts = []
        for key in dict.fromkeys(s.key for s in mine):
            added = [f"{scenario_mod.short_value(s.value)} (round {s.round})" for s in mine
                     if s.key == key and s.value is not None]
            missed = list(dict.fromkeys(f"no step beyond its {s.edge}: {s.why}" for s in mine
                                        if s.key == key and s.value is None))
            parts.append(f"{key} " + "; ".join([*(["added " + ", ".join(added)] if added else []), *missed]))
        trials = len(new_points(entry.spaces, found.entries[entry.name].spaces))
        notes.append(f"{entry.name}: {'; '.join(parts)} ({trials} more trial{'s' * (trials != 1)})")
    return notes


def kept(plan: Plan, trials: Sequence[Trial], score: Callable[[Trial], float]) -> list[Trial]:
    """Which of a batch's ``trials`` go on from a rung: each entry's best ``1/eta`` by ``score``, their score at
    that rung (:func:`~simfl.schema.tuning.survivors`)."""
    found: list[Trial] = []
    for entry in plan.entries:
        mine = [t for t in trials if t.entry.name == entry.name]
        chosen = set(survivors({t.number: score(t) for t in mine}, plan.eta))
        found += [t for t in mine if t.number in chosen]
    return found


def going_on(plan: Plan, out: Path, trials: Sequence[Trial], rung: int) -> list[Trial]:
    """Which of a batch's ``trials`` that ran to ``rung`` go on to the next, read from their folders: never from
    which finished first."""
    return kept(plan, [_read(plan, out, t) for t in trials], lambda t: t.at_rungs[rung])


def finished_tune(out: Path) -> tuple[Plan, list[Trial]]:
    """The plan of the finished tune ``out`` (as its tune.yaml resumes) and every trial, read from its folders."""
    with _quiet_optuna() as optuna:
        if not (out / TUNE_FILE).is_file():
            raise InputError(str(out), f"holds no tune (no {TUNE_FILE})")
        scn = scenario_mod.load(out / TUNE_FILE)
        check_started(out, scn)
        plan = plan_of(scn, str(out / TUNE_FILE), resume=True)
        if not (out / STORAGE_FILE).exists():
            raise InputError(str(out / STORAGE_FILE), "no such file: the tune's trials are not known without it")
        check_storage(out / STORAGE_FILE, plan)
        storage = optuna.storages.RDBStorage(f"sqlite:///{(out / STORAGE_FILE).resolve()}")
        try:
            studies = [optuna.load_study(study_name=e.name, storage=storage) for e in plan.entries]
        except KeyError:
            raise InputError(str(out / STORAGE_FILE), "lacks an entry's study; finish the tune first") from None
        trials = _finished(plan, studies, out)
    if any(t.waiting for t in trials) or len(trials) < sum(e.trials for e in plan.entries):
        raise InputError(str(out), "holds an unfinished tune; finish it first (simfl tune --resume)")
    return plan, trials


def replay_halving(out: Path, halving: HalvingConfig | None = None) -> HalvingReplay:
    """What halving (``halving``, default eta 3 over 3 rungs) would have chosen in the finished tune ``out``, run
    without it: runs are deterministic and a rung's run is the full trial up to the rung, so each trial's own
    curve gives its score at every rung and the halving's choices follow without training again (:func:`kept`, the
    rule a tune applies as it runs): each entry's best, the trial halving keeps, the rung each trial would reach,
    and what it would have cost."""
    full, trials = finished_tune(out)
    if full.rungs:
        raise InputError(str(out), "was tuned with halving already; replay a tune run with tune.halving: false")
    if full.config.extend is not None:
        raise InputError(str(out), "was tuned with tune.extend, whose rounds follow the trials it chose; replay a tune "
                         "run without it")
    asked = full.scn.model_copy(deep=True)
    assert asked.tune is not None
    asked.tune.halving = halving if halving is not None else HalvingConfig()
    plan = plan_of(asked, "--halving-replay")
    seeds = plan.scn.seeds

    def at(time: float) -> Callable[[Trial], float]:
        return lambda t: _mean(trial_scores(out / t.folder, t.entry.name, seeds, plan.config.score, time))

    reached: dict[tuple[str, int], int] = {}
    for entry in plan.entries:
        mine = [t for t in trials if t.entry.name == entry.name]
        size = plan.bracket(entry)
        for start in range(0, len(mine), size):
            alive = mine[start:start + size]
            for j, time in enumerate(plan.rungs):
                reached.update({(t.entry.name, t.number): j for t in alive})
                if j < len(plan.rungs) - 1:
                    alive = kept(plan, alive, at(time))
    last = len(plan.rungs) - 1
    halved = [replace(t, rung=reached[(t.entry.name, t.number)], full=reached[(t.entry.name, t.number)] == last)
              for t in trials]
    walls = {(t.entry.name, t.number): _walls(out / t.folder) for t in trials}
    whole = len(trials) * plan.rungs[-1] * len(seeds)
    chosen, best = best_trials(halved), best_trials(trials)
    return HalvingReplay(plan, [(best[e.name], chosen[e.name]) for e in plan.entries], reached,
                  sum(not t.full for t in halved), len(trials), sum(trial_cost(plan, t) for t in halved) / whole,
                  sum(walls[(t.entry.name, t.number)] * trial_cost(plan, t) / (plan.rungs[-1] * len(seeds))
                      for t in halved), sum(walls.values()))


@dataclass(frozen=True)
class HalvingReplay:
    """What halving would have chosen in a finished search (:func:`replay_halving`)."""

    plan: Plan
    """The search's plan with the halving replayed."""
    best: list[tuple[Trial, Trial]]
    """Per entry: the full search's best trial, and the one halving keeps."""
    reached: dict[tuple[str, int], int]
    """Per trial (entry, number): the last rung halving runs it to."""
    pruned: int
    trials: int
    share: float
    """The virtual training halving runs, as a share of the full search's."""
    wall: float
    """Its wall seconds, each rung's share of a trial's wall taken as its share of the virtual time."""
    wall_full: float
    """The full search's wall seconds (its runs' summary.csv)."""

    @property
    def kept(self) -> int:
        """How many entries' best trials halving keeps."""
        return sum(full.number == halved.number for full, halved in self.best)

    def lines(self) -> list[str]:
        """One line per entry, then what halving would have cost."""
        from simfl.schema.estimate import duration_text

        lines = []
        for full, halved in self.best:
            same = ("the same" if halved.number == full.number
                    else f"trial {halved.number} ({halved.shown()}: {halved.score:.4f})")
            lines.append(f"{full.entry.name}: the full search's best is trial {full.number} ({full.shown()}: "
                         f"{full.score:.4f}); halving keeps {same}")
        plan = self.plan
        lines.append(f"halving at {', '.join(f'{t:g}' for t in plan.rungs)} s keeping 1/{plan.eta} of each "
                     f"{bracket_word(plan)}: {self.pruned} of {self.trials} trials pruned, {self.share:.2f} of the "
                     f"full search's virtual training; about {duration_text(self.wall)} of its "
                     f"{duration_text(self.wall_full)} of wall time (each rung's share of its trial's wall time "
                     "taken as its share of the virtual time)")
        return lines


def _walls(folder: Path) -> float:
    """The wall seconds of a finished result folder's runs (summary.csv)."""
    from simfl.output.tables import read_table

    return float(read_table(folder / "summary.csv", {"wall_seconds": "number"}, "runs")["wall_seconds"].sum())


def run_tune(plan: Plan, out: Path, launch: Launch, resume: bool = False,
             say: Callable[[str], None] | None = None) -> TuneOutcome:
    """Run every trial of ``plan`` not yet scored into ``out`` (which this command holds) and write the tables."""
    from simfl.launch.runner import run_targets, staged_target
    say = say if say is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    with _quiet_optuna() as optuna:
        _prepare(out, plan, resume)
        storage = optuna.storages.RDBStorage(f"sqlite:///{(out / STORAGE_FILE).resolve()}")
        studies = [optuna.create_study(storage=storage, study_name=e.name, direction="maximize", load_if_exists=True)
                   for e in plan.entries]
        from simfl.launch.measure_speeds import run_wall

        wall = run_wall(plan.scn)  # one run's, for the progress bar

        def tables() -> list[Trial]:  # the trials run so far, their tables written: after each trial and each batch
            trials = _finished(plan, studies, out)
            write_tables(out, TuneOutcome(out, plan, trials))
            return trials

        def published(_: object) -> None:
            tables()

        ran: set[tuple[str, int]] = set()
        # a resume shows what has run at once, in this version's tables (a folder of an older version, or whose
        # last trial was published before its tables were written, is not left as it was until the next trial ends)
        written = tables() if resume else []  # a new tune's first batch writes them

        def run_batch(batch: Sequence[Trial]) -> None:  # a batch's trials, rung by rung: those not run yet
            alive = [t for t in batch if not t.straight]
            last = len(plan.rungs) - 1
            for j, budget in enumerate(plan.rungs or [None]):
                rung = None if budget is None else j
                if j > 0:  # the scores of the whole batch at the rung before say who goes on, not who finished first
                    before, alive = alive, going_on(plan, out, alive, j - 1)
                    _drop_kept(plan, out, _others(before, alive), j - 1)  # pruned: their runs go no further
                if j == last:
                    alive += [t for t in batch if t.straight]
                targets, started = [], set()
                for trial in alive:
                    where = plan.folder(trial.entry, trial.number, rung)
                    final = out / where
                    if not final.is_dir():
                        outdir.make_dir(final.parent, exist_ok=True)
                        scn = trial_scenario(plan.raw, trial.entry, trial.values(), plan.config.validation, where,
                                             trial.number, budget)
                        label = f"{trial.entry.name} trial {trial.number}"
                        on = budget is not None and not trial.straight and CONTINUE_RUNGS and continues(plan, trial.entry)
                        start = plan.rungs[j - 1] if on and j > 0 else 0.0
                        share = 1.0 if budget is None else (budget - start) / plan.rungs[-1]
                        if budget is not None and (j < last or start):
                            label = f"{label} {f'from {start:g} ' if start else ''}to {budget:g} s"
                        target = staged_target(scn, final, label, wall * share if wall is not None else None)
                        if on and j < last:  # kept as the rung's budget stops it, for the next rung to continue
                            target.keep = out / plan.kept(trial.entry, trial.number, j)
                        if start:
                            target.start_from, target.start_at = out / plan.kept(trial.entry, trial.number, j - 1), start
                        targets.append(target)
                        started.add((trial.entry.name, trial.number))
                if targets:
                    say(f"tune: {len(targets)} trials ({', '.join(t.label for t in targets)})")
                    run_targets(targets, launch, on_published=published)
                    ran.update(started)
                if j > 0:  # continued from (or, for a run not kept, run again to) this rung: no longer needed
                    _drop_kept(plan, out, alive, j - 1)

        while True:
            batch = [t for e, s in zip(plan.entries, studies, strict=True) for t in _next_batch(plan, e, s)]
            if not batch:
                break
            run_batch(batch)
            for trial in batch:
                study = studies[trial.entry.index]
                if not _read(plan, out, trial).full:
                    study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
                elif math.isnan(trial.score):
                    study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
                else:
                    study.tell(trial.number, trial.score)
            written = tables()
        while plan.config.extend is not None:  # grid edge extension, round by round, decided from the folders
            grid = [t for t in _finished(plan, studies, out) if t.extension == 0]
            pending = extension(plan, out, grid).pending
            if not pending:
                break
            run_batch(pending)
            written = tables()
        return TuneOutcome(out, plan, written, len(ran))


def _others(trials: Sequence[Trial], kept: Sequence[Trial]) -> list[Trial]:
    """The ``trials`` not among ``kept`` (by entry and number)."""
    names = {(t.entry.name, t.number) for t in kept}
    return [t for t in trials if (t.entry.name, t.number) not in names]


def _drop_kept(plan: Plan, out: Path, trials: Sequence[Trial], rung: int) -> None:
    """Remove the runs of ``trials`` kept at rung ``rung`` (:meth:`Plan.kept`): continued already, or pruned there."""
    for trial in trials:
        folder = out / plan.kept(trial.entry, trial.number, rung)
        if outdir.is_ours(folder):
            outdir.remove_own(folder, [f for f in outdir.files_under(folder) if f.endswith((".pt", ".pt.tmp"))]
                              + [outdir.MARKER], root=True)


def tune(path: str | Path | Mapping[str, Any] | None = None, out: Path | None = None, overrides: Sequence[str] = (),
         workers: int | None = None, ray_address: str | None = None, resume: Path | None = None,
         quiet: bool = False, log: Callable[[str], None] | None = None, base: Path | None = None) -> TuneOutcome:
    """Tune the scenario ``path`` into ``out`` (default ``runs/<name>-tune``), or continue the tune in the folder
    ``resume`` as it was started (see the module's documentation).

    ``path`` is a scenario file, or a raw scenario mapping whose relative data paths are relative to ``base``
    (default: the working folder). ``workers`` and ``ray_address`` say where trials run, as for
    :func:`simfl.launch.grid.run_sweep`; the trials and their scores do not depend on them.
    """
    from simfl.launch.runner import Launch
    from simfl.launch.workers import workers_for
    if resume is not None:
        if path is not None or out is not None or overrides:
            raise InputError("--resume", "takes no scenario file, --out, --set or --seeds: it continues OUT as it was")
        out = Path(resume)
        where = str(out / TUNE_FILE)
        if not (out / TUNE_FILE).is_file():
            raise InputError(str(out), f"holds no tune to resume (no {TUNE_FILE})")
        scn = scenario_mod.load(out / TUNE_FILE)
        check_started(out, scn)
    elif path is None:
        raise InputError("tune", "needs a scenario file (or --resume OUT)")
    elif isinstance(path, Mapping):
        raw = copy.deepcopy(dict(path))
        for text in overrides:
            scenario_mod.apply_override(raw, text)
        where = "scenario"
        scn = scenario_mod.resolve_paths(scenario_mod.validate(raw, where), base if base is not None else Path.cwd())
    else:
        scn = scenario_mod.load(path, overrides)
        where = str(path)
    out = Path(out) if out is not None else outdir.default_out(f"{scn.name}-tune")
    plan = plan_of(scn, where, resume is not None)
    from simfl.schema import limits

    limits.check(plan.estimate, limits.default_max_memory(), f"{where}: estimate")  # as simfl run and sweep
    if resume is None:  # a resumed tune has written part of it already
        limits.check_needs(disk_needs(plan, out), f"{where}: estimate")
    if not quiet:
        (log or (lambda line: print(line, file=sys.stderr, flush=True)))(estimate_line(plan, tune_seconds(plan)))
    count = workers_for(workers, [scn], tune_units(plan), ray=ray_address is not None)
    with outdir.hold(out):
        return run_tune(plan, out, Launch(count, ray_address, quiet=quiet, say=log), resume is not None, log)


__all__ = ["Plan", "TuneOutcome", "plan_of", "run_tune", "tune"]
