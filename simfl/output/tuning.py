"""The figure of a tune: each trial's score, per entry, and the best so far (``simfl tune``'s ``trials.png``)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from simfl.output.plots import save


def trials_figure(table: pd.DataFrame, out: Path, score: str, title: str = "") -> None:
    """Write the score of every finished trial (columns ``entry``, ``trial``, ``score``) against its number, one
    colour per entry, with each entry's best so far as a step line, to ``out``."""
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    ax = fig.subplots()
    done = table.dropna(subset=["score"])
    for entry in dict.fromkeys(table["entry"]):
        rows = done[done["entry"] == entry].sort_values("trial")
        if rows.empty:
            continue
        (dots,) = ax.plot(rows["trial"], rows["score"], "o", markersize=4, alpha=0.6)
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
    fig.tight_layout()
    save(fig, out)
