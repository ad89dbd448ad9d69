"""The paper's Table 2 from result folders (``simfl report``), beside the comparison of each group.

``simfl report`` (:func:`write_report`) reads result folders and, per scenario ("dataset") and method,
reports accuracy mean ± std over seeds at the fixed time budget and the time to target relative to a
baseline, in the layout of the paper's Table 2, as CSV, markdown and LaTeX, with a Figure-5-like
accuracy-vs-time figure; and each group's comparison (:mod:`simfl.output.comparison`: 95% intervals over
seeds, the paired time ratio, the verdict) as comparison.csv and comparison.md. The table reads the
comparison and computes no answer of its own: the target, the baseline, the mean accuracy, the time ratio
(comparison.csv's ``ratio``, paired by seed; the paper divides mean times instead) and the bold (every
method at the best value, comparison.csv's ``fastest`` and ``most_accurate``) are the comparison's. The
target is 95% of the lowest mean accuracy at the budget among the compared methods (paper, section 4.1)
unless the scenarios' ``eval.target`` says otherwise; the baseline is ``--baseline`` (in a group that has
it), else the scenarios' ``eval.baseline``, else the comparison's default: the first synchronous method in
the folders' own order of entries (as ``simfl run`` and ``simfl sweep`` chose it), else the first method.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from simfl import yamlsafe
from simfl.errors import InputError
from simfl.fields import PATH_KEYS
from simfl.names import short_name
from simfl.outdir import CELLS_FILE, SWEEP_FILE, name_problem
from simfl.output.comparison import Comparison, accuracy_at, compare, entries_of, time_to_target
from simfl.output.sequential import Looks
from simfl.output.tables import Kind, read_table
from simfl.output.target import TargetSpec, target_config

SUMMARY_KINDS: dict[str, Kind] = {"algorithm": "text", "seed": "seed", "final_accuracy": "number"}
"""The summary.csv columns a report needs, and what each must hold."""
METRICS_KINDS: dict[str, Kind] = {"virtual_time": "finite", "accuracy": "number"}
"""The metrics.csv columns a report needs, and what each must hold."""


def is_missing(value: object) -> bool:
    """True for None / NaN cells."""
    return value is None or (isinstance(value, float) and math.isnan(value))


# -- paper Table 2 from result folders (`simfl report`) -----------------------------------------------------

METHOD_NAMES = {
    "fedavg": ("FedAvg", "FedAvg"), "fedprox": ("FedProx", "FedProx"), "fedadam": ("FedAdam", "FedAdam"),
    "scaffold": ("SCAFFOLD", "SCAFFOLD"),
    "fedasync": ("FedAsync", "FedAsync"), "fedbuff": ("FedBuff", "FedBuff"), "ca2fl": ("CA2FL", "CA$^2$FL"),
    "orthofl_no_calib": ("OrthoFL w/o Calib.", "OrthoFL w/o Calib."),
    "orthofl_no_ma": ("OrthoFL w/o MA", "OrthoFL w/o MA"),
    "orthofl_pairwise": ("OrthoFL-Pairwise Proj.", "OrthoFL-Pairwise Proj."),
    "orthofl": ("OrthoFL", "OrthoFL"),
    "orthofl_global": ("OrthoFL (global)", "OrthoFL (global)"),
    "orthofl_chain": ("OrthoFL (chain)", "OrthoFL (chain)"),
    "fadas": ("FADAS", "FADAS"), "fedac": ("FedAC", "FedAC"), "fedstaleweight": ("FedStaleWeight", "FedStaleWeight"),
    "asyncfeded": ("AsyncFedED", "AsyncFedED"), "delay_adaptive": ("Delay-adaptive ASGD", "Delay-adaptive ASGD"),
    "pisces": ("Pisces", "Pisces"), "port": ("PORT", "PORT"), "mifa": ("MIFA", "MIFA"),
    "fednova": ("FedNova", "FedNova"), "feddyn": ("FedDyn", "FedDyn"), "moon": ("MOON", "MOON"),
}
"""Display names (markdown, LaTeX) in the paper's row order, with the labels of the two OrthoFL readings after it
and the rules of the later literature last; other algorithms and labels follow in order of appearance, shown as they
are."""


def display_name(label: str, tex: bool = False) -> str:
    """``label``'s display name (:data:`METHOD_NAMES`) in markdown, or LaTeX with ``tex``; another label as it is."""
    names = METHOD_NAMES.get(label)
    if names is not None:
        return names[1] if tex else names[0]
    return _tex_escape(label) if tex else label

TABLE_COLUMNS = [
    "dataset", "algorithm", "seeds", "budget_time", "target", "accuracy_mean", "accuracy_std",
    "time_to_target", "reached", "relative_time", "relative_bound",
]
"""table.csv's columns: ``accuracy_mean`` is comparison.csv's ``final_accuracy`` (``accuracy_std`` the population std
over seeds, the paper's); ``time_to_target`` the mean over the seeds that reached the target (seconds);
``relative_time`` and ``relative_bound`` comparison.csv's ``ratio`` and ``ratio_bound``."""


@dataclass
class RunGroup:
    """Every run of one scenario name (a dataset of the table, or one grid point of a sweep)."""

    name: str
    folders: list[Path]
    summary: pd.DataFrame
    metrics: dict[tuple[str, int], pd.DataFrame]
    synchronous: set[str] = field(default_factory=set)
    """The entries of a synchronous rule (for the default baseline)."""
    target: TargetSpec = None
    """The scenarios' ``eval.target`` (the same in every folder pooled)."""
    baseline: str | None = None
    """The scenarios' ``eval.baseline``."""
    listed: set[tuple[str, ...]] = field(default_factory=set)
    """Each folder's entries as its scenario lists them: one list when every folder of the group lists the same (a run,
    a sweep's grid point), several when folders of different entries are pooled (none: no scenario lists them)."""
    looks: Looks | None = None
    """The plan of sequential seeds the group's runs followed: its one folder's, or the sweep's whose cells (one per
    seed of a grid point) are the group's folders. None for a list of seeds, or folders pooled otherwise: their seeds
    then follow no one plan, and the intervals are the fixed ones."""
    sweep: Path | None = None
    """The sweep folder whose plan :attr:`looks` is, when the group's folders are its cells."""

    def note(self, scenario: Mapping[str, Any], where: Path) -> None:
        """Take the entry kinds, target, baseline and plan of sequential seeds a folder's scenario states."""
        self.synchronous |= synchronous_entries(scenario)
        listed = listed_entries(scenario)
        if listed:
            self.listed.add(listed)
        own, cell = looks_of(scenario.get("seeds"), where), sweep_looks(where.parent)
        if len(self.folders) == 1:
            self.looks, self.sweep = (own, None) if own is not None or cell is None else (cell[1], cell[0])
        elif own is not None or cell is None or self.sweep is None or cell[0] != self.sweep:
            self.looks = self.sweep = None
        found = scenario.get("eval")
        evaluation: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        try:
            self.target = target_config(evaluation.get("target"))
        except ValueError as exc:
            raise InputError(str(where), f"eval.target: {exc}") from None
        baseline = evaluation.get("baseline")
        self.baseline = str(baseline) if baseline is not None else None


@dataclass
class ReportFiles:
    """What :func:`write_report` wrote."""

    table_csv: Path
    markdown: Path
    latex: Path
    figure: Path
    comparison_csv: Path
    comparison_md: Path

    def files(self) -> list[Path]:
        return [self.table_csv, self.markdown, self.latex, self.figure, self.comparison_csv, self.comparison_md]


def looks_of(seeds: Any, where: Path) -> Looks | None:
    """The looks of a scenario.yaml's plan of sequential seeds (``seeds: {first: ..., most: ...}``); None for a list."""
    if not isinstance(seeds, Mapping):
        return None
    try:
        first, most = int(seeds["first"]), int(seeds["most"])
        width = seeds.get("width")
        return Looks(first, most, int(seeds.get("step") or first), None if width is None else float(width))
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(str(where), f"seeds: not a plan of sequential seeds ({exc})") from None


def sweep_looks(folder: Path) -> tuple[Path, Looks] | None:
    """Where ``folder`` is a cell of a sweep with sequential seeds (listed in its sweep's cells.csv): the sweep's
    folder and its plan's looks, which the point's comparison follows (as the sweep's own comparison.csv does)."""
    sweep, cells = folder.parent / SWEEP_FILE, folder.parent / CELLS_FILE
    if not (sweep.is_file() and cells.is_file()):
        return None
    try:
        listed = set(pd.read_csv(cells, usecols=["cell"])["cell"].astype(str))
    except (OSError, ValueError, pd.errors.ParserError):
        return None  # not a sweep's index: the folder is read as a run of its own
    if folder.name not in listed:
        return None
    raw = yamlsafe.load_file(sweep.read_text(encoding="utf-8"), str(sweep))
    looks = looks_of(raw.get("seeds"), sweep) if isinstance(raw, Mapping) else None
    return None if looks is None else (folder.parent, looks)


def listed_entries(scenario: Mapping[str, Any]) -> tuple[str, ...]:
    """The run names of a scenario's entries in its order (empty when it lists none)."""
    entries = [e for e in scenario.get("algorithms") or [] if isinstance(e, Mapping)]
    return tuple(dict.fromkeys(str(e.get("label") or short_name(str(e.get("name")))) for e in entries))


def synchronous_entries(scenario: Mapping[str, Any]) -> set[str]:
    """The run names of a scenario's entries whose built-in algorithm is synchronous (a name that is itself a
    built-in's stands for that algorithm where the scenario lists no entries)."""
    from simfl.algorithms.configs import BUILTINS

    def synchronous(name: object) -> bool:
        found = BUILTINS.get(str(name))
        return found is not None and bool(getattr(found.config, "synchronous", False))

    entries = [e for e in scenario.get("algorithms") or [] if isinstance(e, Mapping)]
    if not entries:
        return {name for name in BUILTINS if synchronous(name)}
    return {str(e.get("label") or short_name(str(e.get("name")))) for e in entries if synchronous(e.get("name"))}


def result_scenario(folder: Path) -> dict[str, Any]:
    """The scenario.yaml of a result folder as a mapping; one line naming the file when it cannot be read or is not
    plain YAML (a hand-edited file with a Python or other foreign tag is refused, never constructed)."""
    path = folder / "scenario.yaml"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or exc
        raise InputError(str(path), f"cannot be read ({reason}); a report needs each folder's settings") from None
    scenario = yamlsafe.load_file(text, str(path))
    if not isinstance(scenario, dict):
        raise InputError(str(path), "is not a mapping of scenario settings")
    return scenario


def find_result_folders(dirs: Sequence[Path]) -> list[Path]:
    """Every folder holding a summary.csv under ``dirs`` (a run folder, a sweep folder, or a parent of them).

    Staged ``.partial`` folders are never read.
    """
    found: list[Path] = []
    for d in dirs:
        if not d.is_dir():
            raise InputError(str(d), "no such folder")
        hits = sorted(p.parent for p in d.rglob("summary.csv")
                      if not any(part.endswith(".partial") for part in p.parent.relative_to(d).parts)
                      and not p.parent.name.endswith(".partial"))
        if not hits:
            raise InputError(str(d), "holds no result folder (no summary.csv found)")
        found.extend(h for h in hits if h not in found)
    return found


POOL_IGNORED = ("name", "seeds", "algorithms", "tracking", "client_state")
"""Scenario keys in which runs pooled as seeds of one setting may differ (entries compare by run name; ``data.root``
may differ too; where client state was stored changes no result)."""


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"train.lr": 0.05, ...}`` (lists stay whole)."""
    if not isinstance(value, Mapping):
        return {prefix: value}
    out: dict[str, Any] = {}
    for key, item in value.items():
        out.update(_flat(item, f"{prefix}.{key}" if prefix else str(key)))
    return out


def pooled_settings(scenario: Mapping[str, Any], folder: Path | None = None) -> dict[str, Any]:
    """What runs of one scenario must share to be pooled as seeds: every setting but the seeds, the tracking
    and the list of entries; each entry's own settings under ``algorithms[<run name>]``. With ``folder`` (the
    one holding the scenario.yaml), relative file and folder paths are compared resolved against it."""
    flat = _flat({k: v for k, v in scenario.items() if k not in POOL_IGNORED})
    flat.pop("data.root", None)  # where the data lie on the machine that ran them, not which data
    for key in PATH_KEYS:
        value = flat.get(key)
        if folder is not None and isinstance(value, str) and not Path(value).is_absolute():
            flat[key] = os.path.normpath(folder.resolve() / value)
    if "workload" not in (flat.get("latency.scaling.compute"), flat.get("latency.scaling.comm")):
        # the reference workload only scales latencies by a workload ratio; its default's FLOP count changed once
        for key in [k for k in flat if k.startswith("latency.scaling.reference.")]:
            del flat[key]
    for entry in scenario.get("algorithms") or []:
        if isinstance(entry, Mapping):
            label = entry.get("label") or short_name(str(entry.get("name")))
            flat.update(_flat({k: v for k, v in entry.items() if k != "label"}, f"algorithms[{label}]"))
    return flat


def first_difference(a: Mapping[str, Any], b: Mapping[str, Any]) -> str | None:
    """The first key (in sorted order) whose value differs, entries compared only where both folders have them; a
    key one folder lacks (a section simfl added after it was written) equals null, that section's "off"."""
    for key in sorted(set(a) | set(b)):
        if key.startswith("algorithms[") and (key not in a or key not in b):
            continue
        if a.get(key) != b.get(key):
            return key
    return None


def load_groups(folders: Sequence[Path], apart: bool = False) -> list[RunGroup]:
    """Read summary.csv and every run's metrics.csv, grouped by the scenario name in scenario.yaml.

    Folders of one name are pooled as seeds only when their settings agree (:func:`pooled_settings`);
    otherwise one line names both folders and the first differing key, unless ``apart``, which
    reports each setting as its own group, labelled ``name [folder]``.
    """
    groups: dict[str, RunGroup] = {}
    seen: dict[str, list[tuple[dict[str, Any], str, Path]]] = {}
    for folder in folders:
        scenario = result_scenario(folder)
        try:
            name = str(scenario["name"])
            settings = pooled_settings(scenario, folder)
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            name, settings = folder.name, {}
        label = name
        for other, other_label, where in seen.get(name, []):
            differs = first_difference(other, settings)
            if differs is None:
                label = other_label
                break
            if not apart:
                raise InputError(str(folder), f"holds runs of '{name}' whose settings differ from those in {where} "
                                 f"({differs}: {shown_value(settings.get(differs))} vs {shown_value(other.get(differs))}), so "
                                 "they are not seeds of one setting: report them separately, or pass --apart to label "
                                 "them apart")
        else:
            if name in seen:
                label = f"{name} [{folder.name}]"
            seen.setdefault(name, []).append((settings, label, folder))
        name = label
        summary = read_table(folder / "summary.csv", SUMMARY_KINDS, "result rows")
        group = groups.setdefault(name, RunGroup(name, [], summary.iloc[0:0], {}))
        group.folders.append(folder)
        group.note(scenario, folder / "scenario.yaml")
        for algo, seed in zip(summary["algorithm"], summary["seed"], strict=True):
            key = (str(algo), int(seed))
            problem = name_problem(key[0])
            if problem is not None:
                raise InputError(str(folder / "summary.csv"), f"algorithm {problem}")
            if key in group.metrics:
                raise InputError(str(folder), f"{algo} seed {seed} of '{name}' is also in {group.folders[0]}")
            path = folder / key[0] / f"seed{key[1]}" / "metrics.csv"
            if not path.is_file():
                raise InputError(str(path), "missing (every summary.csv row needs its metrics.csv)")
            group.metrics[key] = read_table(path, METRICS_KINDS, "evaluations")
        group.summary = pd.concat([group.summary, summary], ignore_index=True) if len(group.summary) else summary
    return list(groups.values())


def shown_value(value: Any) -> str:
    """A setting as a refusal line shows it (``absent`` for null, at most 60 characters)."""
    text = "absent" if value is None else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def method_order(algorithms: Sequence[str]) -> list[str]:
    """The paper's row order for known methods, then the others in order of appearance."""
    known = [a for a in METHOD_NAMES if a in algorithms]
    return known + [a for a in dict.fromkeys(algorithms) if a not in METHOD_NAMES]


def group_comparison(group: RunGroup, baseline: str | None = None, target: TargetSpec = None) -> Comparison:
    """The comparison of a group's methods (rows in the table's order): ``baseline`` when the group has it, else
    its scenarios' ``eval.baseline``, else the comparison's default, read in the order the group's folders list their
    entries (as their own comparison chose it) when they all list the same, else in the paper's order (folders of
    different entries pooled); ``target`` in place of its scenarios' own."""
    entries = method_order(entries_of(group.metrics))
    chosen = baseline if baseline in entries else group.baseline if group.baseline in entries else None
    (listed,) = group.listed if len(group.listed) == 1 else [()]
    order = [e for e in listed if e in entries] + [e for e in entries if e not in listed]
    return compare(group.metrics, group.synchronous, group.target if target is None else target, chosen, group.name,
                   entries, group.looks, order)


def group_table(group: RunGroup, baseline: str | None = None, target: float | None = None,
                base_time: float | None = None) -> pd.DataFrame:
    """One row per method of ``group``, read from its comparison (:func:`group_comparison`): accuracy at the fixed
    time budget (the comparison's horizon and mean final accuracy, with the population std over seeds), the mean time
    to target over the seeds that reached it, and the time ratio to the baseline (the comparison's, paired by seed).

    ``baseline`` and ``target`` are passed to the comparison. With ``base_time`` (a report across one setting whose
    times are all relative to one cell's baseline) ``relative_time`` is instead the mean time over ``base_time``,
    a ratio of means across cells that no seed pairing within one cell gives. ``table.attrs`` holds the
    ``baseline``, the ``comparison`` and how ``relative_time`` was computed (``ratio``: ``paired`` or ``means``).
    """
    comparison = group_comparison(group, baseline, target)
    budget, target = comparison.horizon, comparison.target
    rows = comparison.table.set_index("entry")
    out = []
    for algo in method_order(list(rows.index)):
        seeds = sorted(s for a, s in group.metrics if a == algo)
        finals = [accuracy_at(group.metrics[(algo, s)], budget) for s in seeds]
        times = [time_to_target(group.metrics[(algo, s)], target) for s in seeds]
        reached = [t for t in times if t is not None]
        row = rows.loc[algo]
        paired = base_time is None
        out.append({
            "dataset": group.name, "algorithm": algo, "seeds": len(seeds), "budget_time": budget, "target": target,
            "accuracy_mean": float(row["final_accuracy"]),
            "accuracy_std": float(pd.Series(finals).std(ddof=0)) if len(finals) > 1 else 0.0,
            "time_to_target": sum(reached) / len(reached) if reached else None, "reached": len(reached),
            "relative_time": (None if is_missing(row["ratio"]) else float(row["ratio"])) if paired else
            (None if not reached or not base_time else sum(reached) / len(reached) / float(base_time)),
            "relative_bound": str(row["ratio_bound"]) if paired else "",
        })
    table = pd.DataFrame(out, columns=TABLE_COLUMNS)
    table.attrs["baseline"] = comparison.baseline if base_time is None else baseline
    table.attrs["comparison"] = comparison
    table.attrs["ratio"] = "paired" if base_time is None else "means"
    table.attrs["loss_notes"] = loss_notes(group)
    return table


def loss_notes(group: RunGroup) -> list[str]:
    """One line per run of ``group`` whose evaluation loss was not finite after a finite one
    (:func:`~simfl.output.results.loss_note`): at those evaluations its accuracy is not a trained model's,
    which the table's mean and time to target cannot show."""
    from simfl.output.results import loss_note

    lines = []
    for algo in method_order(entries_of(group.metrics)):
        for seed in sorted(s for a, s in group.metrics if a == algo):
            note = loss_note(group.metrics[(algo, seed)])
            if note is not None:
                lines.append(f"{group.name}: {display_name(algo)} seed {seed}: {note}")
    return lines


def _cells(row: Mapping[str, Any], latex: bool, baseline: str | None) -> tuple[str, str]:
    """The (accuracy, time) cells of one table row, as the paper prints them; a ratio that is a bound (a seed where
    the method, or the baseline, missed the target) marked ``≥`` (``≤``)."""
    pm = r"$\pm$" if latex else "±"
    times = r"$\times$" if latex else "×"
    marks = {"lower": r"$\geq$" if latex else "≥", "upper": r"$\leq$" if latex else "≤"}
    acc = f"{100 * row['accuracy_mean']:.1f}{pm}{100 * row['accuracy_std']:.1f}"
    if not row["reached"]:
        return acc, "n/r"
    if is_missing(row["relative_time"]):
        when = "n/a" if row.get("relative_bound") == "mixed" else f"{row['time_to_target']:.0f} s"
    else:
        rel = float(row["relative_time"])
        mark = marks.get(str(row.get("relative_bound") or ""), "")
        when = f"1{times}" if row["algorithm"] == baseline and rel == 1.0 else f"{mark}{rel:.2f}{times}"
    if row["reached"] < row["seeds"]:
        when += f" ({row['reached']}/{row['seeds']})"
    return acc, when


def _best(table: pd.DataFrame) -> tuple[set[str], set[str]]:
    """Methods in bold: the comparison's ``most_accurate`` and ``fastest`` marks (every method at the best value;
    comparison.md says whether a lead is clear)."""
    marks = table.attrs["comparison"].table
    return set(marks.loc[marks["most_accurate"], "entry"]), set(marks.loc[marks["fastest"], "entry"])


def _layout(tables: Sequence[pd.DataFrame]) -> tuple[list[str], list[str]]:
    datasets = [str(t["dataset"].iloc[0]) for t in tables if len(t)]
    methods = method_order([a for t in tables for a in t["algorithm"]])
    return datasets, methods


def baseline_of(table: pd.DataFrame) -> str | None:
    """The baseline a :func:`group_table` was computed against."""
    return table.attrs.get("baseline")


def _note(tables: Sequence[pd.DataFrame], rule: str | None = None) -> list[str]:
    baselines = list(dict.fromkeys(baseline_of(t) for t in tables))
    shared = baselines[0] if len(baselines) == 1 and baselines[0] is not None else None
    label = f"{display_name(shared)} (1×)" if shared is not None else \
        "each group's baseline (1×, named below)"
    rule = rule or "95% of the lowest accuracy among the compared methods"
    paired = all(t.attrs.get("ratio", "paired") == "paired" for t in tables)
    how = ("paired by seed as comparison.csv's ratio: the geometric mean of the per-seed ratios, where a seed that "
           "missed the target counts with its end time (≥: the method missed it in a seed, ≤: the baseline did; "
           "the paper divides mean times)" if paired else "the mean time over the seeds that reached it over the "
           "baseline's")
    lines = [(f"Accuracy (%): mean ± std over seeds at the fixed time budget. Time: time to reach the target "
              f"accuracy ({rule}) relative to {label}, {how}; "
              "'n/r': not reached; (k/n): reached by k of n seeds; 'n/a': each missed it in some seed; 's': no "
              "baseline, seconds. Bold: the best value, every method at it (comparison.md says whether a lead is "
              "clear).")]
    for t in tables:
        first = t.iloc[0]
        base = "" if shared is not None else f", baseline {baseline_of(t)}"
        lines.append(f"{first['dataset']}: budget {first['budget_time']:g} s of virtual time, target accuracy "
                     f"{100 * first['target']:.1f}%, seeds per method {', '.join(str(s) for s in t['seeds'])}{base}")
    return lines + [note for t in tables for note in t.attrs.get("loss_notes", [])]


def _method_cells(method: str, datasets: Sequence[str], by_name: dict[str, pd.DataFrame], latex: bool) -> list[str]:
    """One method's (Accuracy, Time) cells for every dataset, the best of each column in bold."""
    cells: list[str] = []
    for d in datasets:
        t = by_name[d]
        rows = t[t["algorithm"] == method]
        if not len(rows):
            cells += ["--", "--"] if latex else ["–", "–"]
            continue
        acc, when = _cells(rows.iloc[0], latex=latex, baseline=baseline_of(t))
        best_acc, best_t = _best(t)
        bold = (lambda x: rf"\textbf{{{x}}}") if latex else (lambda x: f"**{x}**")
        cells += [bold(acc) if method in best_acc else acc, bold(when) if method in best_t else when]
    return cells


def markdown_table(tables: Sequence[pd.DataFrame], rule: str | None = None) -> str:
    """Table 2 of the paper in markdown: one row per method, an (Accuracy, Time) pair per dataset."""
    datasets, methods = _layout(tables)
    by_name = {str(t["dataset"].iloc[0]): t for t in tables if len(t)}
    head = "| Method | " + " | ".join(f"{d} Accuracy | {d} Time" for d in datasets) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(datasets)]
    for m in methods:
        cells = [display_name(m), *_method_cells(m, datasets, by_name, False)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines + [""] + [f"- {n}" for n in _note(tables, rule)]) + "\n"


def _tex_escape(text: str) -> str:
    return "".join("\\" + c if c in "&%$#_{}" else c for c in text)


def latex_table(tables: Sequence[pd.DataFrame], rule: str | None = None) -> str:
    """Table 2 of the paper as a LaTeX ``tabular`` (booktabs), one column pair per dataset."""
    datasets, methods = _layout(tables)
    by_name = {str(t["dataset"].iloc[0]): t for t in tables if len(t)}
    n = len(datasets)
    lines = [
        "% " + "\n% ".join(_note(tables, rule)),
        r"\begin{tabular}{l" + "cc" * n + "}",
        r"\toprule",
        r"\multirow{2}{*}{Methods} & "
        + " & ".join(rf"\multicolumn{{2}}{{c}}{{{_tex_escape(d)}}}" for d in datasets) + r" \\",
        "".join(rf"\cmidrule(lr){{{2 + 2 * i}-{3 + 2 * i}}}" for i in range(n))
        + " & " + " & ".join("Accuracy & Time" for _ in datasets) + r" \\",
        r"\midrule",
    ]
    for m in methods:
        cells = [display_name(m, tex=True), *_method_cells(m, datasets, by_name, True)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def check_baseline(groups: Sequence[RunGroup], baseline: str | None) -> None:
    """Refuse a ``--baseline`` that is a method of no group."""
    if baseline is None:
        return
    methods = method_order([a for g in groups for a in entries_of(g.metrics)])
    if baseline not in methods:
        raise InputError("--baseline", f"{baseline!r} is a method of no folder here; they are {', '.join(methods)}")


def write_report(dirs: Sequence[Path], out: Path, baseline: str | None = None, force: bool = False,
                 apart: bool = False) -> ReportFiles:
    """Tables (CSV, markdown, LaTeX), the comparison (:mod:`simfl.output.comparison`) and the accuracy-vs-time
    figure of every result folder under ``dirs``.

    ``out`` follows the rules of ``simfl run``'s output folder (:mod:`simfl.outdir`): written in
    ``<out>.partial`` and renamed into place; an existing ``out`` is replaced only with ``force``
    and only when simfl wrote it.
    """
    from simfl import outdir

    outdir.check_path(out)
    groups = load_groups(find_result_folders(dirs), apart)
    check_baseline(groups, baseline)
    tables = [group_table(g, baseline) for g in groups]
    comparisons = [({"dataset": g.name}, t.attrs["comparison"]) for g, t in zip(groups, tables, strict=True)]
    return publish(groups, tables, comparisons, out, force)


def publish(groups: Sequence[RunGroup], tables: Sequence[pd.DataFrame],
            comparisons: Sequence[tuple[Mapping[str, Any], Comparison]], out: Path, force: bool,
            rule: str | None = None, extra: Callable[[Path], None] | None = None) -> ReportFiles:
    """Write the report's files into ``out`` under its lock (``rule``: how the note states the target;
    ``extra``: writes one more file into the staging folder)."""
    from simfl import outdir

    with outdir.hold(out):
        outdir.claim(out, force)
        return _write(groups, tables, comparisons, out, force, rule, extra)


def _write(groups: Sequence[RunGroup], tables: Sequence[pd.DataFrame],
           comparisons: Sequence[tuple[Mapping[str, Any], Comparison]], out: Path, force: bool, rule: str | None,
           extra: Callable[[Path], None] | None) -> ReportFiles:
    from simfl.output import comparison as comparing
    from simfl.output.plots import accuracy_panels
    from simfl.output.results import OutputFolder, write_csv

    folder = OutputFolder(out, force=force)
    names = ("table.csv", "table.md", "table.tex", "accuracy.png", "comparison.csv", "comparison.md")
    try:
        stage = ReportFiles(*(folder.path(n) for n in names))
        rows = [r for t in tables for r in t.to_dict("records")]
        write_csv(stage.table_csv, TABLE_COLUMNS, rows)
        stage.markdown.write_text(markdown_table(tables, rule))
        stage.latex.write_text(latex_table(tables, rule))
        comparing.write(folder.stage, comparisons)
        accuracy_panels([(g.name, g.metrics) for g in groups], stage.figure,
                        targets=[float(t["target"].iloc[0]) for t in tables])
        if extra is not None:
            extra(stage.figure.parent)
        folder.publish()
    except BaseException:
        folder.discard()
        raise
    return ReportFiles(*(out / n for n in names))
