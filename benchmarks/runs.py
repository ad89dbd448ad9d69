"""Wall time of a whole scenario with its runs one after another and side by side, and whether the files agree.

The MNIST paper scenario (``scenarios/paper/mnist.yaml``: 8 entries, LeNet5, E = 5) at a
reduced budget and two seeds, i.e. 16 units, run by ``simfl run`` twice in this process's
run: with ``--workers 1`` and with ``--workers N`` (default: the cores). Every result file is
compared byte for byte (summary.csv without its ``wall_seconds`` column, which measures the
machine). Prints ``name=value`` lines: the per-unit wall seconds of the serial run (from its
summary.csv), the wall seconds of both runs, the projected wall time of the full scenario
(3 seeds, 12,000 s) on 1, 2 and 64 cores and on a 4 x 64-core cluster from those per-unit
times, and last ``runs_speedup`` (serial / parallel wall).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "paper" / "mnist.yaml"
FULL_BUDGET = 12_000.0
FULL_SEEDS = 3


def launch(out: Path, workers: int, budget: float, seeds: str) -> float:
    """Wall seconds of one ``simfl run`` of the reduced scenario into ``out``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SIMFL_WORKERS", None)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "simfl", "run", str(SCENARIO), "--set", f"budget.time={budget:g}",
                    "--seeds", seeds, "--out", str(out), "--workers", str(workers), "--quiet"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def files(out: Path) -> dict[str, bytes]:
    """Every result file; summary.csv without wall_seconds."""
    found = {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    found["summary.csv"] = pd.read_csv(out / "summary.csv").drop(columns="wall_seconds").to_csv(index=False).encode()
    return found


def makespan(seconds: list[float], workers: int) -> float:
    """Wall time of units of ``seconds`` over ``workers``, longest first to the least loaded (LPT)."""
    loads = [0.0] * max(1, workers)
    for s in sorted(seconds, reverse=True):
        loads[loads.index(min(loads))] += s
    return max(loads)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1200.0, help="virtual seconds per run")
    parser.add_argument("--seeds", default="0,1", help="seeds (comma-separated)")
    parser.add_argument("--workers", type=int, default=len(os.sched_getaffinity(0)), help="the parallel run's workers")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="simfl-bench-runs-"))
    try:
        serial = launch(work / "one", 1, args.budget, args.seeds)
        parallel = launch(work / "many", args.workers, args.budget, args.seeds)
        one, many = files(work / "one"), files(work / "many")
        same = one == many
        summary = pd.read_csv(work / "one" / "summary.csv")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    units = summary["wall_seconds"].tolist()
    print(f"cores={len(os.sched_getaffinity(0))}")
    print(f"units={len(units)}")
    print(f"budget={args.budget:g}")
    for (name, seed), wall in zip(zip(summary["algorithm"], summary["seed"], strict=True), units, strict=True):
        print(f"unit_seconds[{name},seed{seed}]={wall:.1f}")
    print(f"files_compared={len(one)}")
    print(f"files_identical={same}")
    print("serial_workers=1")
    print(f"serial_wall_seconds={serial:.1f}")
    print(f"parallel_workers={args.workers}")
    print(f"parallel_wall_seconds={parallel:.1f}")
    # the full scenario: each entry's unit time scaled to the full budget, the same for every seed
    scale = FULL_BUDGET / args.budget
    per_entry = summary.groupby("algorithm", sort=False)["wall_seconds"].mean() * scale
    full = [s for s in per_entry.tolist() for _ in range(FULL_SEEDS)]
    for label, cores in (("1_core", 1), ("2_cores", 2), ("64_cores", 64), ("4x64_cores", 256)):
        print(f"projected_full_hours[{label}]={makespan(full, cores) / 3600:.2f}")
    print(f"projected_full_longest_unit_hours={max(full) / 3600:.2f}")
    print(f"projected_full_units={len(full)}")
    print(f"runs_speedup={serial / parallel:.3f}")
    if not same:
        raise SystemExit("the result files differ between the serial and the parallel run")


if __name__ == "__main__":
    main()
