"""A unit of work: one (cell, entry, seed) run, as plain data that runs wherever it is sent.

``simfl run`` and ``simfl sweep`` split a scenario into units, one per (sweep cell,
algorithm entry, seed), and :mod:`simfl.launch.parallel` sends them to this process, to
worker processes or to Ray tasks on other machines. A :class:`Unit` carries
everything its run needs (the scenario as YAML text, the entry, the seed, the
checkpoint schedule, the saved simulation when it resumes), so a unit shares only
its inputs with the others and gives the same numbers wherever and beside whatever
it runs:

- the torch thread count is fixed by the scenario (:func:`unit_threads`), not by
  the machine or the number of units side by side; the simulating process
  (aggregation, evaluation) runs with it as well as the training;
- the federation (shards, initial model) is rebuilt from the seed's streams.

A unit never writes a file of the result folder itself: it reports what it has
through ``emit`` as :class:`Grown` (new rows of metrics.csv and events.csv),
:class:`Saved` (a checkpoint's bytes) and :class:`Moved` (how far it is), and
returns :class:`Done` (its files as bytes and its summary row) or :class:`Stopped`
(``--verify`` stopped it, or it could make no progress). The process that launched it writes them into the
staging folder, which therefore need not exist where the unit runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from simfl import numerics
from simfl.algorithms.configs import run_name
from simfl.data import Dataset
from simfl.errors import InputError
from simfl.launch.checkpoint import FRESH, Every, parse_every, run_blob
from simfl.launch.experiment import Engine, RunOptions, chain, federation, load_dataset, run_one
from simfl.launch.workers import unit_cpus as unit_cpus  # re-exported
from simfl.names import allowing_imports, imports_allowed, trusted, trusting
from simfl.output.results import GrowingRun, run_files, state_loss_note, summary_row
from simfl.output.tracking import Tracking
from simfl.schema import scenario as scenario_mod
from simfl.schema.scenario import Scenario
from simfl.sim.engine import Checkpointing, Progress
from simfl.sim.state import SimState
from simfl.sim.verify import RunStopped

Key = tuple[int, str, int]
"""A unit's name within one launch: (cell index, entry name, seed)."""


@dataclass(frozen=True)
class Unit:
    """One (cell, entry, seed) run, as plain data."""

    cell: int
    """Index of the result folder (sweep cell) the run belongs to."""
    index: int
    """The entry's position in the cell scenario's ``algorithms``."""
    name: str
    """The entry's label, or its algorithm's name."""
    seed: int
    scenario: str
    """The cell's scenario as YAML text (data paths resolved)."""
    out: str
    """The cell's output folder as an absolute path (only trackers use it, for their default places)."""
    threads: int
    """Torch threads of the whole run (:func:`unit_threads`), fixed where the unit was planned."""
    workers: int | None
    """The executor's workers, fixed where the unit was planned (None: inline's own rule)."""
    every: str | None = None
    """``--checkpoint-every`` as given, or None."""
    wall: float | None = None
    """Wall seconds between the run's checkpoints (``--checkpoint-wall``), or None: only ``every``'s."""
    verify: bool = False
    resume: dict[str, Any] | None = None
    """The saved simulation to continue, or None to start at time 0."""
    prior_wall: float = 0.0
    """Wall seconds the run had cost before its checkpoint."""
    allow_imports: bool = False
    """Whether the launching process allowed import paths (a Ray task does not inherit its environment)."""
    trusted: tuple[str, ...] = ()
    """The import paths the launching process trusts without that permission (a Flower App's own components)."""
    estimate: float = 1.0
    """Estimated wall seconds of the whole run (only progress reports use it)."""
    saved_as: str = ""
    """Where the run's checkpoint is kept, for messages about a damaged one."""
    clock: Engine = "auto"
    """The clock the run is simulated on (``--clock``; :attr:`~simfl.launch.experiment.RunOptions.engine`): the same
    numbers on both."""
    pool: int = 0
    """Workers of a process pool the run, where its executor is ``inline``, starts once its training has proved
    heavy enough (the ``adaptive`` executor: the same numbers; 0: none). The launch sets it from the cores the runs
    side by side leave each (a Flower App's ClientApp calls, :func:`simfl.launch.flwr_app.spare_pool`)."""
    keep: bool = False
    """Hand the run's state at its end, when its time budget stopped it, as :attr:`Done.kept`, so that a run of the
    same scenario with a later ``budget.time`` continues it (halving's promoted trials, :mod:`simfl.launch.tune`)."""

    @property
    def key(self) -> Key:
        return (self.cell, self.name, self.seed)

    @property
    def title(self) -> str:
        return f"{self.name} seed{self.seed}"


@dataclass(frozen=True)
class Grown:
    """New rows of one of the run's growing files (:class:`~simfl.output.results.GrowingRun`)."""

    key: Key
    file: str
    text: str
    fresh: bool


@dataclass(frozen=True)
class Saved:
    """A checkpoint of the run (:func:`~simfl.launch.checkpoint.run_blob`), at virtual time ``now``."""

    key: Key
    blob: bytes
    now: float
    updates: int


@dataclass(frozen=True)
class Moved:
    """How far the run is: the share of its budget done, from 0 to 1, and what the run says there (a ServerApp's
    round), if anything."""

    key: Key
    done: float
    line: str = ""


@dataclass(frozen=True)
class Done:
    """A finished run: its files by name, its summary.csv row and what its evaluation losses say, if anything
    (:func:`~simfl.output.results.loss_note`), for its line."""

    key: Key
    files: dict[str, bytes]
    row: dict[str, Any]
    wall: float
    note: str | None
    cpu: float | None = None
    """The run's CPU seconds where they measure its work (:meth:`~simfl.train.configs.ExecutorConfig.timed_by_cpu`,
    a fresh run), else None."""
    kept: bytes | None = None
    """With :attr:`Unit.keep`, the run as its time budget stopped it (:func:`~simfl.launch.checkpoint.run_blob`),
    else None."""


@dataclass(frozen=True)
class Stopped:
    """A run stopped before its end: its files so far, why (the broken invariant, or what kept it from making
    progress) and the cause (``--verify`` or ``no progress``, :class:`~simfl.sim.verify.RunStopped`)."""

    key: Key
    files: dict[str, bytes]
    message: str
    cause: str = "--verify"


Message = Grown | Saved | Moved
Emit = Callable[[Message], None]


# -- resources ------------------------------------------------------------------------------------


def unit_threads(scn: Scenario) -> int:
    """Torch threads of one run: the executor's training threads (``executor.threads``, see
    :meth:`~simfl.train.executor.ExecutorConfig.train_threads`), also used by the simulating process."""
    return scn.executor.train_threads()


def pinned_workers(scn: Scenario) -> int | None:
    """The executor's workers as they will run (process and Ray pools default to the planning machine's cores)."""
    return scn.executor.planned_workers()


# -- running one unit -------------------------------------------------------------------------------

_DATASETS: dict[str, Dataset] = {}
"""The dataset last loaded in this process, by its data section: a worker loads it once for all its units
(units come in plan order, so a sweep over datasets loads each once per worker), and only one is kept."""


def data_key(scn: Scenario) -> str:
    """The scenario's data section as text: units with the same one share their dataset."""
    return json.dumps(scn.data.model_dump(mode="json"), sort_keys=True)


def dataset_for(scn: Scenario, fallback: Callable[[], Dataset] | None = None) -> Dataset:
    """The scenario's dataset, loaded once per process; ``fallback`` gives it when this machine's data
    folder lacks it (a Ray node receives it from the launching machine)."""
    key = data_key(scn)
    if key not in _DATASETS:
        _DATASETS.clear()
        try:
            _DATASETS[key] = load_dataset(scn)
        except InputError:
            if fallback is None:
                raise
            _DATASETS[key] = fallback()
    return _DATASETS[key]


@dataclass
class _Feeds:
    """The engine callbacks of one unit: growing files, progress reports, trackers, checkpoints."""

    unit: Unit
    scn: Scenario
    emit: Emit
    started: float = field(default_factory=time.perf_counter)

    def share(self, state: SimState) -> float:
        budget = self.scn.budget
        parts = [state.now / budget.time if budget.time else 0.0,
                 state.updates / budget.updates if budget.updates else 0.0]
        return 1.0 if state.stopped else min(1.0, max(parts))

    def moved(self, state: SimState) -> None:
        self.emit(Moved(self.unit.key, self.share(state)))

    def say(self, state: SimState, line: str) -> None:
        self.emit(Moved(self.unit.key, self.share(state), line))

    def grown(self, file: str, text: str, fresh: bool) -> None:
        self.emit(Grown(self.unit.key, file, text, fresh))

    def checkpointing(self, kept: list[bytes]) -> Checkpointing | None:
        """The run's checkpoints on its schedule, and with :attr:`Unit.keep` its state at its end put in ``kept``."""
        every, wall = self.unit.every, self.unit.wall
        if every is None and wall is None and not self.unit.keep:
            return None
        schedule = parse_every(every) if every is not None else Every("")

        def blob(sim: dict[str, Any]) -> bytes:  # made at once: the run's store and executor close after it
            return run_blob(self.unit.name, self.unit.seed, self.unit.prior_wall + time.perf_counter() - self.started,
                            sim)

        def save(sim: dict[str, Any]) -> None:
            state = sim["state"]
            self.emit(Saved(self.unit.key, blob(sim), float(state["now"]), int(state["updates"])))

        return Checkpointing(save, every_updates=schedule.updates, every_time=schedule.seconds, every_wall=wall,
                             at_end=(lambda sim: kept.append(blob(sim))) if self.unit.keep else None)


def unit_scenario(unit: Unit) -> Scenario:
    """The validated scenario of ``unit``, with the executor's threads and workers the planning machine fixed,
    so that a unit sent to a machine with another core count runs with the same thread counts."""
    scn = scenario_mod.validate(yaml.safe_load(unit.scenario), where=f"{unit.title}: scenario")
    executor = scn.executor.model_copy(update={"threads": unit.threads, "workers": unit.workers})
    return scn.model_copy(update={"executor": executor.spared(unit.pool)})


def run_unit(unit: Unit, emit: Emit, fallback: Callable[[], Dataset] | None = None) -> Done | Stopped:
    """Run ``unit`` in this process, reporting through ``emit``; returns its files and summary row.

    A user mistake raises :class:`~simfl.errors.InputError`; a run stopped by ``--verify``, or because it cannot
    make progress, returns :class:`Stopped` with its files so far.
    """
    # the caller's torch switches restored after
    with allowing_imports(unit.allow_imports), trusting(unit.trusted), numerics.applied():
        return _run_unit(unit, emit, fallback)


def _run_unit(unit: Unit, emit: Emit, fallback: Callable[[], Dataset] | None) -> Done | Stopped:
    scn = unit_scenario(unit)
    before = torch.get_num_threads()
    torch.set_num_threads(unit.threads)
    try:
        fed = federation(scn, dataset_for(scn, fallback), unit.seed, unit.index)
        feeds = _Feeds(unit, scn, emit)
        tracker = None if scn.tracking is None else Tracking(scn.tracking, scn.name, unit.scenario, Path(unit.out))
        resume = unit.resume
        feed = None if tracker is None else tracker.open(
            unit.name, unit.index, unit.seed, unit.prior_wall, len(resume["state"]["events"]) if resume else 0)
        growing = GrowingRun(feeds.grown)
        watchers: list[Progress] = [growing]
        if feed is not None:
            watchers.append(feed.progress)
        kept: list[bytes] = []
        options = RunOptions(chain(watchers), unit.verify, feeds.checkpointing(kept), resume,
                             on_update=None if feed is None else feed.on_update, say=feeds.say, pulse=feeds.moved,
                             engine=unit.clock)
        try:
            result = run_one(scn, fed, unit.index, options)
        except InputError as exc:
            if feed is not None:
                feed.finish({}, failed=True)
            if exc.where == "checkpoint" and resume is not None:
                raise InputError(unit.saved_as, f"{exc.message}; {FRESH}") from None
            raise
        except RunStopped as exc:
            if feed is not None:
                feed.finish({}, failed=True)
            files = run_files(exc.state, written=growing.handed_on(exc.state))
            return Stopped(unit.key, {**files, numerics.FILE: numerics.record()}, exc.message, exc.cause)
        except BaseException:
            if feed is not None:
                feed.finish({}, failed=True)
            raise
        wall = result.wall_seconds + unit.prior_wall
        row = summary_row(unit.name, unit.seed, result.state, wall)
        if feed is not None:
            feed.finish(row)
        files = {**run_files(result.state, result.tables, growing.handed_on(result.state)), numerics.FILE: numerics.record()}
        cpu = result.cpu_seconds if scn.executor.timed_by_cpu() and not unit.prior_wall else None
        return Done(unit.key, files, row, wall, state_loss_note(result.state), cpu, kept[0] if kept else None)
    finally:
        torch.set_num_threads(before)


def units_of(cell: int, scn: Scenario, out: Path, every: str | None, verify: bool,
             estimate: float, wall: float | None = None) -> list[Unit]:
    """Every unit of one result folder's scenario, in the folder's order (seeds, then entries); ``wall``: wall seconds
    between the checkpoints of each run that can be checkpointed (:meth:`Scenario.checkpointable`)."""
    text = scenario_mod.dump(scn)
    threads, workers = unit_threads(scn), pinned_workers(scn)
    return [Unit(cell, index, run_name(config), seed, text, str(out.absolute()), threads, workers, every,
                 wall if scn.checkpointable(index) else None, verify, allow_imports=imports_allowed(),
                 trusted=trusted(), estimate=estimate)
            for seed in scn.seeds for index, config in enumerate(scn.algorithms)]
