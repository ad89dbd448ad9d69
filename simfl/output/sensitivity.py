"""Reports across one setting (the paper's Figure 8): runs grouped by the value of one scenario key or entry option.

``simfl report DIR... --by KEY`` reads every result folder under the given folders and puts each run
(an entry and a seed) in the cell of its value of ``KEY``:

- a scenario path (``train.epochs``, ``latency.mean``, or a whole section, ``latency``) is read from the
  run's scenario; its value may be a number, a text, a list (``latency.seconds``) or a section, each
  cell named by its compact one-line form;
- another bare name (``beta``) is an option of the run's own entry; an entry without it (FedAvg has no
  ``beta``) does not depend on it, so its runs join every cell, as the paper draws FedAvg beside
  each beta.

Folders need not share a scenario name, so runs of another study with the same settings can fill a
cell (the main table's beta = 0.6, E = 5 runs); apart from ``KEY`` (and what :func:`report.pooled_settings`
ignores), every folder's settings must agree, or one line names the two folders and the first key
that differs. ``--as OLD=NEW`` reads the entry labelled OLD as NEW (``orthofl_chain=orthofl``: the main
table's labelled entry is the default reading).

Per cell the table is the paper's: accuracy at the budget and time to the target relative to the
baseline. The target is, by default, the paper's rule within each cell (95% of the lowest mean
accuracy there: its beta figure). ``--target-from VALUE`` takes the target of the cell ``VALUE`` for
every cell: the E figure's "relative time to reach 95% of FedAvg's target accuracy when E = 5" read as
that cell's target (95% of its lowest mean accuracy, FedAvg's there), and every time relative to the
baseline's time in that cell, the figure's one 1x (so a method at E = 1 is compared with FedAvg at
E = 5). Without it, relative time divides by the baseline's time in the same cell.
``sensitivity.png`` draws the two rows of Figure 8: accuracy per setting and relative time per
setting, one bar per method. ``comparison.csv`` has the key as its first column: each value's comparison
(:mod:`simfl.output.comparison`, its ratios paired by seed within the value).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from simfl.errors import InputError
from simfl.names import short_name
from simfl.outdir import name_problem
from simfl.output.comparison import Comparison
from simfl.output.report import (
    METRICS_KINDS,
    SUMMARY_KINDS,
    RunGroup,
    baseline_of,
    check_baseline,
    display_name,
    first_difference,
    group_comparison,
    group_table,
    is_missing,
    method_order,
    pooled_settings,
    result_scenario,
    shown_value,
)
from simfl.output.tables import read_table
from simfl.yamlsafe import short_value

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class Setting:
    """What ``--by``, ``--as`` and ``--target-from`` ask of a report."""

    key: str
    renames: Mapping[str, str]
    target_from: str | None = None
    option: bool = False
    """Whether ``key`` is an option of each run's entry (a bare name that is no top-level key of the scenarios),
    not a scenario path (:func:`load_cells` decides)."""


def parse_renames(pairs: Sequence[str]) -> dict[str, str]:
    """``["OLD=NEW", ...]`` as a mapping; one line for a malformed pair or a name a folder cannot hold."""
    out: dict[str, str] = {}
    for pair in pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise InputError("--as", f"{pair!r} is not OLD=NEW (e.g. orthofl_chain=orthofl)")
        for name in (old, new):
            problem = name_problem(name)
            if problem is not None:
                raise InputError("--as", f"{name!r}: {problem}")
        if old in out and out[old] != new:
            raise InputError("--as", f"{old!r} is renamed twice ({out[old]!r} and {new!r})")
        out[old] = new
    return out


def check_key(key: str) -> None:
    """A ``--by`` key is an option name or a dotted scenario path of names."""
    if not _KEY.match(key):
        raise InputError("--by", f"{key!r} is not a scenario path (train.epochs) or an entry option (beta)")


def _value(setting: Setting, scenario: Mapping[str, Any], entry: Mapping[str, Any] | None) -> Any:
    """The run's value of the key, whole (a list, a section), or None: the run does not depend on it."""
    if setting.option:
        return None if entry is None else entry.get(setting.key)
    node: Any = scenario
    for part in setting.key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _same(value: Any) -> str:
    """What two values of the key compare by (lists and sections hold no hash of their own)."""
    return yaml.safe_dump(value, sort_keys=True)


def _cell_name(key: str, value: Any) -> str:
    return f"{key}={_plain(value)}"


def _order(value: Any) -> tuple[int, float, str]:
    """Numbers ascending, then everything else by its text."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, _plain(value))


def load_cells(folders: Sequence[Path], setting: Setting) -> tuple[list[RunGroup], Setting]:
    """One :class:`RunGroup` per value of the key, in ascending order, runs without the key in every one; and the
    setting with whether its key is an entry option."""
    check_key(setting.key)
    scenarios = [result_scenario(folder) for folder in folders]
    setting = replace(setting, option="." not in setting.key and not any(setting.key in s for s in scenarios))
    reference: tuple[dict[str, Any], Path] | None = None
    runs: list[tuple[str, int, Any, Path, str]] = []  # (label, seed, value, folder, label on disk)
    kept: dict[Path, Mapping[str, Any]] = {}
    for folder, scenario in zip(folders, scenarios, strict=True):
        kept[folder] = scenario
        entries: dict[str, dict[str, Any]] = {}
        for entry in scenario.get("algorithms") or []:
            if isinstance(entry, dict):
                label = str(entry.get("label") or short_name(str(entry.get("name"))))
                entry["label"] = setting.renames.get(label, label)
                entries[label] = entry
        settings = pooled_settings(scenario, folder)
        _drop_key(settings, setting)
        if reference is None:
            reference = (settings, folder)
        else:
            differs = first_difference(reference[0], settings)
            if differs is not None:
                raise InputError(str(folder), f"its settings differ from those in {reference[1]} apart from "
                                 f"{setting.key} ({differs}: {shown_value(settings.get(differs))} vs "
                                 f"{shown_value(reference[0].get(differs))}), so its runs do not belong to one study")
        summary = read_table(folder / "summary.csv", SUMMARY_KINDS, "result rows")
        for algo, seed in zip(summary["algorithm"], summary["seed"], strict=True):
            on_disk = str(algo)
            problem = name_problem(on_disk)
            if problem is not None:
                raise InputError(str(folder / "summary.csv"), f"algorithm {problem}")
            label = setting.renames.get(on_disk, on_disk)
            runs.append((label, int(seed), _value(setting, scenario, entries.get(on_disk)), folder, on_disk))
    distinct = {_same(v): v for _, _, v, _, _ in runs if v is not None}
    values = sorted(distinct.values(), key=_order)
    if not values:
        where = "entry" if setting.option else "scenario"
        raise InputError("--by", f"no run's {where} sets {setting.key}: nothing to group by")
    if setting.target_from is not None and setting.target_from not in {_plain(v) for v in values}:
        raise InputError("--target-from", f"{setting.target_from!r} is not a value of {setting.key} here "
                         f"({', '.join(_plain(v) for v in values)})")
    cells = []
    for value in values:
        group = RunGroup(_cell_name(setting.key, value), [], pd.DataFrame(), {})
        for label, seed, v, folder, on_disk in runs:
            if v is not None and _same(v) != _same(value):
                continue
            if (label, seed) in group.metrics:
                raise InputError(str(folder), f"{label} seed {seed} at {group.name} is also in {group.folders[0]}")
            path = folder / on_disk / f"seed{seed}" / "metrics.csv"
            if not path.is_file():
                raise InputError(str(path), "missing (every summary.csv row needs its metrics.csv)")
            group.metrics[(label, seed)] = read_table(path, METRICS_KINDS, "evaluations")
            if folder not in group.folders:
                group.folders.append(folder)
                group.note(kept[folder], folder / "scenario.yaml")
        cells.append(group)
    return cells, setting


def _plain(value: Any) -> str:
    """A value as ``--target-from`` is written (``5``, ``0.2``; a list or section in its one-line form)."""
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | dict):
        return short_value(value)
    return str(value)


def _drop_key(settings: dict[str, Any], setting: Setting) -> None:
    """The settings apart from the key: the scenario path, or the option in every entry."""
    if setting.option:
        for key in [k for k in settings if k.startswith("algorithms[") and k.endswith(f"].{setting.key}")]:
            del settings[key]
    else:
        for key in [k for k in settings if k == setting.key or k.startswith(setting.key + ".")]:
            del settings[key]


def cell_tables(cells: Sequence[RunGroup], setting: Setting, baseline: str | None = None) -> list[pd.DataFrame]:
    """:func:`report.group_table` per cell, with the target of ``--target-from``'s cell when given."""
    if setting.target_from is None:
        return [group_table(c, baseline) for c in cells]
    source = group_table(next(c for c in cells if c.name == f"{setting.key}={setting.target_from}"), baseline)
    # the cell names are _cell_name's, which prints values as --target-from is matched (_plain)
    base = source.loc[source["algorithm"] == baseline_of(source), "time_to_target"]
    base_time = None if not len(base) or is_missing(base.iloc[0]) else float(base.iloc[0])
    return [group_table(c, baseline_of(source), float(source["target"].iloc[0]), base_time) for c in cells]


def cell_comparisons(cells: Sequence[RunGroup], tables: Sequence[pd.DataFrame], setting: Setting,
                     baseline: str | None = None) -> list[tuple[dict[str, Any], Comparison]]:
    """Each value's comparison (its own seeds paired within it), at the target of its table."""
    out = []
    for cell, table in zip(cells, tables, strict=True):
        if setting.target_from is None:
            comparison = group_comparison(cell, baseline)
        else:
            comparison = group_comparison(cell, baseline_of(table), float(table["target"].iloc[0]))
            comparison.target_rule = str(target_rule(setting))
        out.append(({setting.key: cell.name.split("=", 1)[1]}, comparison))
    return out


def target_rule(setting: Setting) -> str | None:
    """How the note states the target when it is not each cell's own."""
    if setting.target_from is None:
        return None
    return (f"95% of the lowest accuracy among the compared methods at {setting.key}={setting.target_from}, "
            f"for every setting; times relative to the baseline's there")


def sensitivity_figure(tables: Sequence[pd.DataFrame], setting: Setting) -> Figure:
    """Figure 8's layout: accuracy (mean, std over seeds) per setting above the relative time to target."""
    from matplotlib.figure import Figure

    values = [str(t["dataset"].iloc[0]).split("=", 1)[1] for t in tables]
    methods = method_order([a for t in tables for a in t["algorithm"]])
    width = 0.8 / max(1, len(methods))
    fig = Figure(figsize=(max(4.0, 1.2 * len(values) + 2.0), 5.6), dpi=120)
    top, bottom = fig.subplots(2, 1, sharex=True)
    for i, method in enumerate(methods):
        xs, acc, std, rel, reached = [], [], [], [], []
        for j, t in enumerate(tables):
            row = t[t["algorithm"] == method]
            if not len(row):
                continue
            first = row.iloc[0]
            xs.append(j + (i - (len(methods) - 1) / 2) * width)
            acc.append(100 * float(first["accuracy_mean"]))
            std.append(100 * float(first["accuracy_std"]))
            time = first["relative_time"]
            rel.append(float("nan") if is_missing(time) else float(time))
            reached.append(bool(first["reached"]))
        bars = top.bar(xs, acc, width, yerr=std, capsize=2, label=display_name(method))
        bottom.bar(xs, [0.0 if math.isnan(r) else r for r in rel], width, color=bars.patches[0].get_facecolor()
                   if bars.patches else None)
        for x, r, hit in zip(xs, rel, reached, strict=True):
            if math.isnan(r):  # never reached, or no baseline time to divide by in that cell
                bottom.text(x, 0.02, "n/a" if hit else "n/r", ha="center", va="bottom", fontsize=7, rotation=90)
    low = min((100 * float(t["accuracy_mean"].min()) for t in tables if len(t)), default=0.0)
    top.set_ylim(max(0.0, low - 10.0), 100.0)
    top.set_ylabel("accuracy at the budget (%)")
    seeds = sorted({int(s) for t in tables for s in t["seeds"]})
    top.set_title(f"each method across {setting.key}: bars mean ± std over "
                  f"{seeds[0] if len(seeds) == 1 else f'{seeds[0]}-{seeds[-1]}'} seed{'s' if seeds[-1] > 1 else ''}",
                  fontsize=9)
    top.legend(frameon=False, fontsize=8, ncol=min(4, len(methods)))
    bottom.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    baselines = {baseline_of(t) for t in tables}
    shown = next(iter(baselines)) if len(baselines) == 1 else None
    bottom.set_ylabel(f"time to target / {display_name(shown) if shown else 'baseline'}")
    bottom.set_xticks(range(len(values)), values)
    bottom.set_xlabel(setting.key)
    for ax in (top, bottom):
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def write_sensitivity(dirs: Sequence[Path], out: Path, setting: Setting, baseline: str | None = None,
                      force: bool = False) -> list[Path]:
    """The report of every result folder under ``dirs`` with one column pair per value of the key (tables,
    the comparison, the accuracy panels and ``sensitivity.png``); returns the files written."""
    from simfl import outdir
    from simfl.output.plots import save
    from simfl.output.report import find_result_folders, publish

    outdir.check_path(out)
    cells, setting = load_cells(find_result_folders(dirs), setting)
    check_baseline(cells, baseline)
    tables = cell_tables(cells, setting, baseline)
    comparisons = cell_comparisons(cells, tables, setting, baseline)
    written = publish(cells, tables, comparisons, out, force, target_rule(setting),
                      lambda folder: save(sensitivity_figure(tables, setting), folder / "sensitivity.png"))
    return [*written.files(), out / "sensitivity.png"]
