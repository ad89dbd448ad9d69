"""``simfl sweep``: run every cell of a scenario's ``sweep:`` grid, times its seeds, resumably.

A *cell* is one point of the grid and one seed. It is an ordinary scenario
(the grid values set, ``seeds: [k]``, name ``<scenario>[<key>=<value>,...]``)
and gets an ordinary result folder ``<out>/<cell name>/`` (scenario.yaml,
summary.csv, accuracy.png, per-run metrics.csv and events.csv), written in
``<cell name>.partial`` and renamed into place when complete.

Resume rule: a cell is finished exactly when its folder ``<out>/<cell name>``
exists, because only a completed cell is ever renamed to that name. A second
``simfl sweep`` of the same scenario into the same folder skips finished cells
and (re)runs the others; a ``.partial`` folder of a killed sweep is continued
(its finished runs kept) when it holds this cell's scenario and bookkeeping, and
started afresh otherwise. ``<out>/sweep.yaml`` keeps the swept scenario; resuming with a
different one is refused, so finished cells always belong to the grid asked for.

Cell names: ``<key>=<value>`` for each swept key, then ``seed=<k>``, joined by
``__``, e.g. ``latency=lognormal__alpha=0.1__seed=0``. A key is shown by the
shortest tail of its dotted path that is unique among the swept keys
(``data.partition.alpha`` -> ``alpha``); a mapping value by its ``model``,
``name``, ``kind`` or ``dataset`` entry; a short list of scalars by its items
joined with ``-``; anything else (or values whose labels would collide) by its
position ``v<i>``. A name longer than :data:`CELL_BYTES` bytes is cut and ends in ``~``
and a hash of the whole name (``...~3f2a9c0d1b7e__seed=0``); ``<out>/cells.csv``
is the readable index of every cell: its folder, scenario name, seed and swept values.

The answer: once every cell is finished, each grid point's seeds are compared
(:mod:`simfl.output.comparison`, the target and baseline of the scenario's ``eval``) and
``<out>/comparison.csv`` (one row per grid point and entry, the swept keys and the point's scenario
name as the first columns), ``<out>/comparison.md`` and ``<out>/sweep.png`` (per grid point and its target, each
entry's time to target over the baseline's and its final accuracy, with intervals, and what the point's
comparison names fastest: the entry, ``level`` or ``not clear``, by :mod:`simfl.output.comparison`'s
one rule) are written.

Sequential seeds (``seeds: {first: 3, most: 9}``): each grid point is its own plan. Every point's cells of its
first batch run, then each point's seeds so far are compared and put to the rule :func:`simfl.launch.runner.seeds_after`
(the one ``simfl run`` follows for its folder): a settled point, or one at the most, stops, the others run their next
batch, until none is open (:func:`_looks`). The looks are replayed from the cells' folders on a resume; comparison.csv
then has each point's ``seeds`` and ``stopped``, and cells.csv the cells of every point's looks.

Every (cell, entry, seed) run is one unit (:mod:`simfl.launch.units`): units run one after
another in this process, in ``workers`` spawned processes, or as Ray tasks on a local
instance or an existing cluster (``ray_address``) that needs no shared file system; a
cell is published as soon as its last unit ends (:mod:`simfl.launch.runner`). A cell killed
mid-way keeps its staging folder: its finished runs are kept and the rest run again.
"""

from __future__ import annotations

import copy
import hashlib
import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from simfl import outdir
from simfl.errors import InputError
from simfl.launch.checkpoint import WALL_DEFAULT
from simfl.launch.experiment import Engine
from simfl.launch.runner import Launch, Target, comparison_of, run_targets, seeds_after, staged_target, workers_for
from simfl.outdir import CELLS_FILE, SWEEP_FILE
from simfl.output import comparison as comparing
from simfl.output.comparison import Comparison
from simfl.schema import scenario as scenario_mod
from simfl.schema.scenario import Scenario, SeedPlan

FIGURE_FILE = "sweep.png"
_LABEL_KEYS = ("model", "name", "kind", "dataset")
CELL_BYTES = 200
"""Longest cell folder name; a longer one is cut and ends in ``~<hash>`` (cells.csv has the values)."""
GROUP_BYTES = 240
"""Longest cell scenario name (the same rule)."""


@dataclass(frozen=True)
class Cell:
    """One grid point and one seed: a complete scenario with its own result folder."""

    name: str
    """Folder name under the sweep's output folder."""
    group: str
    """Scenario name of the cell: the grid point without the seed (seeds of a group are compared together)."""
    seed: int
    values: dict[str, Any]
    """The swept value of each key."""
    labels: dict[str, str]
    """How each swept value is shown (its label in the cell's name)."""
    raw: dict[str, Any]
    """The raw scenario mapping of the cell (validated before any cell runs)."""
    base: Path
    """Folder of the scenario file: relative data paths are resolved against it."""

    def scenario(self) -> Scenario:
        """The validated scenario of this cell, data paths resolved."""
        scn = scenario_mod.validate(self.raw, where=f"sweep cell {self.name}")
        return scenario_mod.resolve_paths(scn, self.base)

    def point(self, seeds: Any, look: int | None = None) -> Scenario:
        """The scenario of this cell's grid point with the sweep's ``seeds`` as written (a list, or a plan of sequential
        seeds, then at its ``look``: the seeds run so far), data paths resolved: what the point's comparison is of."""
        scn = scenario_mod.validate({**self.raw, "seeds": copy.deepcopy(seeds)}, where=f"sweep point {self.group}")
        if look is not None and scn.seed_plan is not None:
            scn.look_at(look)
        return scenario_mod.resolve_paths(scn, self.base)


@dataclass
class SweepOutcome:
    """What one ``simfl sweep`` call did, and the comparison of each grid point (its swept values, as
    comparison.csv's columns hold them, and the comparison of its seeds)."""

    out: Path
    cells: list[Cell]
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    comparisons: list[tuple[dict[str, Any], Comparison]] = field(default_factory=list)

    def verdicts(self) -> str:
        """One line per grid point: its swept values and its verdict."""
        return "\n".join(f"{c.name}: {c.verdict}" for _, c in self.comparisons)


# -- planning ------------------------------------------------------------------


def _key_labels(keys: Sequence[str]) -> dict[str, str]:
    """The shortest dotted tail of each key that is unique among ``keys``."""
    parts = {k: [p for p in scenario_mod.parse_path(k) if not p.isdigit()] for k in keys}
    labels: dict[str, str] = {}
    for key in keys:
        for n in range(1, len(parts[key]) + 1):
            tail = ".".join(parts[key][-n:])
            if all(".".join(parts[o][-n:]) != tail for o in keys if o != key):
                labels[key] = tail
                break
        else:
            labels[key] = ".".join(parts[key]) or key
    return labels


def _value_label(value: Any, index: int) -> str:
    """A short file-name-safe label of one swept value."""
    if isinstance(value, Mapping):
        text = next((str(value[k]) for k in _LABEL_KEYS if k in value), f"v{index}")
    elif isinstance(value, list) and 0 < len(value) <= 6 and all(isinstance(v, int | float | str) for v in value):
        text = "-".join(str(v) for v in value)
    elif isinstance(value, bool | int | float | str) or value is None:
        text = str(value)
    else:
        text = f"v{index}"
    text = re.sub(r"[^A-Za-z0-9._+-]+", "-", text).strip("-.")[:40]
    return text or f"v{index}"


def _value_labels(values: Sequence[Any]) -> list[str]:
    labels = [_value_label(v, i) for i, v in enumerate(values)]
    if len(set(labels)) != len(labels):
        labels = [f"{label}-v{i}" for i, label in enumerate(labels)]
    return labels


def plan(path: str | Path, overrides: Iterable[str] = (), max_memory: int | None = None,
         max_hours: float | None = None
         ) -> tuple[dict[str, Any], list[Cell]]:
    """Read and check a scenario file; returns its raw mapping and every cell, grid-major then seed.

    A scenario without ``sweep:`` gives one cell per seed. Every grid point's estimate is
    checked against the limits of :mod:`simfl.schema.limits` (memory: ``max_memory``).
    """
    path = Path(path)
    scenario_mod.load(path, overrides)  # validates the scenario and every grid cell
    raw = scenario_mod.read_yaml(path)
    for text in overrides:
        scenario_mod.apply_override(raw, text)
    return raw, plan_raw(raw, path.parent, str(path), max_memory, max_hours)


def plan_raw(raw: Mapping[str, Any], base: Path, where: str = "scenario", max_memory: int | None = None,
             max_hours: float | None = None
             ) -> list[Cell]:
    """Every cell of a raw scenario mapping, grid-major then seed; relative data paths are against ``base``."""
    from simfl.schema import estimate, limits

    base_scn = scenario_mod.validate(raw, where=where)
    seed_plan = base_scn.seed_plan  # sequential seeds: every cell a plan may run, each point's looks decide which
    seeds = base_scn.seeds if seed_plan is None else seed_plan.seeds(seed_plan.most)
    sweep: dict[str, list[Any]] = raw.get("sweep") or {}
    points = scenario_mod.sweep_cells(raw, where=where) if sweep else [({}, dict(raw))]
    key_labels = _key_labels(list(sweep))
    value_labels = {k: dict(zip(map(_fingerprint, v), _value_labels(v), strict=True)) for k, v in sweep.items()}
    cells: list[Cell] = []
    for values, cell_raw in points:
        pairs = [f"{key_labels[k]}={value_labels[k][_fingerprint(v)]}" for k, v in values.items()]
        group = _fit(f"{base_scn.name}[{','.join(pairs)}]", GROUP_BYTES) if pairs else base_scn.name
        point = scenario_mod.validate(cell_raw, where=f"sweep cell {group}")
        limits.check(estimate.estimate(point), max_memory or limits.default_max_memory(), f"sweep cell {group}",
                     max_hours)
        for seed in seeds:
            one = {k: v for k, v in cell_raw.items() if k != "sweep"}
            one["name"] = group
            one["seeds"] = [seed]
            name = _fit("__".join(pairs), CELL_BYTES - len(f"__seed={seed}")) + f"__seed={seed}" if pairs else f"seed={seed}"
            labels = {k: value_labels[k][_fingerprint(v)] for k, v in values.items()}
            cells.append(Cell(name, group, seed, values, labels, one, base))
    names = [c.name for c in cells]
    if len(set(names)) != len(names):  # pragma: no cover - labels are made unique per key above
        raise InputError(where, "sweep: two cells got the same folder name")
    return cells


def _fit(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` UTF-8 bytes, else its start, ``~`` and a hash of the whole."""
    if len(text.encode()) <= limit:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    head = text.encode()[: limit - len(digest) - 1].decode("utf-8", "ignore")
    return f"{head}~{digest}"


def _fingerprint(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=True)


# -- one cell's result folder -------------------------------------------------------------


def cell_target(cell: Cell, out: Path, wall: float | None = WALL_DEFAULT) -> Target:
    """The result folder of ``cell`` (:func:`~simfl.launch.runner.staged_target`), its runs checkpointing every
    ``wall`` seconds of wall time (None: not)."""
    return staged_target(cell.scenario(), out / cell.name, cell.name, checkpoint_wall=wall)


# -- the sweep ----------------------------------------------------------------------------


def _prepare(out: Path, raw: Mapping[str, Any], cells: Sequence[Cell]) -> None:
    """Create ``out`` with sweep.yaml and cells.csv, or check that it holds this same sweep."""
    text = yaml.safe_dump(dict(raw), sort_keys=False)
    outdir.check_path(out)
    if out.exists() and not out.is_dir():
        raise InputError(str(out), "exists and is not a folder")
    existing = out / SWEEP_FILE
    if existing.is_file():
        try:
            same = existing.read_bytes() == text.encode()
        except OSError as exc:
            raise InputError(str(existing), f"cannot be read ({exc.strerror or exc})") from None
        if not same:
            raise InputError(str(out), f"holds a different sweep ({SWEEP_FILE} differs); use another --out "
                             "or remove the folder to start over")
    elif out.is_dir() and any(p for p in out.iterdir() if not p.name.endswith(".partial")):
        raise InputError(str(out), f"folder exists, is not empty and holds no {SWEEP_FILE}; use another --out")
    if not out.is_dir():
        outdir.make_dir(out)
    tmp = existing.with_name(SWEEP_FILE + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, existing)
    write_cells(out, cells)


def write_cells(out: Path, cells: Sequence[Cell]) -> None:
    """cells.csv: the readable index of ``cells`` (with sequential seeds, those of each point's looks so far)."""
    from simfl.output.results import write_csv

    keys = list(cells[0].values) if cells else []
    rows = [{"cell": c.name, "scenario": c.group, "seed": c.seed,
             **{k: scenario_mod.short_value(c.values[k]) for k in keys}} for c in cells]
    write_csv(out / CELLS_FILE, ["cell", "scenario", "seed", *keys], rows)


def run_sweep(
    path: str | Path | Mapping[str, Any],
    out: Path | None = None,
    overrides: Iterable[str] = (),
    workers: int | None = None,
    on_published: Callable[[str], None] | None = None,
    log: Callable[[str], None] | None = None,
    ray_address: str | None = None,
    base: Path | None = None,
    max_memory: int | None = None,
    quiet: bool = False,
    max_hours: float | None = None,
    checkpoint_wall: float | None = WALL_DEFAULT,
    clock: Engine = "auto",
) -> SweepOutcome:
    """Run every unfinished cell of the scenario's sweep into ``out`` (default ``runs/<name>-sweep``).

    ``path`` is a scenario file, or a raw scenario mapping whose relative data paths are
    relative to ``base`` (default: the working folder).

    Parameters
    ----------
    workers
        Runs side by side in worker processes (1: in this process, one after another; None: as many
        as the cores allow, see :func:`simfl.launch.runner.workers_for`).
    on_published
        Called with a cell's name in this process after its folder is published.
    log
        Receives the progress lines (default: stderr); ``quiet`` keeps only the first.
    ray_address
        Run the units as Ray tasks instead: ``"local"`` starts a local Ray instance, anything else
        is the address of an existing cluster; its nodes need no access to ``out``.
    checkpoint_wall
        Wall seconds between the checkpoints of each run under way (None: none): the same sweep started
        again goes on from them.
    clock
        The clock every run is simulated on (``--clock``): ``simpy``, ``heap`` or ``auto``; the same numbers on all.
    """
    overrides = list(overrides)
    if isinstance(path, Mapping):
        raw = copy.deepcopy(dict(path))
        for text in overrides:
            scenario_mod.apply_override(raw, text)
        cells = plan_raw(raw, base if base is not None else Path.cwd(), max_memory=max_memory, max_hours=max_hours)
    else:
        raw, cells = plan(path, overrides, max_memory, max_hours)
    out = Path(out) if out is not None else outdir.default_out(raw["name"], sweep=True)
    say = log if log is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    scenarios = [c.scenario() for c in cells]
    count = workers_for(workers, scenarios, len(cells) * max((len(s.algorithms) for s in scenarios), default=1),
                        ray=ray_address is not None)
    with outdir.hold(out):
        return _sweep_into(out, raw, cells, count, ray_address, quiet, say, on_published, checkpoint_wall, clock)


def _sweep_into(out: Path, raw: Mapping[str, Any], cells: Sequence[Cell], count: int, ray_address: str | None,
                quiet: bool, say: Callable[[str], None], on_published: Callable[[str], None] | None,
                wall: float | None, clock: Engine = "auto") -> SweepOutcome:
    """Run the unfinished cells into ``out``, which this command holds (with sequential seeds, look by look:
    :func:`_looks`)."""
    plan = _seed_plan(raw)
    looks = {c.group: plan.first for c in cells} if plan is not None else {}
    chosen = _in_looks(cells, raw, looks)
    _prepare(out, raw, chosen)
    done = {c.name for c in cells if (out / c.name).is_dir()}
    outcome = SweepOutcome(out, list(chosen))
    launch = Launch(count, ray_address, quiet=quiet, say=say, clock=clock)

    def published(target: Target) -> None:
        outcome.ran.append(target.label)
        if on_published is not None:
            on_published(target.label)

    def run(now: Sequence[Cell]) -> None:
        targets = [cell_target(c, out, wall) for c in now if not (out / c.name).is_dir()]
        if targets:
            run_targets(targets, launch, published)

    skipped = [c.name for c in chosen if c.name in done]
    if skipped:
        say(f"{len(skipped)} of {len(chosen)} cells{' of the first look' if plan is not None else ''} already finished "
            f"in {out}; skipping them")
    if plan is None:
        run(chosen)
    else:
        chosen = _looks(out, raw, cells, looks, run)
        write_cells(out, chosen)
    outcome.cells = list(chosen)
    outcome.skipped = [c.name for c in chosen if c.name in done]
    outcome.comparisons = write_comparison(out, raw, chosen)
    return outcome


def _seed_plan(raw: Mapping[str, Any]) -> SeedPlan | None:
    """The sweep's plan of sequential seeds (``seeds: {first: ..., most: ...}``), None for a list."""
    seeds = raw.get("seeds")
    return SeedPlan.model_validate(seeds) if isinstance(seeds, Mapping) else None


def _in_looks(cells: Sequence[Cell], raw: Mapping[str, Any], looks: Mapping[str, int]) -> list[Cell]:
    """The cells of each grid point's seeds so far (``looks``: how many per point); every cell without a plan."""
    plan = _seed_plan(raw)
    if plan is None:
        return list(cells)
    return [c for c in cells if c.seed in plan.seeds(looks[c.group])]


def _looks(out: Path, raw: Mapping[str, Any], cells: Sequence[Cell], looks: dict[str, int],
           run: Callable[[Sequence[Cell]], None]) -> list[Cell]:
    """Sequential seeds in a sweep: each grid point is its own plan. Every open point's cells of its look run
    (``run``), then each point's seeds so far, its cells' runs pooled, are put to the one rule of
    :func:`simfl.launch.runner.seeds_after`: a point whose comparison is settled, or at the most, stops; the others
    run their next batch, until none is open. Decisions read only finished cells' files, so the workers and a resume
    (which replays the looks from the folders) give the same cells. Returns the cells of every point's last look."""
    open_ = list(dict.fromkeys(c.group for c in cells))
    while open_:
        run([c for c in _in_looks(cells, raw, looks) if c.group in open_])
        still = []
        for group in open_:
            members = [c for c in _in_looks(cells, raw, looks) if c.group == group]
            scn = members[0].point(raw["seeds"], looks[group])
            after = seeds_after(scn, point_runs(out, scn, members))
            if after is not None:
                looks[group] = after
                still.append(group)
        open_ = still
    return _in_looks(cells, raw, looks)


def point_runs(out: Path, scn: Scenario, members: Sequence[Cell]) -> dict[tuple[str, int], Any]:
    """A grid point's runs, pooled from its finished cells' folders: each entry's metrics per seed."""
    from simfl.algorithms.configs import run_name
    from simfl.output.results import read_metrics

    return {(run_name(a), c.seed): read_metrics(out / c.name, run_name(a), c.seed)
            for c in members for a in scn.algorithms}


def column_value(value: Any) -> Any:
    """A swept value as a table cell: scalars as they are, anything else in its short one-line form."""
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return scenario_mod.short_value(value)


def write_comparison(out: Path, raw: Mapping[str, Any], cells: Sequence[Cell]) -> list[tuple[dict[str, Any], Comparison]]:
    """Compare the seeds of each grid point (its finished cells' runs) and write comparison.csv, comparison.md and
    sweep.png into the sweep folder ``out``; returns each point's swept values and comparison."""
    from simfl.output.plots import write_sweep_figure

    points: dict[str, list[Cell]] = {}
    for cell in cells:
        points.setdefault(cell.group, []).append(cell)
    keys = list(raw.get("sweep") or {})
    items: list[tuple[dict[str, Any], Comparison]] = []
    labels: list[str] = []
    planned = _seed_plan(raw) is not None
    for group, members in points.items():
        # with sequential seeds, the point's plan at its last look: the time ratios' intervals of its looks, and why
        # its seeds stopped (comparison.csv's stopped column), as a folder of simfl run has them
        scn = members[0].point(raw["seeds"], len(members)) if planned else members[0].scenario()
        items.append(({"scenario": group, **{k: column_value(members[0].values[k]) for k in keys}},
                      comparison_of(scn, point_runs(out, scn, members), group)))
        shown = members[0].labels
        labels.append(shown[keys[0]] if len(keys) == 1 else "\n".join(f"{k}={shown[k]}" for k in keys))
    comparing.write(out, items)
    key = keys[0] if len(keys) == 1 else ", ".join(keys) if keys else "seeds"
    question = f"where does each rule reach the target first? ({key})" if keys else "which rule reaches the target first?"
    axis = "; ".join(key_words(k) for k in keys) if keys else "the scenario (no swept key)"
    write_sweep_figure(list(zip(labels, (c for _, c in items), strict=True)), axis, f"{raw['name']}: {question}",
                       outdir.writable(out, FIGURE_FILE))
    return items


def key_words(key: str) -> str:
    """A swept key as an axis names it: the key in words, then the key itself (``train.epochs`` -> ``train epochs
    (train.epochs)``, ``algorithms[0].beta`` -> ``beta of entry 0 (algorithms[0].beta)``)."""
    parts = [p.replace("_", " ") for p in scenario_mod.parse_path(key)]
    if len(parts) >= 3 and parts[0] == "algorithms":
        words = f"{' '.join(parts[2:])} of entry {parts[1]}"
    else:
        words = " ".join(parts)
    return key if words == key else f"{words} ({key})"
