"""The motivating study of the paper (section 2.2, Figure 2): a fast and a slow client with disjoint classes.

Run ``scenarios/studies/motivation.yaml`` with ``simfl sweep`` (it records the
last hidden layer via ``record: {layer: ...}``), then draw

- ``motivation_accuracy.png`` (Figure 2a): global accuracy vs virtual time, one
  line per run, a marker at every update of the slow client (the client with
  the longest mean latency in events.csv), placed on the first evaluation that
  includes it;
- ``motivation_heatmap.png`` (Figure 2b): the change of the recorded layer after
  every update, averaged over each neuron's incoming weights (rows = neurons,
  columns = updates; red = increase, blue = decrease), for the run whose slow
  client is slowest; ticks above mark the slow client's updates.

Usage: ``python -m simfl.studies.motivation RESULTDIR [--out DIR] [--algorithm fedasync]``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from matplotlib.figure import Figure

from simfl.errors import InputError
from simfl.output.plots import save
from simfl.output.recording import LAYER_CHANGES
from simfl.output.report import find_result_folders


@dataclass
class MotivationRun:
    """One recorded run of the study."""

    label: str
    slow_client: int
    slow_latency: float
    metrics: pd.DataFrame
    events: pd.DataFrame
    changes: np.ndarray | None
    layer: str | None


def load_runs(result_dir: Path, algorithm: str = "fedasync") -> list[MotivationRun]:
    """Every run of ``algorithm`` under ``result_dir`` (first seed of each result folder), slowest last."""
    runs: list[MotivationRun] = []
    for folder in find_result_folders([result_dir]):
        seeds = sorted(p for p in (folder / algorithm).glob("seed*") if (p / "metrics.csv").is_file())
        if not seeds:
            continue
        run = seeds[0]
        events = pd.read_csv(run / "events.csv")
        events = events[events["event"] == "arrival"]
        if events.empty:
            raise InputError(str(run / "events.csv"), "holds no arrivals")
        mean_latency = events.groupby("client")["latency"].mean()
        slow = int(mean_latency.idxmax())
        scn = yaml.safe_load((folder / "scenario.yaml").read_text()) or {}
        record = scn.get("record") or {}
        changes_file = run / f"{LAYER_CHANGES}.npy"
        runs.append(MotivationRun(
            label=f"slow client {mean_latency[slow]:g} s", slow_client=slow, slow_latency=float(mean_latency[slow]),
            metrics=pd.read_csv(run / "metrics.csv"), events=events,
            changes=np.load(changes_file) if changes_file.is_file() else None, layer=record.get("layer"),
        ))
    if not runs:
        raise InputError(str(result_dir), f"holds no {algorithm} run (expected <folder>/{algorithm}/seed<k>/metrics.csv)")
    return sorted(runs, key=lambda r: r.slow_latency)


def neuron_changes(changes: np.ndarray) -> np.ndarray:
    """(neurons, updates): each output neuron's mean weight change per update, from (updates, out, in...)."""
    if changes.ndim < 2:
        return changes.reshape(len(changes), -1).T
    return changes.reshape(changes.shape[0], changes.shape[1], -1).mean(axis=2).T


def draw_accuracy(runs: Sequence[MotivationRun], out: Path) -> None:
    """Figure 2a: accuracy traces with markers on the slow client's updates."""
    fig = Figure(figsize=(6.0, 3.8), dpi=120)
    ax = fig.subplots()
    for run in runs:
        m = run.metrics
        (line,) = ax.plot(m["virtual_time"], m["accuracy"], linewidth=1.2, label=run.label)
        slow_times = run.events.loc[run.events["client"] == run.slow_client, "time"].to_numpy()
        idx = np.searchsorted(m["virtual_time"].to_numpy(), slow_times - 1e-9)
        idx = idx[idx < len(m)]
        ax.plot(m["virtual_time"].to_numpy()[idx], m["accuracy"].to_numpy()[idx], "o", color=line.get_color(),
                markersize=4)
    ax.set_xlabel("virtual time (s)")
    ax.set_ylabel("global test accuracy")
    ax.set_title("markers: updates of the slow client", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout()
    save(fig, out)


def draw_heatmap(run: MotivationRun, out: Path) -> None:
    """Figure 2b: neurons x updates heatmap of the recorded layer's global change."""
    if run.changes is None:
        raise InputError(run.label, f"no {LAYER_CHANGES}.npy recorded; set record: {{layer: <tensor name>}} "
                         "in the scenario and run it again")
    grid = neuron_changes(run.changes)
    vmax = float(np.percentile(np.abs(grid), 99)) or 1.0
    fig = Figure(figsize=(7.0, 3.8), dpi=120)
    ax = fig.subplots()
    image = ax.imshow(grid, aspect="auto", cmap="RdBu_r", vmin=-vmax, vmax=vmax, interpolation="nearest",
                      extent=(0.5, grid.shape[1] + 0.5, grid.shape[0] - 0.5, -0.5))
    slow_updates = run.events.loc[run.events["client"] == run.slow_client, "update"].dropna().astype(int)
    ax.plot(slow_updates, np.full(len(slow_updates), -0.5), "v", color="black", markersize=4, clip_on=False)
    ax.set_xlabel("update")
    ax.set_ylabel("neuron")
    ax.set_title(f"global change of {run.layer or 'the recorded layer'} ({run.label}; ▼ slow client)", fontsize=9)
    fig.colorbar(image, ax=ax, label="mean weight change")
    fig.tight_layout()
    save(fig, out)


def draw(result_dir: Path, out: Path | None = None, algorithm: str = "fedasync") -> list[Path]:
    """Both figures of the study from the result folders under ``result_dir``; returns the files written."""
    runs = load_runs(result_dir, algorithm)
    out = result_dir if out is None else out
    out.mkdir(parents=True, exist_ok=True)
    acc, heat = out / "motivation_accuracy.png", out / "motivation_heatmap.png"
    draw_accuracy(runs, acc)
    draw_heatmap(runs[-1], heat)
    return [acc, heat]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simfl.studies.motivation RESULTDIR``: one-line errors, exit code 2."""
    parser = argparse.ArgumentParser(prog="python -m simfl.studies.motivation", description=__doc__.splitlines()[0])
    parser.add_argument("result_dir", type=Path, help="sweep or run folder of scenarios/studies/motivation.yaml")
    parser.add_argument("--out", type=Path, default=None, help="where to write the PNGs (default: RESULTDIR)")
    parser.add_argument("--algorithm", default="fedasync", help="algorithm whose runs are drawn")
    args = parser.parse_args(argv)
    try:
        written = draw(args.result_dir, args.out, args.algorithm)
    except InputError as exc:
        print(f"simfl: {exc}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(str(p) for p in written))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
