"""The Python API: run a scenario or a sweep from code and get tidy tables back.

``simfl.run`` and ``simfl.sweep`` do what ``simfl run`` and ``simfl sweep`` do (the
same result folders, the same numbers) and then read the folders into a
:class:`Results`: ``summary`` (one row per run), ``metrics`` and ``events`` (one row
per run and metrics/events row), each with ``algorithm`` and ``seed`` columns and,
for a sweep, a ``cell`` column and one column per swept key; and the answer: ``comparison`` (comparison.csv,
one row per entry, or per grid point and entry for a sweep: final and best accuracy, time to target and its
ratio to the baseline, with 95% intervals over seeds) and ``verdict``, the same in words.

A scenario is a mapping (as in a YAML file), a validated :class:`~simfl.schema.scenario.Scenario`
or the path of a YAML file. Without ``out`` the results go to a new temporary folder.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml
from matplotlib.axes import Axes

from simfl import outdir
from simfl.errors import InputError
from simfl.launch import arguments
from simfl.launch.checkpoint import WALL_DEFAULT
from simfl.names import allowing_imports
from simfl.schema import estimate, limits, plugins
from simfl.schema import scenario as scenario_mod
from simfl.schema.scenario import Scenario

if TYPE_CHECKING:
    from simfl.launch.experiment import Engine

ScenarioLike = Mapping[str, Any] | Scenario | str | Path


@dataclass(frozen=True)
class Results:
    """Tidy tables of one or more result folders, and a figure of them."""

    out: Path
    """The result folder (of a run) or the sweep folder."""
    summary: pd.DataFrame
    """One row per (algorithm label, seed[, sweep cell]): final and best accuracy, updates, virtual time,
    wall seconds and time to target (the columns of summary.csv)."""
    metrics: pd.DataFrame
    """One row per evaluation of every run (the rows of each metrics.csv) with ``algorithm`` and ``seed``
    columns (and the swept keys)."""
    events: pd.DataFrame
    """One row per processed update, failure, departure, late update or return of every run (the rows of
    each events.csv) with ``algorithm`` and ``seed`` columns (and the swept keys)."""
    keys: tuple[str, ...] = ()
    """The swept keys' columns in every table (the key, or ``sweep.<key>`` where the key is also a
    column name of the tables, e.g. ``sweep.latency``); empty for a single run."""
    comparison: pd.DataFrame = field(default_factory=pd.DataFrame)
    """comparison.csv: one row per entry (per grid point and entry for a sweep, the swept keys as columns): final and
    best accuracy, time to target and its ratio to the baseline, each with its 95% interval over seeds (the
    ``_low``/``_high`` columns; NaN with one seed), seeds that reached the target, and which entry is fastest and
    most accurate (:mod:`simfl.output.comparison` states the rules)."""
    verdict: str = ""
    """The answer in words, one line (for a sweep, one per grid point): who reaches the target first, by how much
    and how sure; who ends most accurate."""

    def plot(self, ax: Axes | None = None) -> Axes:
        """Accuracy vs virtual time on ``ax`` (default: the current pyplot axes), one line per
        algorithm (and sweep cell) with the mean and its 95% interval over seeds."""
        from simfl.output.plots import band_title, draw

        if ax is None:
            import matplotlib.pyplot as plt

            ax = plt.gca()
        runs: dict[tuple[str, int], pd.DataFrame] = {}
        by = ["algorithm", *self.keys, "seed"]
        for values, frame in self.metrics.groupby(by, sort=False):
            *label_parts, seed = values if isinstance(values, tuple) else (values,)
            label = " ".join(str(v) for v in label_parts)
            runs[(label, int(seed))] = frame.reset_index(drop=True)
        draw(ax, runs)
        ax.set_ylabel("test accuracy")
        ax.legend(frameon=False, title=band_title(runs))
        return ax


    def timeline(self, entry: str | None = None, seed: int | None = None) -> pd.DataFrame:
        """One run's schedule (default: the first entry's first seed): a row per interval a client spent computing,
        waiting, failed, cut short or absent, with ``client``, ``state``, ``start`` and ``end`` in virtual seconds
        (:func:`simfl.output.timeline.spans`; ``simfl timeline DIR`` draws it)."""
        from simfl.output.timeline import read_spans

        return read_spans(self.out, entry, seed, lambda s: followed_absences(self.out, s)).spans


def followed_absences(folder: Path, seed: int) -> list[Sequence[tuple[float, float | None]]] | None:
    """Per client, its absences in the run of ``seed`` in the result folder ``folder`` as its scenario.yaml gives
    them (:meth:`simfl.schema.scenario.Scenario.absences`); None where that cannot be read without running anything (a
    plugin's model, data that decides the number of clients, a missing or unreadable scenario.yaml)."""
    path = folder / "scenario.yaml"
    if not path.is_file():
        return None
    try:
        scn = scenario_mod.load(path)
        clients = scn.stated_clients()
        return None if clients is None else scn.absences(clients, seed)
    except (InputError, ValueError, OSError):
        return None


def population(folder: Path) -> int | None:
    """The number of clients the result folder's scenario states (None: it states none, or cannot be read)."""
    try:
        return scenario_mod.load(folder / "scenario.yaml").stated_clients()
    except (InputError, ValueError, OSError):
        return None


def _raw(scenario: ScenarioLike) -> tuple[dict[str, Any], Path, str]:
    """The raw mapping of a scenario, the folder its relative data paths are relative to, and its name in messages."""
    if isinstance(scenario, Scenario):
        return yaml.safe_load(scenario_mod.dump(scenario)), Path.cwd(), "scenario"
    if isinstance(scenario, Mapping):  # held to a YAML file's limits by arguments.read
        return copy.deepcopy(dict(scenario)), Path.cwd(), "scenario"
    path = Path(scenario)
    return scenario_mod.read_yaml(path), path.parent, str(path)


def _prepared(scenario: ScenarioLike, overrides: Iterable[str], seeds: Sequence[int] | None) -> tuple[dict[str, Any], Path]:
    raw, base, _ = _raw(scenario)
    return _overridden(raw, overrides, seeds), base


def _overridden(raw: dict[str, Any], overrides: Iterable[str], seeds: Sequence[int] | None) -> dict[str, Any]:
    """``raw`` with plugin classes as import paths, the overrides and the seeds applied."""
    raw = plugins.normalize(raw)  # component classes given as objects become import paths
    for text in overrides:
        scenario_mod.apply_override(raw, text)
    if seeds is not None:
        raw["seeds"] = list(seeds)
    return raw


def _out(out: str | Path | None, name: str) -> Path:
    return Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="simfl-")) / name


def read_folder(folder: Path, extra: Mapping[str, Any] | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """summary, metrics and events of one result folder; ``extra`` columns are added after algorithm and seed."""
    extra = dict(extra or {})
    summary = pd.read_csv(folder / "summary.csv")
    metrics: list[pd.DataFrame] = []
    events: list[pd.DataFrame] = []
    for algorithm, seed in zip(summary["algorithm"], summary["seed"], strict=True):
        run = folder / str(algorithm) / f"seed{seed}"
        for frames, name in ((metrics, "metrics.csv"), (events, "events.csv")):
            frame = pd.read_csv(run / name)
            frames.append(pd.concat([pd.DataFrame({"algorithm": algorithm, "seed": seed, **extra},
                                                  index=frame.index), frame], axis=1))
    for key, value in reversed(extra.items()):
        summary.insert(2, key, value)
    return summary, pd.concat(metrics, ignore_index=True), pd.concat(events, ignore_index=True)


def run(
    scenario: ScenarioLike,
    out: str | Path | None = None,
    *,
    seeds: Sequence[int] | None = None,
    overrides: Iterable[str] = (),
    force: bool = False,
    workers: int | None = None,
    ray: str | None = None,
    quiet: bool | None = None,
    allow_imports: bool = False,
    checkpoint_wall: float | None = WALL_DEFAULT,
    clock: Engine = "auto",
) -> Results:
    """Run every algorithm and seed of ``scenario`` into ``out`` (as ``simfl run``) and read the results.

    ``overrides`` are ``KEY=VALUE`` strings as for ``--set``; ``seeds`` replaces the scenario's seeds.
    ``workers`` and ``ray`` are ``--workers`` and ``--ray`` (default: runs side by side on this machine's
    cores). ``quiet``: False shows the progress bar (in a notebook, a notebook bar) and a line per finished run,
    True nothing; None (the default) shows them where a person watches (a terminal, a notebook) and not in CI
    jobs (the ``CI`` environment variable) or when stderr is a pipe or a file (:func:`simfl.launch.progress.watched`).
    ``allow_imports`` lets the scenario name components by import path (``--allow-imports``; classes passed as
    objects need no permission). ``checkpoint_wall``: wall seconds between the checkpoints of each run under way
    (``--checkpoint-wall``; None: none), from which ``simfl run --resume OUT`` goes on after an interrupt.
    ``clock`` is ``--clock``: ``"simpy"`` or ``"heap"`` simulates every run on that clock (the same numbers on
    both, so one can be checked against the other), ``"auto"`` the heap clock in pure-latency mode, else SimPy's.
    """
    quiet = _quiet(quiet)
    given = arguments.read(scenario, out, seeds, overrides, workers, ray,
                           {"force": force, "quiet": quiet, "allow_imports": allow_imports}, clock=clock)
    wall = arguments.interval(checkpoint_wall, "checkpoint_wall")
    with allowing_imports(allow_imports):
        return _run(given.scenario, out, given.seeds, given.overrides, force, workers, ray, quiet, wall, clock)


def _quiet(quiet: bool | None) -> bool:
    """``quiet`` as given, or for None whether nobody watches (:func:`simfl.launch.progress.watched`)."""
    if quiet is None:
        from simfl.launch.progress import watched

        return not watched()
    if not isinstance(quiet, bool):
        raise TypeError(f"quiet must be True, False or None (shown where a person watches), got {arguments.kind(quiet)}")
    return quiet


def _run(scenario: ScenarioLike, out: str | Path | None, seeds: Sequence[int] | None, overrides: Iterable[str],
         force: bool, workers: int | None, ray: str | None, quiet: bool, wall: float | None, clock: Engine) -> Results:
    from simfl.launch.runner import Launch, fresh_target, run_targets, workers_for

    raw, base, name = _raw(scenario)  # a file's mistakes name the file, as `simfl run` does
    raw = _overridden(raw, overrides, seeds)
    raw.pop("sweep", None)
    scn = scenario_mod.resolve_paths(scenario_mod.validate(raw, name), base)
    est = estimate.estimate(scn)
    limits.check(est, limits.default_max_memory(), f"{name}: estimate")  # as `simfl run`
    count = workers_for(workers, [scn], len(scn.algorithms) * len(scn.seeds), ray=ray is not None)
    limits.check_disk(est, Path(out) if out is not None else Path(tempfile.gettempdir()) / scn.name,
                        f"{name}: estimate", count)  # before a temporary folder is made
    where = _out(out, scn.name)
    with outdir.hold(where):
        target = fresh_target(scn, where, force=force, wall=wall)
        done = run_targets([target], Launch(count, ray, quiet=quiet, clock=clock))[0]
    return Results(done.out, *read_folder(done.out), comparison=pd.read_csv(done.out / "comparison.csv"),
                   verdict=done.comparison.verdict)


def sweep(
    scenario: ScenarioLike,
    over: Mapping[str, Sequence[Any]] | None = None,
    out: str | Path | None = None,
    *,
    seeds: Sequence[int] | None = None,
    overrides: Iterable[str] = (),
    workers: int | None = None,
    ray: str | None = None,
    quiet: bool | None = None,
    allow_imports: bool = False,
    checkpoint_wall: float | None = WALL_DEFAULT,
    clock: Engine = "auto",
) -> Results:
    """Run every cell of a sweep (as ``simfl sweep``, resumable in ``out``) and read the results.

    ``over`` maps dotted keys to the values to try (``{"data.partition.alpha": [0.1, 1.0]}``);
    it replaces the scenario's own ``sweep:`` block when given. ``quiet``, ``allow_imports``, ``clock`` and
    ``checkpoint_wall`` as for :func:`run`: the same call again goes on from each unfinished run's checkpoint.
    """
    quiet = _quiet(quiet)
    given = arguments.read(scenario, out, seeds, overrides, workers, ray, {"quiet": quiet, "allow_imports": allow_imports},
                           over=over, clock=clock)
    wall = arguments.interval(checkpoint_wall, "checkpoint_wall")
    with allowing_imports(allow_imports):
        return _sweep(given.scenario, given.over, out, given.seeds, given.overrides, workers, ray, quiet, wall, clock)


def _sweep(scenario: ScenarioLike, over: Mapping[str, Sequence[Any]] | None, out: str | Path | None,
           seeds: Sequence[int] | None, overrides: Iterable[str], workers: int | None, ray: str | None,
           quiet: bool, wall: float | None, clock: Engine) -> Results:
    from simfl.launch.grid import column_value, run_sweep

    raw, base = _prepared(scenario, overrides, seeds)
    if over is not None:
        raw["sweep"] = {key: list(values) for key, values in over.items()}
    outcome = run_sweep(raw, _out(out, f"{raw.get('name', 'scenario')}-sweep"), workers=workers, ray_address=ray,
                        log=(lambda line: None) if quiet else None, base=base, quiet=quiet, checkpoint_wall=wall,
                        clock=clock)
    swept = list(raw.get("sweep") or {})
    columns = {k: f"sweep.{k}" if k in _DATA_COLUMNS else k for k in swept}
    keys = tuple(columns.values())
    tables: list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]] = []
    for cell in outcome.cells:
        values = {columns[k]: column_value(cell.values[k]) for k in swept}
        tables.append(read_folder(outcome.out / cell.name, {"cell": cell.group, **values}))
    summary, metrics, events = (pd.concat(parts, ignore_index=True) for parts in zip(*tables, strict=True))
    return Results(outcome.out, summary, metrics, events, keys, pd.read_csv(outcome.out / "comparison.csv"),
                   outcome.verdicts())


@dataclass(frozen=True)
class Tuned:
    """What :func:`tune` leaves: the output folder, every trial (trials.csv) and the best configuration's file."""

    out: Path
    trials: pd.DataFrame
    best: Path
    """best.yaml: the scenario with each entry's best values and fresh seeds, for :func:`run` on the test set."""


def tune(
    scenario: ScenarioLike | None,
    out: str | Path | None = None,
    *,
    seeds: Sequence[int] | None = None,
    overrides: Iterable[str] = (),
    workers: int | None = None,
    ray: str | None = None,
    resume: bool = False,
    quiet: bool = True,
    allow_imports: bool = False,
) -> Tuned:
    """Tune each entry as ``simfl tune`` does (the scenario's ``tune:`` section; docs/fair-comparisons.md) and read
    the trials. ``resume=True`` continues the tune in ``out`` as it was started (``scenario`` None)."""
    from simfl.launch import tune as tuning

    if resume:
        if scenario is not None or seeds is not None or overrides:
            raise InputError("resume", "continues the tune in out as it was: give scenario=None, no seeds or overrides")
        if out is None:
            raise InputError("resume", "needs out, the folder of the tune to continue")
        with allowing_imports(allow_imports):
            outcome = tuning.tune(resume=Path(out), workers=workers, ray_address=ray, quiet=quiet,
                                  log=(lambda line: None) if quiet else None)
    else:
        given = arguments.read(scenario, out, seeds, overrides, workers, ray,
                               {"quiet": quiet, "allow_imports": allow_imports})
        with allowing_imports(allow_imports):
            raw, base = _prepared(given.scenario, given.overrides, given.seeds)
            outcome = tuning.tune(raw, _out(out, f"{raw.get('name', 'scenario')}-tune"), workers=workers,
                                  ray_address=ray, quiet=quiet, log=(lambda line: None) if quiet else None, base=base)
    trials = pd.read_csv(outcome.out / tuning.TRIALS_FILE)
    return Tuned(outcome.out, trials, outcome.out / tuning.BEST_FILE)


def _data_columns() -> frozenset[str]:
    from dataclasses import fields

    from simfl.output.results import SUMMARY_COLUMNS
    from simfl.sim.state import Event, Metric

    return frozenset([*SUMMARY_COLUMNS, *Event.columns(), *(f.name for f in fields(Metric)), "cell"])


_DATA_COLUMNS = _data_columns()
