"""The Python API: run a scenario or a sweep from code and get tidy tables back.

``simfl.run`` and ``simfl.sweep`` do what ``simfl run`` and ``simfl sweep`` do (the
same result folders, the same numbers) and then read the folders into a
:class:`Results`: ``summary`` (one row per run), ``metrics`` and ``events`` (one row
per run and metrics/events row), each with ``algorithm`` and ``seed`` columns and,
for a sweep, a ``cell`` column and one column per swept key.

A scenario is a mapping (as in a YAML file), a validated :class:`~simfl.schema.scenario.Scenario`
or the path of a YAML file. Without ``out`` the results go to a new temporary folder.
"""

from __future__ import annotations

import copy
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml
from matplotlib.axes import Axes

from simfl import outdir
from simfl.launch import arguments
from simfl.names import allowing_imports
from simfl.schema import estimate, plugins
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

    def plot(self, ax: Axes | None = None) -> Axes:
        """Accuracy vs virtual time on ``ax`` (default: the current pyplot axes), one line per
        algorithm (and sweep cell) with the mean and a min-max band over seeds."""
        from simfl.output.plots import draw

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
        ax.legend(frameon=False)
        return ax


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
    raw = plugins.normalize(raw)  # component classes given as objects become import paths
    for text in overrides:
        scenario_mod.apply_override(raw, text)
    if seeds is not None:
        raw["seeds"] = list(seeds)
    return raw, base


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
    quiet: bool = True,
    allow_imports: bool = False,
    clock: Engine = "auto",
) -> Results:
    """Run every algorithm and seed of ``scenario`` into ``out`` (as ``simfl run``) and read the results.

    ``overrides`` are ``KEY=VALUE`` strings as for ``--set``; ``seeds`` replaces the scenario's seeds.
    ``workers`` and ``ray`` are ``--workers`` and ``--ray`` (default: runs side by side on this machine's
    cores); ``quiet=False`` shows the progress bar and a line per finished run. ``allow_imports`` lets the
    scenario name components by import path (``--allow-imports``; classes passed as objects need no permission).
    ``clock`` is ``--clock``: ``"simpy"`` or ``"heap"`` simulates every run on that clock (the same numbers on
    both, so one can be checked against the other), ``"auto"`` the heap clock in pure-latency mode, else SimPy's.
    """
    given = arguments.read(scenario, out, seeds, overrides, workers, ray,
                           {"force": force, "quiet": quiet, "allow_imports": allow_imports}, clock=clock)
    with allowing_imports(allow_imports):
        return _run(given.scenario, out, given.seeds, given.overrides, force, workers, ray, quiet, clock)


def _run(scenario: ScenarioLike, out: str | Path | None, seeds: Sequence[int] | None, overrides: Iterable[str],
         force: bool, workers: int | None, ray: str | None, quiet: bool, clock: Engine) -> Results:
    from simfl.launch.runner import Launch, fresh_target, run_targets, workers_for

    raw, base = _prepared(scenario, overrides, seeds)
    raw.pop("sweep", None)
    scn = scenario_mod.resolve_paths(scenario_mod.validate(raw), base)
    est = estimate.estimate(scn)
    estimate.check(est, estimate.default_max_memory(), "scenario: estimate")  # as `simfl run`
    count = workers_for(workers, [scn], len(scn.algorithms) * len(scn.seeds), ray=ray is not None)
    estimate.check_disk(est, Path(out) if out is not None else Path(tempfile.gettempdir()) / scn.name,
                        "scenario: estimate", count)  # before a temporary folder is made
    where = _out(out, scn.name)
    with outdir.hold(where):
        target = fresh_target(scn, where, force=force)
        folder = run_targets([target], Launch(count, ray, quiet=quiet, clock=clock))[0].out
    return Results(folder, *read_folder(folder))


def sweep(
    scenario: ScenarioLike,
    over: Mapping[str, Sequence[Any]] | None = None,
    out: str | Path | None = None,
    *,
    seeds: Sequence[int] | None = None,
    overrides: Iterable[str] = (),
    workers: int | None = None,
    ray: str | None = None,
    quiet: bool = True,
    allow_imports: bool = False,
    clock: Engine = "auto",
) -> Results:
    """Run every cell of a sweep (as ``simfl sweep``, resumable in ``out``) and read the results.

    ``over`` maps dotted keys to the values to try (``{"data.partition.alpha": [0.1, 1.0]}``);
    it replaces the scenario's own ``sweep:`` block when given. ``allow_imports`` and ``clock`` as for :func:`run`.
    """
    given = arguments.read(scenario, out, seeds, overrides, workers, ray, {"quiet": quiet, "allow_imports": allow_imports},
                           over=over, clock=clock)
    with allowing_imports(allow_imports):
        return _sweep(given.scenario, given.over, out, given.seeds, given.overrides, workers, ray, quiet, clock)


def _sweep(scenario: ScenarioLike, over: Mapping[str, Sequence[Any]] | None, out: str | Path | None,
           seeds: Sequence[int] | None, overrides: Iterable[str], workers: int | None, ray: str | None,
           quiet: bool, clock: Engine) -> Results:
    from simfl.launch.grid import run_sweep

    raw, base = _prepared(scenario, overrides, seeds)
    if over is not None:
        raw["sweep"] = {key: list(values) for key, values in over.items()}
    outcome = run_sweep(raw, _out(out, f"{raw.get('name', 'scenario')}-sweep"), workers=workers, ray_address=ray,
                        log=(lambda line: None) if quiet else None, base=base, quiet=quiet, clock=clock)
    swept = list(raw.get("sweep") or {})
    columns = {k: f"sweep.{k}" if k in _DATA_COLUMNS else k for k in swept}
    keys = tuple(columns.values())
    tables: list[tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]] = []
    for cell in outcome.cells:
        values = {columns[k]: _column_value(cell.values[k]) for k in swept}
        tables.append(read_folder(outcome.out / cell.name, {"cell": cell.group, **values}))
    summary, metrics, events = (pd.concat(parts, ignore_index=True) for parts in zip(*tables, strict=True))
    return Results(outcome.out, summary, metrics, events, keys)


def _data_columns() -> frozenset[str]:
    from dataclasses import fields

    from simfl.output.results import SUMMARY_COLUMNS
    from simfl.sim.state import Event, Metric

    return frozenset([*SUMMARY_COLUMNS, *Event.columns(), *(f.name for f in fields(Metric)), "cell"])


_DATA_COLUMNS = _data_columns()


def _column_value(value: Any) -> Any:
    """A swept value as a table cell: scalars as they are, anything else in its short one-line form."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return scenario_mod.short_value(value)
