"""What each live tracker adds to a run: its start in a process, its cost per run and per evaluation.

A tiny pure-latency scenario (no training, so the trackers' share is all that differs) runs in one process with
``tracking: {<tracker>: ...}`` and without, at two evaluation grids (``--evals`` points each), alternating, medians
of ``--repeat``. Per tracker: ``<t>_start_s`` (its first run in the process less a later one: the package's import
and, for MLflow, the SQLite store's creation), ``<t>_run_s`` (a later run less the untracked one, less its
evaluations) and ``<t>_eval_s`` (the slope over the two grids). ``--write`` stores them as the estimate's constants
(``TRACKER_<T>_START_SECONDS``, ``..._RUN_SECONDS``, ``..._EVAL_SECONDS``) through :func:`benchmarks.costs.refit`.

    python -m benchmarks.trackers [--repeat 3] [--write]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TRACKERS = {"tensorboard": {}, "mlflow": {}}
"""The trackers measured, each with its section (defaults: beside the results folder)."""
EVALS = (20, 200)
"""Evaluation points of the two grids."""
BUDGET = 100.0
"""Virtual seconds of each run."""


def scenario(tracker: str | None, evals: int) -> dict[str, Any]:
    """Four clients in constant rounds, no training, ``evals`` evaluations, one entry."""
    raw: dict[str, Any] = {
        "name": "trackers",
        "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 80, "test_size": 20, "features": 4, "classes": 2,
                 "partition": {"kind": "iid", "clients": 4}},
        "model": {"name": "mlp", "hidden": [4]},
        "latency": {"model": "constant", "seconds": [1.0, 2.0, 3.0, 4.0]},
        "budget": {"time": BUDGET},
        "eval": {"every": BUDGET / evals},
        "executor": {"kind": "none"},
        "algorithms": [{"name": "fedasync"}],
    }
    if tracker is not None:
        raw["tracking"] = {tracker: TRACKERS[tracker]}
    return raw


def timed(raw: dict[str, Any], folder: Path, name: str) -> float:
    """Wall seconds of one run of ``raw`` into ``folder/name``."""
    import simfl

    start = time.perf_counter()
    simfl.run(raw, folder / name, quiet=True)
    return time.perf_counter() - start


def measure(repeat: int) -> dict[str, float]:
    """The three figures per tracker (see the module's documentation)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        timed(scenario(None, EVALS[0]), folder, "warm")  # simfl's own first-run costs, paid before any tracker
        for tracker in TRACKERS:
            first = timed(scenario(tracker, EVALS[0]), folder, f"{tracker}-first")
            walls: dict[tuple[str, int], list[float]] = {}
            for r in range(repeat):
                for evals in EVALS:
                    for kind in (None, tracker):
                        key = (kind or "none", evals)
                        walls.setdefault(key, []).append(timed(scenario(kind, evals), folder,
                                                               f"{tracker}-{key[0]}-{evals}-{r}"))
            med = {k: statistics.median(v) for k, v in walls.items()}
            lo, hi = EVALS
            eval_s = ((med[(tracker, hi)] - med[("none", hi)]) - (med[(tracker, lo)] - med[("none", lo)])) / (hi - lo)
            run_s = med[(tracker, lo)] - med[("none", lo)] - lo * eval_s
            out[f"{tracker}_start_s"] = max(first - med[(tracker, lo)], 0.0)
            out[f"{tracker}_run_s"] = max(run_s, 0.0)
            out[f"{tracker}_eval_s"] = max(eval_s, 0.0)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="store the figures in simfl/schema/costs.json")
    args = parser.parse_args(argv)
    figures = measure(args.repeat)
    for name, value in figures.items():
        print(f"{name}={value:.4f}")
    if args.write:
        from benchmarks.costs import refit

        values = {f"TRACKER_{name.split('_')[0].upper()}_{name.split('_')[1].upper()}_SECONDS": round(value, 4)
                  for name, value in figures.items()}
        notes = ", ".join(f"{k}={v:.4f}" for k, v in figures.items())
        for line in refit(values, f"python -m benchmarks.trackers --repeat {args.repeat} --write", notes):
            print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
