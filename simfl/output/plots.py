"""Figures: accuracy vs virtual time, one line per algorithm with the mean and a min-max band over seeds.

Files are drawn on a standalone :class:`~matplotlib.figure.Figure` (rendered by Agg when
saved), so importing this module changes no global matplotlib state and leaves pyplot's
backend (for instance a notebook's inline one) alone.

:func:`accuracy_vs_time` draws one scenario; :func:`accuracy_panels` draws one
panel per scenario side by side, like the paper's Figure 4.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from simfl import outdir

Metrics = Mapping[tuple[str, int], pd.DataFrame]


def draw(ax: Axes, metrics: Metrics, colors: Mapping[str, str] | None = None) -> None:
    """Mean accuracy per algorithm and its min-max band over seeds on ``ax`` (runs keyed by (label, seed))."""
    algorithms = list(dict.fromkeys(a for a, _ in metrics))
    for algo in algorithms:
        runs = [df.set_index("virtual_time")["accuracy"] for (a, _), df in metrics.items() if a == algo]
        runs = [r[~r.index.duplicated(keep="last")] for r in runs]
        table = pd.concat(runs, axis=1).sort_index().ffill()
        mean = table.mean(axis=1)
        color = colors.get(algo) if colors else None
        (line,) = ax.plot(mean.index, mean.values, label=algo, linewidth=1.5, color=color)
        if table.shape[1] > 1:
            ax.fill_between(table.index, table.min(axis=1), table.max(axis=1), color=line.get_color(), alpha=0.2)
    ax.set_xlabel("virtual time (s)")
    ax.grid(alpha=0.3)


def save(fig: Figure, out: Path) -> None:
    """Write ``fig`` to ``out`` through a temporary file and close it."""
    tmp = out.with_name(out.name + ".tmp" + out.suffix)
    with outdir.room(out, tmp):
        fig.savefig(tmp)
    tmp.replace(out)


def accuracy_vs_time(metrics: Metrics, out: Path, title: str = "") -> None:
    """Write the accuracy-vs-virtual-time figure of runs keyed by (algorithm, seed) to ``out``."""
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    ax = fig.subplots()
    draw(ax, metrics)
    ax.set_ylabel("test accuracy")
    if title:
        ax.set_title(title)
    ax.legend(frameon=False)
    fig.tight_layout()
    save(fig, out)


def accuracy_panels(groups: Sequence[tuple[str, Metrics]], out: Path, columns: int = 5) -> None:
    """One accuracy-vs-time panel per (title, runs) group, the same colour per algorithm (paper Figure 4)."""
    if not groups:
        raise ValueError("no groups to draw")
    algorithms = list(dict.fromkeys(a for _, metrics in groups for a, _ in metrics))
    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {a: cycle[i % len(cycle)] for i, a in enumerate(algorithms)}
    cols = min(columns, len(groups))
    rows = math.ceil(len(groups) / cols)
    ncol = max(1, min(len(algorithms), int(3.6 * cols / 1.2)))  # about 1.2 inches per legend entry
    legend = 0.25 * math.ceil(len(algorithms) / ncol) + 0.2  # inches below the panels
    height = 3.0 * rows + legend
    fig = Figure(figsize=(3.6 * cols, height), dpi=120)
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, (title, metrics) in zip(axes.flat, groups, strict=False):
        draw(ax, metrics, colors)
        ax.set_title(title, fontsize=9)
    for ax in axes.flat[len(groups):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("test accuracy")
    handles = [Line2D([], [], color=colors[a], linewidth=1.5) for a in algorithms]
    fig.legend(handles, algorithms, loc="lower center", ncol=ncol, frameon=False)
    fig.tight_layout(rect=(0, legend / height, 1, 1))
    save(fig, out)
