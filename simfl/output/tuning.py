"""The figure of a tune: each trial's score, per entry, and the best so far (``simfl tune``'s ``trials.png``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simfl.output.plots import save

RUNG_PREFIX = "score_at_"
"""trials.csv's columns of halving's rung scores: ``score_at_<t>s``."""


def trials_figure(table: pd.DataFrame, out: Path, score: str, title: str = "") -> None:
    """Write the score of every trial that ran the whole budget (columns ``entry``, ``trial``, ``score``; with
    halving, ``state``) against its number, one colour per entry, with each entry's best so far as a step line, to
    ``out``. With halving (``score_at_<t>s`` columns) a second panel draws each trial's score at every rung it
    reached against the rung's virtual time: lines that cross between rungs say the early ranking was a poor guide
    for that entry (docs/fair-comparisons.md)."""
    rungs = [c for c in table.columns if c.startswith(RUNG_PREFIX)]
    fig = Figure(figsize=(11.0 if rungs else 6.4, 4.0), dpi=120)
    axes = fig.subplots(1, 2) if rungs else [fig.subplots()]
    ax = axes[0]
    done = table.dropna(subset=["score"])
    if "state" in done.columns:
        done = done[done["state"] != "pruned"]
    colours: dict[str, Any] = {}
    for entry in dict.fromkeys(table["entry"]):
        rows = done[done["entry"] == entry].sort_values("trial")
        if rows.empty:
            (line,) = ax.plot([], [])
            colours[entry] = line.get_color()
            continue
        (dots,) = ax.plot(rows["trial"], rows["score"], "o", markersize=4, alpha=0.6)
        colours[entry] = dots.get_color()
        ax.step(rows["trial"], rows["score"].cummax(), where="post", color=dots.get_color(), label=entry,
                linewidth=1.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("trial (dots: each trial's score; lines: the best so far)")
    ax.set_ylabel(f"{score.replace('_', ' ')} (validation)")
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title)
    if len(ax.get_legend_handles_labels()[0]):
        ax.legend(frameon=False, fontsize="small")
    if rungs:
        _rungs_panel(axes[1], table, rungs, colours)
    fig.tight_layout()
    save(fig, out)


def _rungs_panel(ax: Axes, table: pd.DataFrame, rungs: list[str], colours: dict[str, Any]) -> None:
    """Each trial's score at the rungs it reached (halving), a line per trial in its entry's colour."""
    times = [float(c[len(RUNG_PREFIX):].removesuffix("s")) for c in rungs]
    for _, row in table.iterrows():
        values = pd.to_numeric(row[rungs], errors="coerce").to_numpy(dtype=float)
        reached = [(t, v) for t, v in zip(times, values, strict=True) if v == v]
        if reached:
            ax.plot(*zip(*reached, strict=True), "-o", markersize=3, linewidth=1.0, alpha=0.6,
                    color=colours.get(str(row["entry"])))
    ax.set_xscale("log")
    ax.set_xticks(times, [f"{t:g}" for t in times])
    ax.set_xlabel("virtual time of the rung (s; a line ends where halving pruned its trial)")
    ax.set_ylabel("score at the rung (validation)")
    ax.grid(alpha=0.3)
