"""Figures: accuracy vs virtual time per algorithm, and where each rule wins across a sweep.

Files are drawn on a standalone :class:`~matplotlib.figure.Figure` (rendered by Agg when
saved), so importing this module changes no global matplotlib state and leaves pyplot's
backend (for instance a notebook's inline one) alone.

Every figure says what it shows: accuracy axes in percent, time in virtual seconds, the target as a
dashed line with its value, and a legend title naming the band (the mean over seeds and its 95% interval,
:mod:`simfl.output.comparison`'s Student-t interval, at each evaluation time) and how many seeds it holds.

:func:`accuracy_vs_time` draws one scenario; :func:`accuracy_panels` draws one panel per scenario side by
side, like the paper's Figure 4; :func:`sweep_figure` draws, per swept value, each entry's time to target
relative to the baseline and its final accuracy, with intervals, and what each value's comparison names fastest
(read from it: the comparison's one rule of a winner, :class:`~simfl.output.comparison.Lead`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, PercentFormatter

from simfl import outdir
from simfl.output.comparison import Comparison, t_half
from simfl.output.target import percent

Metrics = Mapping[tuple[str, int], pd.DataFrame]


def band_title(metrics: Metrics) -> str:
    """What the lines and bands of :func:`draw` are, and over how many seeds."""
    counts = sorted({sum(1 for a, _ in metrics if a == algo) for algo in dict.fromkeys(a for a, _ in metrics)})
    seeds = f"{counts[0]} seed{'s' if counts[0] > 1 else ''}" if len(counts) == 1 else \
        f"{counts[0]}-{counts[-1]} seeds"
    if counts[-1] < 2:
        return f"{seeds}, no band"
    return f"mean of {seeds} ± 95% interval"


def draw(ax: Axes, metrics: Metrics, colors: Mapping[str, str] | None = None, target: float | None = None) -> None:
    """Mean accuracy per algorithm and its 95% interval over seeds on ``ax`` (runs keyed by (label, seed)); the
    target as a dashed line when given."""
    algorithms = list(dict.fromkeys(a for a, _ in metrics))
    for algo in algorithms:
        runs = [df.set_index("virtual_time")["accuracy"] for (a, _), df in metrics.items() if a == algo]
        runs = [r[~r.index.duplicated(keep="last")] for r in runs]
        table = pd.concat(runs, axis=1).sort_index().ffill()
        mean = table.mean(axis=1)
        color = colors.get(algo) if colors else None
        (line,) = ax.plot(mean.index, mean.values, label=algo, linewidth=1.5, color=color)
        if table.shape[1] > 1:
            n = table.notna().sum(axis=1).to_numpy(dtype=float)
            half = np.where(n > 1, t_half(table.std(axis=1, ddof=1).to_numpy(), np.maximum(n, 2)), np.nan)
            low, high = np.clip(mean - half, 0.0, 1.0), np.clip(mean + half, 0.0, 1.0)
            ax.fill_between(table.index, low, high, color=line.get_color(), alpha=0.2, linewidth=0)
    if target is not None and not math.isnan(target):
        ax.axhline(target, color="0.35", linestyle="--", linewidth=0.9)
        ax.annotate(f"target {percent(target)}", (0.01, target), xycoords=("axes fraction", "data"), ha="left",
                    va="bottom", fontsize=7, color="0.35")
    ax.set_xlabel("virtual time (s)")
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.grid(alpha=0.3)


def save(fig: Figure, out: Path) -> None:
    """Write ``fig`` to ``out`` through a temporary file and close it."""
    tmp = out.with_name(out.name + ".tmp" + out.suffix)
    with outdir.room(out, tmp):
        fig.savefig(tmp)
    tmp.replace(out)


def accuracy_vs_time(metrics: Metrics, out: Path, title: str = "", target: float | None = None) -> None:
    """Write the accuracy-vs-virtual-time figure of runs keyed by (algorithm, seed) to ``out``."""
    fig = Figure(figsize=(6.4, 4.2), dpi=120)
    ax = fig.subplots()
    draw(ax, metrics, target=target)
    ax.set_ylabel("test accuracy")
    if title:
        ax.set_title(title, fontsize=9)
    ax.legend(frameon=False, fontsize=8, title=band_title(metrics), title_fontsize=8, loc="lower right")
    fig.tight_layout()
    save(fig, out)


def accuracy_panels(groups: Sequence[tuple[str, Metrics]], out: Path, columns: int = 5,
                    targets: Sequence[float] | None = None) -> None:
    """One accuracy-vs-time panel per (title, runs) group, the same colour per algorithm (paper Figure 4), each with
    its target (``targets``, one per group) when given."""
    if not groups:
        raise ValueError("no groups to draw")
    algorithms = list(dict.fromkeys(a for _, metrics in groups for a, _ in metrics))
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {a: cycle[i % len(cycle)] for i, a in enumerate(algorithms)}
    cols = min(columns, len(groups))
    rows = math.ceil(len(groups) / cols)
    ncol = max(1, min(len(algorithms), int(3.6 * cols / 1.2)))  # about 1.2 inches per legend entry
    legend = 0.25 * math.ceil(len(algorithms) / ncol) + 0.45  # inches below the panels
    height = 3.0 * rows + legend
    fig = Figure(figsize=(3.6 * cols, height), dpi=120)
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, (ax, (title, metrics)) in enumerate(zip(axes.flat, groups, strict=False)):
        draw(ax, metrics, colors, None if targets is None else targets[i])
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy")
    handles = [Line2D([], [], color=colors[a], linewidth=1.5) for a in algorithms]
    merged = {a: df for _, metrics in groups for a, df in metrics.items()}
    fig.legend(handles, algorithms, loc="lower center", ncol=ncol, frameon=False, title=band_title(merged),
               title_fontsize=8)
    fig.tight_layout(rect=(0, legend / height, 1, 1))
    save(fig, out)


# -- a sweep: where each rule wins ----------------------------------------------------------------------------------

_BOUND_MARKERS = {"": "o", "upper": "v", "lower": "^"}
WINNER_EDGE = "black"
"""The edge of the marker of the entry a grid point's comparison names fastest."""


def lead_title(comparison: Comparison) -> str:
    """What a grid point's comparison says of who reaches the target first, in a few words: the entry it names
    (:class:`~simfl.output.comparison.Lead`'s rule), the entries that are level, ``not clear``, or ``none``."""
    lead = comparison.speed
    if not lead.best:
        return "fastest: none"
    if lead.level:
        return f"level: {', '.join(lead.best)}"
    return f"fastest: {lead.named}" if lead.clear else "fastest: not clear"


_TICK_STEPS = ((1.0, 2.0, 5.0), (1.0, 2.0, 3.0, 5.0), tuple(float(m) for m in range(1, 10)),
               (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.8, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0))
"""The multiples of each power of ten a log axis may label, coarsest first."""


def plain_log_ticks(ax: Axes) -> None:
    """Plain tick labels (0.5, 1, 2) on ``ax``'s log y axis, never ``2x10^0``: the coarsest of :data:`_TICK_STEPS`
    whose values in view are at least three and leave no gap of more than 40% of the axis (0.8, 0.9, 1, 1.1, 1.2 on
    a narrow one)."""
    low, high = ax.get_ylim()
    if not 0 < low < high:
        return
    decades = range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
    span = math.log(high / low)
    ticks: list[float] = []
    for steps in _TICK_STEPS:
        ticks = sorted(m * 10.0 ** d for d in decades for m in steps if low <= m * 10.0 ** d <= high)
        edges = [low, *ticks, high]
        if len(ticks) >= 3 and max(math.log(b / a) for a, b in itertools.pairwise(edges)) <= 0.4 * span:
            break
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:.3g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(low, high)


def sweep_figure(points: Sequence[tuple[str, Comparison]], key: str, title: str) -> Figure:
    """Per swept value (``points``: its label and comparison): each entry's time to target over the baseline's
    (log scale) above its final accuracy, both with 95% intervals; on top, what the value's comparison names fastest
    (the entry, ``level``, ``not clear``), and that entry's marker edged in black; each value's target in its tick
    label (the ratios of two values refer to two targets). ``key``: the swept key's axis name."""
    entries = list(dict.fromkeys(e for _, c in points for e in c.table["entry"]))
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {e: cycle[i % len(cycle)] for i, e in enumerate(entries)}
    width = 0.7 / max(1, len(entries))
    ncol = min(len(entries) + 4, 6)
    fig = Figure(figsize=(max(5.0, 1.3 * len(points) + 2.5, 1.6 * ncol), 6.4), dpi=120)
    top, bottom = fig.subplots(2, 1, sharex=True)
    missing = False
    for i, entry in enumerate(entries):
        offset = (i - (len(entries) - 1) / 2) * width
        for j, (_, c) in enumerate(points):
            found = c.table[c.table["entry"] == entry]
            if not len(found):
                continue
            row = found.iloc[0]
            x = j + offset
            _point(bottom, x, row["final_accuracy"], row["final_accuracy_low"], row["final_accuracy_high"],
                   colors[entry], "o")
            if row["ratio_bound"] in _BOUND_MARKERS and not math.isnan(row["ratio"]):
                _point(top, x, row["ratio"], row["ratio_low"], row["ratio_high"], colors[entry],
                       _BOUND_MARKERS[row["ratio_bound"]], edge=WINNER_EDGE if entry == c.fastest else None)
            else:
                missing = True
                top.annotate("n/a", (x, 0.0), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=7,
                             rotation=90, color=colors[entry])
    for j, (_, c) in enumerate(points):
        top.annotate(lead_title(c), (j, 1.0), xycoords=("data", "axes fraction"), ha="center", va="bottom", fontsize=8,
                     fontweight="bold")
    top.set_yscale("log")
    top.axhline(1.0, color="0.35", linestyle="--", linewidth=0.8)
    plain_log_ticks(top)
    baselines = {c.baseline for _, c in points}
    shown = baselines.pop() if len(baselines) == 1 else "the baseline"
    top.set_ylabel(f"time to target over {shown}'s\n(log scale)")
    bottom.set_ylabel("final accuracy")
    bottom.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    bottom.set_xticks(range(len(points)), [f"{label}\ntarget {percent(c.target)}" for label, c in points], fontsize=8)
    bottom.set_xlabel(key)
    seeds = max((c.seeds for _, c in points), default=0)
    handles = [Line2D([], [], color=colors[e], marker="o", linestyle="") for e in entries]
    labels = list(entries)
    handles += [Line2D([], [], color="0.4", marker=m, linestyle="") for m in ("^", "v")]
    labels += ["at least (a seed missed the target)", "at most (the baseline missed it)"]
    handles += [Line2D([], [], color="0.4", marker="o", linestyle="", markeredgecolor=WINNER_EDGE, markeredgewidth=1.4),
                Line2D([], [], color="0.35", linestyle="--", linewidth=0.8)]
    labels += ["black edge: named fastest (its interval against the next excludes 1x)", f"1x: {shown}'s time"]
    notes = ["bars: 95% interval" if seeds > 1 else "one seed: no interval, no entry named"]
    if missing:
        notes.append("n/a: no ratio (each missed the target in some seed)")
    fig.legend(handles, labels, loc="lower center", ncol=min(ncol, 3), frameon=False, fontsize=8,
               title=f"{seeds} seed{'s' if seeds != 1 else ''} per value; " + "; ".join(notes), title_fontsize=8)
    for ax in (top, bottom):
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=10)
    rows = math.ceil(len(labels) / min(ncol, 3))
    fig.tight_layout(rect=(0, (0.35 + 0.2 * rows) / 6.4, 1, 1))
    return fig


def _point(ax: Axes, x: float, y: float, low: float, high: float, color: str, marker: str,
           edge: str | None = None) -> None:
    """One estimate with its interval as an error bar (none when the interval is empty)."""
    if math.isnan(y):
        return
    err = None if math.isnan(low) or math.isnan(high) else [[max(y - low, 0.0)], [max(high - y, 0.0)]]
    ax.errorbar([x], [y], yerr=err, fmt=marker, color=color, capsize=2, markersize=5,
                markeredgecolor=edge or color, markeredgewidth=1.4 if edge else 1.0)


def write_sweep_figure(points: Sequence[tuple[str, Comparison]], key: str, title: str, out: Path) -> None:
    """:func:`sweep_figure`, saved to ``out``."""
    save(sweep_figure(points, key, title), out)
