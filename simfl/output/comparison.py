"""The verdict of a comparison: which entry reaches the target accuracy first, by how much, and how sure.

Every result folder (a run, a sweep cell, a sweep, a report) gets ``comparison.csv`` (one row per entry, the
interval bounds as columns) and ``comparison.md``, and the commands print the same table and one line of verdict.
This module is the one place of the rules they follow:

- **Horizon.** Final accuracy is read at the latest virtual time every run of the comparison reached (the time
  budget when that stopped the runs): the accuracy of each run's last evaluation at or before it. Best accuracy
  is a run's highest evaluation up to it.
- **Target** (:mod:`simfl.output.target`, the scenario's ``eval.target``): an accuracy given outright, or a
  fraction of the lowest mean final accuracy among the entries (default 95%, the paper's rule, section 4.1) or
  of the baseline's. A run's **time to target** is the virtual time of its first evaluation at or above it. A run that
  never reaches it is kept: its time is at least its end (the budget), and every mean or ratio it enters is then
  a bound, stated as one (``time_bound``, ``ratio_bound``).
- **Baseline.** ``eval.baseline`` (or ``--baseline``); by default the first synchronous entry (FedAvg's kind),
  else the first entry, in the scenario's order of its entries, for a run, a sweep and a report of their folders alike
  (a report's table puts its rows in the paper's order, but its baseline is the folder's own); a report that pools
  folders listing different entries (one folder per entry) reads them in the paper's order (:func:`default_baseline`,
  :func:`simfl.output.report.group_comparison`).
- **Intervals** (95%, over seeds). Means (final and best accuracy, time to target): Student's t interval,
  mean ± t(0.975, n-1) s / sqrt(n), cut to what the quantity can take (an accuracy within [0, 1], a time at
  least 0): the t interval is symmetric, and with few seeds of spread-out times its low end falls below 0 s,
  where no time can be, so it reads 0 (``500 s [0, 1008]``: the seeds bound the time from above only). A time to
  target is known only to the evaluation grid: ``time_step`` is the longest gap, among the entry's seeds, between the
  evaluation that reached the target and the one before it, and a time interval narrower than that says so
  (``120 s [120, 120] (within one evaluation step of 20 s)``). Time ratio to the baseline: simfl's seeds share
  their latencies across the
  entries of one seed (client m's k-th latency is drawn from the stream (seed, "latency", m), whatever the
  algorithm), so each seed pairs an entry's time with the baseline's: the ratio is the geometric mean of the
  per-seed ratios, its interval the t interval of the mean log ratio, exponentiated (a paired t interval on log
  times). A seed where neither reaches the target says nothing of the ratio and is left out (``paired_seeds``
  counts those used). With one seed (or one paired seed) there is no interval: its bounds are empty. A t
  interval rather than a bootstrap, because simfl's studies run 2 to 5 seeds, too few for a bootstrap's
  resampling distribution to be more than a handful of values.
- **Sequential seeds** (a scenario's ``seeds: {first: ..., most: ...}``, :mod:`simfl.output.sequential`): the time
  ratio's interval is the one of the look made with the entry's seeds (Lan–DeMets alpha spending over the planned
  looks, a t test per look), and the ``stopped`` column says why the entry's seeds stopped: settled (the interval
  excludes 1x, or is narrower than the plan's width) or the most seeds. Without a plan the table has no such column.
- **The winner**, one rule for every output (comparison.csv and .md, the printed verdict, ``sweep.png``,
  ``simfl report``'s bold, the trackers): on each measure (the time ratio; the mean final accuracy) every entry at
  the best value is marked (``fastest``: the smallest ratio that is exact or an upper bound; ``most_accurate``: the
  highest mean final accuracy; at it means within a relative 1e-9, :data:`TIE`); two or more there are *level*. An
  entry alone at the best is *named* (``fastest_clear``, ``most_accurate_clear``; :attr:`Comparison.fastest`,
  :attr:`Comparison.most_accurate`) only when its interval against the runner-up (the best entry below it) excludes
  a tie: its time over the runner-up's, paired by seed as the ratio to the baseline is (with sequential seeds, at
  the same look's adjusted level), below 1x and not only a lower bound (``fastest_by``); its final accuracy minus
  the runner-up's, the mean of the per-seed differences with its Student-t interval (paired: the seeds share
  latencies, data and initial model), above 0 (``most_accurate_by``). Otherwise the verdict says "not clear" and
  why; with one seed there is no interval, so no entry is named (:func:`leads`).
- **Warnings** in one line each: a target at or below an untrained model's accuracy (the evaluation at time 0),
  and entries that reach it at their first evaluation after the start (the grid cannot tell them apart).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from simfl.output import sequential
from simfl.output.sequential import Looks
from simfl.output.target import TargetSpec, percent, resolve_target

CONFIDENCE = 0.95
"""Coverage of every interval."""

Runs = Mapping[tuple[str, int], pd.DataFrame]
"""Metrics (``virtual_time``, ``accuracy``) of each run, keyed by (entry, seed)."""

COLUMNS = [
    "entry", "seeds", "final_accuracy", "final_accuracy_low", "final_accuracy_high", "best_accuracy",
    "best_accuracy_low", "best_accuracy_high", "reached", "time_to_target", "time_to_target_low",
    "time_to_target_high", "time_bound", "ratio", "ratio_low", "ratio_high", "ratio_bound", "paired_seeds",
    "baseline", "target", "horizon", "time_step", "fastest", "fastest_over", "fastest_by", "fastest_by_low",
    "fastest_by_high", "fastest_by_bound", "fastest_clear", "most_accurate", "most_accurate_over", "most_accurate_by",
    "most_accurate_by_low", "most_accurate_by_high", "most_accurate_clear",
]
"""The columns of comparison.csv, one row per entry (accuracies as fractions, times in virtual seconds); the
``fastest*`` and ``most_accurate*`` columns are each measure's :class:`Lead`, on the rows at the best value."""

LEAD_COLUMNS = COLUMNS[COLUMNS.index("fastest"):]
"""The columns :func:`compare` fills from the leads, after the per-entry numbers."""

STOPPED = "stopped"
"""The column sequential seeds add: why the entry's seeds stopped (:mod:`simfl.output.sequential`'s reasons)."""

BASELINE = "baseline"
"""The baseline's ``stopped``: it runs as long as any entry."""

Bound = Literal["", "lower", "upper", "mixed"]
"""How a mean or ratio with a seed that missed the target reads: exact (""), at least ("lower"), at most ("upper"), or
neither ("mixed": the entry misses it in one seed and the baseline in another; no ratio is given)."""


# -- per-run numbers ----------------------------------------------------------------------------------------------


def accuracy_at(metrics: pd.DataFrame, time: float) -> float:
    """Accuracy of the last evaluation at or before virtual ``time``."""
    rows = metrics.loc[metrics["virtual_time"] <= time + 1e-9, "accuracy"]
    return float(rows.iloc[-1]) if len(rows) else float("nan")


def best_until(metrics: pd.DataFrame, time: float) -> float:
    """Highest accuracy of the evaluations at or before virtual ``time``."""
    rows = metrics.loc[metrics["virtual_time"] <= time + 1e-9, "accuracy"]
    return float(rows.max()) if len(rows) else float("nan")


def time_to_target(metrics: pd.DataFrame, target: float) -> float | None:
    """First virtual time at which accuracy >= target (None if never)."""
    hit = metrics.loc[metrics["accuracy"] >= target, "virtual_time"]
    return float(hit.iloc[0]) if len(hit) else None


def horizon(runs: Runs) -> float:
    """The latest virtual time every run reached."""
    return min(float(df["virtual_time"].max()) for df in runs.values())


def entries_of(runs: Runs) -> list[str]:
    """The entries of ``runs`` in order of appearance."""
    return list(dict.fromkeys(entry for entry, _ in runs))


# -- intervals ----------------------------------------------------------------------------------------------------


def mean_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and its 95% Student-t interval (NaN bounds with fewer than two values)."""
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return math.nan, math.nan, math.nan
    n = len(finite)
    mean = math.fsum(finite) / n
    if n < 2:
        return mean, math.nan, math.nan
    half = float(t_half(math.sqrt(math.fsum((v - mean) ** 2 for v in finite) / (n - 1)), n))
    return mean, mean - half, mean + half


def t_half(sd: Any, n: Any) -> Any:
    """Half the width of the 95% Student-t interval of a mean of ``n`` values of sample std ``sd`` (arrays too).
    SciPy is imported here, where an interval is drawn (two seeds or more): a run of one seed goes without it."""
    from scipy import special  # stdtrit is Student's t quantile, without scipy.stats' second of imports

    return special.stdtrit(n - 1, 0.5 + CONFIDENCE / 2) * sd / n ** 0.5


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float, float]:
    """Geometric mean of paired ratios and its 95% interval (the t interval of the mean log ratio, exponentiated)."""
    mean, low, high = mean_interval([math.log(r) for r in ratios])
    return tuple(math.exp(v) if not math.isnan(v) else math.nan for v in (mean, low, high))  # type: ignore[return-value]


# -- the comparison -----------------------------------------------------------------------------------------------


def default_baseline(entries: Sequence[str], synchronous: Collection[str]) -> tuple[str, str]:
    """The first synchronous entry of ``entries`` (in the order the runs appear), else the first; and how it was
    chosen."""
    for entry in entries:
        if entry in synchronous:
            return entry, "the first synchronous entry"
    return entries[0], "the first entry"


def choose_baseline(entries: Sequence[str], synchronous: Collection[str], chosen: str | None) -> tuple[str, str]:
    """``chosen`` when given (it must be one of ``entries``: the caller checked), else :func:`default_baseline`."""
    if chosen is not None:
        return chosen, "chosen"
    return default_baseline(entries, synchronous)


@dataclass(frozen=True)
class Lead:
    """Who is ahead on one measure (time to target, or final accuracy), against whom, by how much, and whether the
    seeds can tell: the one rule of a winner (see the module's rules)."""

    best: tuple[str, ...] = ()
    """Every entry at the best value (none: no entry has one; two or more: level)."""
    over: str | None = None
    """The runner-up, the best entry below the one at the best (None when level or no other entry has a value)."""
    by: float = math.nan
    """Time: the best entry's time over the runner-up's, paired by seed (geometric mean); accuracy: its final accuracy
    minus the runner-up's, the mean of the per-seed differences."""
    low: float = math.nan
    high: float = math.nan
    bound: Bound = ""
    """Time only: how ``by`` reads when a seed missed the target (:data:`Bound`)."""
    paired: int = 0
    """The seeds the lead is computed over."""
    clear: bool = False
    """One entry at the best, its interval against the runner-up excluding a tie: it is named."""

    @property
    def level(self) -> bool:
        return len(self.best) > 1

    @property
    def named(self) -> str | None:
        """The entry named best (None: level, not clear, or no value)."""
        return self.best[0] if self.clear else None


@dataclass
class Comparison:
    """The comparison of the entries of one setting over its seeds."""

    name: str
    """What is compared (the scenario's name, a sweep's grid point, a report's group)."""
    table: pd.DataFrame
    """One row per entry, :data:`COLUMNS`."""
    baseline: str
    baseline_rule: str
    target: float
    target_rule: str
    horizon: float
    warnings: list[str] = field(default_factory=list)
    untrained: float = math.nan
    """The highest accuracy of an untrained model among the runs (their evaluations at time 0; NaN without any)."""
    looks: Looks | None = None
    """The plan of sequential seeds whose looks the time ratios' intervals are adjusted for (None: fixed seeds)."""
    speed: Lead = field(default_factory=Lead)
    """Who reaches the target first (:func:`leads`)."""
    accuracy: Lead = field(default_factory=Lead)
    """Who ends most accurate (:func:`leads`)."""

    @property
    def settled(self) -> bool:
        """Whether every entry's comparison with the baseline is settled (sequential seeds; True without a plan)."""
        return STOPPED not in self.table or not (self.table[STOPPED] == sequential.NOT_YET).any()

    @property
    def seeds(self) -> int:
        return int(self.table["seeds"].max()) if len(self.table) else 0

    @property
    def fastest(self) -> str | None:
        """The entry named fastest: alone at the smallest time ratio, clearly ahead of the runner-up (None: level, not
        clear, or none reaches the target; see :class:`Lead`)."""
        return self.speed.named

    @property
    def most_accurate(self) -> str | None:
        """The entry named most accurate, by the same rule."""
        return self.accuracy.named

    def row(self, entry: str) -> dict[str, Any]:
        return dict(self.table.loc[self.table["entry"] == entry].iloc[0])

    @property
    def verdict(self) -> str:
        """One line in words: who reaches the target first, by how much and how sure; who is most accurate."""
        return verdict(self)

    def text(self) -> str:
        """The comparison as the commands print it: target, baseline, a table, warnings and the verdict."""
        return text(self)

    def markdown(self) -> str:
        """comparison.md: the verdict first, then the table and how it was computed."""
        return markdown([self])


def compare(runs: Runs, synchronous: Collection[str] = (), target: TargetSpec = None, baseline: str | None = None,
            name: str = "", entries: Sequence[str] | None = None, looks: Looks | None = None,
            scenario_order: Sequence[str] | None = None) -> Comparison:
    """The comparison of ``runs`` (see the module's rules); ``entries`` orders the rows (default: as they appear);
    ``looks``: the plan of sequential seeds the runs follow (the time ratios' intervals are then the sequential ones);
    ``scenario_order``: the order the default baseline is read in (default: as the runs appear, the scenario's)."""
    order = list(entries) if entries is not None else entries_of(runs)
    order = [e for e in order if any(e == a for a, _ in runs)]
    listed = [e for e in scenario_order if e in order] if scenario_order is not None else entries_of(runs)
    base, base_rule = choose_baseline(listed, synchronous, baseline)
    when = horizon(runs)
    seeds = {e: sorted(s for a, s in runs if a == e) for e in order}
    finals = {e: [accuracy_at(runs[(e, s)], when) for s in seeds[e]] for e in order}
    goal, rule = resolve_target(target, {e: mean_interval(v)[0] for e, v in finals.items()}, base)
    times: dict[tuple[str, int], tuple[float, bool]] = {}  # (time or bound, reached)
    steps: dict[tuple[str, int], float] = {}  # the evaluation step before each hit
    for (e, s), df in runs.items():
        hit = None if math.isnan(goal) else time_to_target(df, goal)
        times[(e, s)] = (hit, True) if hit is not None else (float(df["virtual_time"].max()), False)
        if hit is not None:
            steps[(e, s)] = step_before(df, hit)
    rows = []
    for e in order:
        mine = [times[(e, s)] for s in seeds[e]]
        final = _within(mean_interval(finals[e]), 0.0, 1.0)
        best = _within(mean_interval([best_until(runs[(e, s)], when) for s in seeds[e]]), 0.0, 1.0)
        spent = _within(mean_interval([t for t, _ in mine]), 0.0, math.inf)
        ratio, low, high, bound, ratios = _paired_ratio(e, base, seeds, times)
        paired = len(ratios)
        stopped = BASELINE
        if looks is not None and e != base:
            decision = sequential.decide([math.log(r) for r in ratios], looks, len(seeds[e]), bound)
            stopped = decision.reason
            if bound != "mixed":
                low, high = (math.exp(v) if not math.isnan(v) else math.nan for v in (decision.low, decision.high))
        rows.append({
            "entry": e, "seeds": len(seeds[e]), "final_accuracy": final[0], "final_accuracy_low": final[1],
            "final_accuracy_high": final[2], "best_accuracy": best[0], "best_accuracy_low": best[1],
            "best_accuracy_high": best[2], "reached": sum(r for _, r in mine), "time_to_target": spent[0],
            "time_to_target_low": spent[1], "time_to_target_high": spent[2],
            "time_bound": "" if all(r for _, r in mine) else "lower", "ratio": ratio, "ratio_low": low,
            "ratio_high": high, "ratio_bound": bound, "paired_seeds": paired, "baseline": base, "target": goal,
            "horizon": when, "time_step": max((steps[(e, s)] for s in seeds[e] if (e, s) in steps), default=math.nan),
            STOPPED: stopped,
        })
    table = pd.DataFrame(rows, columns=[c for c in COLUMNS if c not in LEAD_COLUMNS] + [STOPPED])
    finals_by = {(e, s): v for e in order for s, v in zip(seeds[e], finals[e], strict=True)}
    speed, accuracy = leads(table, seeds, times, finals_by, looks)
    for prefix, lead in (("fastest", speed), ("most_accurate", accuracy)):
        _mark(table, prefix, lead)
    comparison = Comparison(name, table[COLUMNS + ([STOPPED] if looks is not None else [])], base, base_rule, goal, rule,
                            when, looks=looks, speed=speed, accuracy=accuracy)
    comparison.warnings = target_warnings(runs, goal, order)
    comparison.untrained = untrained_accuracy(runs)
    return comparison


def _within(estimate: tuple[float, float, float], low: float, high: float) -> tuple[float, float, float]:
    """An interval cut to the values the quantity can take (an accuracy within [0, 1], a time at least 0)."""
    mean, lo, hi = estimate
    return mean, min(max(lo, low), high), max(min(hi, high), low)


def _paired_ratio(entry: str, base: str, seeds: Mapping[str, list[int]],
                  times: Mapping[tuple[str, int], tuple[float, bool]]) -> tuple[float, float, float, Bound, list[float]]:
    """The entry's time over the baseline's, paired by seed: (ratio, low, high, bound, the per-seed ratios used)."""
    ratios: list[float] = []
    kinds: set[str] = set()
    for s in sorted(set(seeds[entry]) & set(seeds.get(base, []))):
        (t, hit), (tb, hit_b) = times[(entry, s)], times[(base, s)]
        if not hit and not hit_b:
            continue
        if t == 0 or tb == 0:  # a target reached at time 0 (the warning says so): no ratio from this seed
            if t == tb:
                ratios.append(1.0)
            continue
        ratios.append(t / tb)
        if not hit:
            kinds.add("lower")
        elif not hit_b:
            kinds.add("upper")
    if not ratios:
        return math.nan, math.nan, math.nan, "", ratios
    if len(kinds) > 1:
        return math.nan, math.nan, math.nan, "mixed", ratios
    ratio, low, high = ratio_interval(ratios)
    bound: Bound = "lower" if "lower" in kinds else "upper" if "upper" in kinds else ""
    return ratio, low, high, bound, ratios


def step_before(metrics: pd.DataFrame, time: float) -> float:
    """The gap between the evaluation at virtual ``time`` and the one before it (0 for the first): how finely the
    evaluation grid places a time to target."""
    earlier = metrics.loc[metrics["virtual_time"] < time - 1e-9, "virtual_time"]
    return time - float(earlier.iloc[-1]) if len(earlier) else 0.0


def leads(table: pd.DataFrame, seeds: Mapping[str, list[int]], times: Mapping[tuple[str, int], tuple[float, bool]],
          finals: Mapping[tuple[str, int], float], looks: Looks | None = None) -> tuple[Lead, Lead]:
    """Who reaches the target first and who ends most accurate (the module's rule of a winner): the entries at the best
    value, the runner-up, the paired lead over it and whether it is clear. ``table``: the per-entry rows of
    :func:`compare`; ``times``: each run's time to target (or its end, unreached); ``finals``: each run's final
    accuracy."""
    usable = table["ratio"].where(table["ratio_bound"].isin(["", "upper"]))
    speed = Lead()
    if usable.notna().any():
        best = tuple(str(e) for e in table.loc[_at(usable, usable.min()), "entry"])
        ranked = table["ratio"].mask(table["entry"] == table["baseline"], 1.0)  # 1x, even where it never reached it
        ranked = ranked[~table["entry"].isin(best)].dropna()
        speed = Lead(best)
        if len(best) == 1 and len(ranked):
            over = str(table.loc[ranked.idxmin(), "entry"])
            by, low, high, bound, ratios = _paired_ratio(best[0], over, seeds, times)
            if looks is not None and bound != "mixed" and ratios:  # the same look's level as the ratios to the baseline
                _, lo, hi = sequential.interval([math.log(r) for r in ratios], looks, len(seeds[best[0]]))
                low, high = (math.exp(v) if not math.isnan(v) else math.nan for v in (lo, hi))
            speed = Lead(best, over, by, low, high, bound, len(ratios), high < 1.0 and bound in ("", "upper"))
    acc = table["final_accuracy"]
    accuracy = Lead()
    if acc.notna().any():
        best = tuple(str(e) for e in table.loc[_at(acc, acc.max()), "entry"])
        others = table[~table["entry"].isin(best) & acc.notna()]
        accuracy = Lead(best)
        if len(best) == 1 and len(others):
            over = str(others.loc[others["final_accuracy"].idxmax(), "entry"])
            shared = sorted(set(seeds[best[0]]) & set(seeds[over]))
            gaps = [finals[(best[0], s)] - finals[(over, s)] for s in shared]
            gaps = [g for g in gaps if not math.isnan(g)]
            by, low, high = mean_interval(gaps)
            accuracy = Lead(best, over, by, low, high, "", len(gaps), low > 0.0)
    return speed, accuracy


TIE = 1e-9
"""Relative difference within which two values are one (level): means and geometric means of the same numbers summed
in another order differ in their last bits."""


def _at(values: pd.Series, best: float) -> pd.Series:
    """Which of ``values`` are at ``best`` (within :data:`TIE`)."""
    return values.map(lambda v: not math.isnan(v) and math.isclose(v, best, rel_tol=TIE, abs_tol=0.0))


def _mark(table: pd.DataFrame, prefix: str, lead: Lead) -> None:
    """Write ``lead`` into the table's ``prefix`` columns: the mark on every entry at the best, the lead over the
    runner-up and whether it is clear on the one entry there (empty elsewhere)."""
    marked = table["entry"].isin(lead.best)
    alone = marked & (len(lead.best) == 1) & (lead.over is not None)
    table[prefix] = marked
    table[f"{prefix}_over"] = [lead.over if a else "" for a in alone]
    table[f"{prefix}_by"] = [lead.by if a else math.nan for a in alone]
    table[f"{prefix}_by_low"] = [lead.low if a else math.nan for a in alone]
    table[f"{prefix}_by_high"] = [lead.high if a else math.nan for a in alone]
    if prefix == "fastest":
        table[f"{prefix}_by_bound"] = [lead.bound if a else "" for a in alone]
    table[f"{prefix}_clear"] = marked & lead.clear


def target_warnings(runs: Runs, goal: float, order: Sequence[str]) -> list[str]:
    """One line per way the target fails to separate the entries (see the module's rules)."""
    if math.isnan(goal):
        return [f"no target: the runs report no accuracy ({', '.join(order)})"]
    warnings = []
    untrained = untrained_accuracy(runs)
    if goal <= untrained:
        warnings.append(f"the target {percent(goal)} is at or below an untrained model's accuracy (up to "
                        f"{percent(untrained)} at time 0): every time to target is 0 s and says nothing; set a "
                        "higher eval.target")
        return warnings
    early: list[str] = []
    for entry in order:
        mine = [df for (e, _), df in runs.items() if e == entry]
        first = [_first_after_start(df) for df in mine]
        hits = sum(1 for df, t in zip(mine, first, strict=True)
                   if t is not None and time_to_target(df, goal) == t)
        if hits:
            early.append(f"{entry} ({hits} of {len(mine)} seeds)")
    if early:
        every = [t for df in runs.values() if (t := _first_after_start(df)) is not None]
        warnings.append(f"the target {percent(goal)} is reached at the first evaluation after the start "
                        f"({min(every):g} s) by {', '.join(early)}: the evaluation grid cannot tell how much sooner; "
                        "set a smaller eval.every or a higher eval.target")
    return warnings


def untrained_accuracy(runs: Runs) -> float:
    """The highest accuracy among the runs' evaluations at time 0 (NaN when none has one)."""
    found = [float(df["accuracy"].iloc[0]) for df in runs.values()
             if len(df) and float(df["virtual_time"].iloc[0]) == 0.0 and not math.isnan(df["accuracy"].iloc[0])]
    return max(found) if found else math.nan


def _first_after_start(metrics: pd.DataFrame) -> float | None:
    """The virtual time of a run's first evaluation after time 0."""
    after = metrics.loc[metrics["virtual_time"] > 0, "virtual_time"]
    return float(after.iloc[0]) if len(after) else None


# -- in words -----------------------------------------------------------------------------------------------------


def _num(value: float, digits: int = 2) -> str:
    return "" if math.isnan(value) else f"{value:.{digits}f}"


def span(low: float, high: float, show: Callable[[float], str]) -> str:
    """``[low, high]``, or empty without an interval."""
    return "" if math.isnan(low) or math.isnan(high) else f"[{show(low)}, {show(high)}]"


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{100 * value:.1f}"


def accuracy_cell(row: Mapping[str, Any], column: str) -> str:
    """``93.1 [92.0, 94.2]`` (percent)."""
    interval = span(row[f"{column}_low"], row[f"{column}_high"], _pct)
    return f"{_pct(row[column])} {interval}".strip()


def time_cell(row: Mapping[str, Any]) -> str:
    """``120 s [100, 140]``; ``>= 600 s`` when a seed missed the target; an interval narrower than the evaluation step
    before the hits (``time_step``) says so: ``120 s [120, 120] (within one evaluation step of 20 s)``."""
    mark = ">= " if row["time_bound"] else ""
    low, high, step = row["time_to_target_low"], row["time_to_target_high"], row.get("time_step", math.nan)
    interval = span(low, high, lambda v: f"{v:.0f}")
    if interval and high - low < step:
        interval += f" (within one evaluation step of {step:g} s)"
    return f"{mark}{row['time_to_target']:.0f} s {interval}".strip()


_MARKS = {"": "", "lower": ">= ", "upper": "<= "}


def ratio_cell(row: Mapping[str, Any]) -> str:
    """``0.24x [0.20, 0.29]``, with ``>=``/``<=`` for a bound; ``n/a`` when none can be given."""
    if row["ratio_bound"] == "mixed":
        return "n/a (each misses it in some seed)"
    if math.isnan(row["ratio"]):
        return "n/a"
    if row["entry"] == row["baseline"]:
        return "1x"
    interval = span(row["ratio_low"], row["ratio_high"], _num)
    return f"{_MARKS[row['ratio_bound']]}{row['ratio']:.2f}x {interval}".strip()


def verdict(comparison: Comparison) -> str:
    """One line: who reaches the target first, by how much, how sure; who ends most accurate (:class:`Lead`'s rule:
    a tie is level, an entry is named only where its interval against the runner-up excludes a tie)."""
    c = comparison
    if math.isnan(c.target):
        return "no verdict: the runs report no accuracy"
    return f"{_speed_words(c)}{_accuracy_words(c)}{_sequential_note(c)}"


def _names(entries: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return entries[0] if len(entries) == 1 else f"{', '.join(entries[:-1])} and {entries[-1]}"


def _speed_words(c: Comparison) -> str:
    """Who reaches the target first, in words."""
    goal, lead = percent(c.target), c.speed
    if c.target <= c.untrained:
        return f"no verdict on time: the target {goal} is at or below an untrained model's accuracy"
    if not lead.best:
        if not c.table["reached"].any():
            return f"no entry reaches the target {goal} within {c.horizon:g} s"
        return f"no entry reaches the target {goal} in a way that can be compared with {c.baseline}'s"
    first = c.row(lead.best[0])
    if lead.level:
        against = "" if c.baseline in lead.best else f", {_of_baseline(first)}"
        return f"{_names(list(lead.best))} are level at the smallest time to {goal}{against} ({_reached(first)})"
    if lead.over is None:
        who = f"{c.baseline} (the baseline)" if lead.best[0] == c.baseline else lead.best[0]
        alone = "the only entry" if len(c.table) == 1 else "no other entry's time can be compared with it"
        return f"{who} reaches {goal} ({_reached(first)}); {alone}"
    over = c.row(lead.over)
    if lead.best[0] == c.baseline:
        words = (f"{c.baseline} (the baseline) {f'reaches {goal} first' if lead.clear else 'is ahead'} "
                 f"({_reached(first)}); the nearest, {lead.over}, takes {ratio_cell(over)} its time ({_reached(over)})")
    else:
        words = (f"{lead.best[0]} {f'reaches {goal}' if lead.clear else 'is ahead,'} in {_of_baseline(first)} "
                 f"({_reached(first)})")
        if lead.over != c.baseline:
            words += f", {_ratio_lead(lead)} of {lead.over}'s, the next fastest"
    return words if lead.clear else f"not clear which reaches {goal} first: {words}{_unclear(lead, '1x')}"


_BOUND_WORDS = {"upper": "at most ", "lower": "at least "}


def _of_baseline(row: Mapping[str, Any]) -> str:
    """``0.74x fedavg's time [0.59, 0.93]``, ``at most``/``at least`` for a bound."""
    interval = span(row["ratio_low"], row["ratio_high"], _num)
    return (f"{_BOUND_WORDS.get(row['ratio_bound'], '')}{row['ratio']:.2f}x {row['baseline']}'s time"
            f"{' ' + interval if interval else ''}")


def _ratio_lead(lead: Lead) -> str:
    """``0.80x [0.70, 0.91]`` of a time lead, ``at most``/``at least`` for a bound."""
    interval = span(lead.low, lead.high, _num)
    return f"{_BOUND_WORDS.get(lead.bound, '')}{lead.by:.2f}x{' ' + interval if interval else ''}"


def _unclear(lead: Lead, tie: str) -> str:
    """Why a lead names no entry (``tie``: the value of no difference, ``1x`` or ``0``)."""
    if lead.paired < 2:
        return f"; {lead.paired} paired seed, so no interval"
    if lead.bound == "lower":
        return "; that is only a lower bound"
    return f"; the interval includes {tie}"


def _accuracy_words(c: Comparison) -> str:
    """Who ends most accurate, in words (empty when no entry has a final accuracy)."""
    lead = c.accuracy
    if not lead.best:
        return ""
    value = accuracy_cell(c.row(lead.best[0]), "final_accuracy").replace(" [", "% [", 1)
    value = value if "[" in value else value + "%"
    if lead.level:
        return f"; {_names(list(lead.best))} end level at the highest accuracy, {value}"
    if lead.over is None:
        return f"; {lead.best[0]} ends at {value}"
    interval = span(lead.low, lead.high, lambda v: f"{100 * v:+.1f}")
    ahead = f"{100 * lead.by:+.1f} points{' ' + interval if interval else ''} above {lead.over}"
    if not lead.clear:
        return f"; not clear which ends most accurate: {lead.best[0]} is ahead, {value}, {ahead}{_unclear(lead, '0')}"
    fastest = c.fastest
    if lead.best[0] == fastest:  # "it" would read as the nearest entry after the baseline's words
        return f"; {'it' if fastest != c.baseline else fastest} also ends most accurate, {value}, {ahead}"
    return f"; {lead.best[0]} ends most accurate, {value}, {ahead}"


def _sequential_note(c: Comparison) -> str:
    """How many seeds sequential seeds ran and that the ratios' intervals are adjusted for the looks (empty without)."""
    if c.looks is None:
        return ""
    looks = ", ".join(map(str, c.looks.sizes))
    return (f"; sequential seeds: {c.seeds} of at most {c.looks.most}, time-ratio intervals adjusted for the looks at "
            f"{looks} seeds")


def _reached(row: Mapping[str, Any]) -> str:
    return f"{int(row['reached'])} of {int(row['seeds'])} seeds reach it"


def method_note(seeds: int, looks: Looks | None = None) -> str:
    """How the intervals were computed, in one line (``looks``: sequential seeds' plan)."""
    base = (f"Intervals: {100 * CONFIDENCE:g}% over seeds; means with Student's t; the time ratio paired by seed "
            "(seeds share latencies across entries): geometric mean of the per-seed ratios, t interval on their logs. "
            "A run that misses the target counts with its end time, so its mean or ratio is a bound (>= or <=). "
            "Intervals are cut to what the quantity can take (accuracy to [0, 100]%, time to target at 0 s, where a t "
            "interval of few spread-out seeds reaches below). An entry is named fastest or most accurate only when its "
            "interval against the runner-up (time ratio, paired by seed; accuracy difference, paired by seed) excludes "
            "a tie; entries at the same value are level.")
    if looks is not None:
        spent = ", ".join(f"{100 * a:.2f}%" for a in looks.spent)
        base += (f" Sequential seeds: the time ratio's interval is adjusted for the looks at {', '.join(map(str, looks.sizes))}"
                 f" seeds (Lan-DeMets Pocock-type alpha spending, {spent} at each look, a t test per look), so a "
                 f"winner is named at most {100 * sequential.ALPHA:g}% of the time between identical entries however the looks "
                 "stop; the "
                 "accuracy intervals are fixed-sample t intervals.")
    return base + (" One seed: no intervals." if seeds < 2 else "")


def text(c: Comparison) -> str:
    """The terminal form of one comparison."""
    head = ["entry", "final accuracy %", "best %", "time to target", f"time / {c.baseline}", "reached"]
    rows = [[str(r["entry"]), accuracy_cell(r, "final_accuracy"), accuracy_cell(r, "best_accuracy"), time_cell(r),
             ratio_cell(r), f"{int(r['reached'])}/{int(r['seeds'])}"] for r in c.table.to_dict("records")]
    if c.looks is not None:
        head.append(STOPPED)
        for row, r in zip(rows, c.table.to_dict("records"), strict=True):
            row.append(str(r[STOPPED]))
    widths = [max(len(x) for x in column) for column in zip(head, *rows, strict=True)]
    lines = [f"target: {percent(c.target)} accuracy, {c.target_rule}; final accuracy read at {c.horizon:g} s",
             f"baseline: {c.baseline} ({c.baseline_rule})"]
    lines += ["  ".join(x.ljust(w) for x, w in zip(line, widths, strict=True)).rstrip() for line in [head, *rows]]
    lines.append(method_note(c.seeds, c.looks))
    lines += [f"warning: {w}" for w in c.warnings]
    lines.append(f"verdict: {c.verdict}")
    return "\n".join(lines)


def markdown(comparisons: Sequence[Comparison]) -> str:
    """comparison.md of one or more comparisons (a sweep's grid points, a report's groups), each under its name."""
    lines: list[str] = []
    for c in comparisons:
        lines += [f"## {c.name}" if len(comparisons) > 1 else f"# Comparison: {c.name}", "", f"**{c.verdict}**", ""]
        extra = c.looks is not None
        lines += [f"| entry | final accuracy (%) | best accuracy (%) | time to target | time / {c.baseline} | reached |"
                  + (" stopped |" if extra else ""), "|---|---:|---:|---:|---:|---:|" + ("---|" if extra else "")]
        for r in c.table.to_dict("records"):
            lines.append(f"| {r['entry']} | {accuracy_cell(r, 'final_accuracy')} | {accuracy_cell(r, 'best_accuracy')} | "
                         f"{time_cell(r)} | {ratio_cell(r)} | {int(r['reached'])}/{int(r['seeds'])} |"
                         + (f" {r[STOPPED]} |" if extra else ""))
        lines += ["", f"- Target: {percent(c.target)} accuracy, {c.target_rule}.",
                  f"- Baseline: {c.baseline} ({c.baseline_rule}).",
                  f"- Final accuracy is read at {c.horizon:g} s of virtual time, the latest every run reached.",
                  f"- {method_note(c.seeds, c.looks)}"]
        lines += [f"- Warning: {w}" for w in c.warnings]
        lines.append("")
    return "\n".join(lines)


def frame(items: Sequence[tuple[Mapping[str, Any], Comparison]]) -> pd.DataFrame:
    """comparison.csv's rows: one per entry of each comparison, its swept values (if any) as the first columns."""
    keys = list(dict.fromkeys(k for values, _ in items for k in values))
    parts = []
    for values, c in items:
        part = c.table.copy()
        for i, key in enumerate(keys):
            part.insert(i, key, values.get(key))
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=[*keys, *COLUMNS])
    return pd.concat(parts, ignore_index=True)


def write(folder: Path, items: Sequence[tuple[Mapping[str, Any], Comparison]]) -> list[Path]:
    """Write comparison.csv and comparison.md into ``folder`` (each through a temporary file); returns them."""
    import os

    from simfl import outdir
    from simfl.output.results import write_csv

    table = frame(items)
    csv_path = outdir.writable(folder, "comparison.csv")
    rows = [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
            for r in table.to_dict("records")]
    write_csv(csv_path, list(table.columns), rows)  # an interval that cannot be given is an empty cell
    md_path = outdir.writable(folder, "comparison.md")
    tmp = md_path.with_name(md_path.name + ".tmp")
    with outdir.room(md_path, tmp):
        tmp.write_text(markdown([c for _, c in items]))
    os.replace(tmp, md_path)
    return [csv_path, md_path]
