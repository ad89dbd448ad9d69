"""Pure-latency speed of this tree against an earlier commit, both measured in one run, alternately.

``python -m benchmarks.versus --base REV`` checks REV out into a temporary git worktree and times
the runs of ``benchmarks.events`` (FedAsync, 1,000 clients, uniform latencies) and
``benchmarks.population`` (C = 1,000 of N = 100,000) on each clock of each tree, each run in a
fresh process, the trees alternating ``--repeat`` times, and prints the median arrivals per
wall second and per CPU second and the ratio of this tree to REV. A clock is named by what it is,
whatever the tree calls it: ``heap`` (the heap clock here; before it, the heap loop
``engine="fast"``) and ``simpy``. Only the loop is timed (from the first metric row to the last).

``--numerics native`` runs this tree with ``SIMFL_NUMERICS=native`` (the machine's own kernels, as
commits before the portable numerics ran), to tell the pinning's share from the rest.

``--paired`` (two cores or more) runs the two trees at once instead, each pinned to a core of its
own, the cores swapped at each repetition: both trees see the same moments of the machine, and each
core as often. The ratio printed is then the geometric mean of the repetitions' ratios. On a
virtual machine whose cores run at different speeds, and whose speed drifts within seconds, runs one
after the other measure mostly the core and the moment they got (benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, sys, time, typing
import torch
from simfl.launch import experiment
from simfl.schema import scenario as scenario_mod
kind, clock, updates = sys.argv[1], sys.argv[2], int(sys.argv[3])
names = typing.get_args(experiment.Engine)
engine = clock if clock in names else "fast"
clients = 1000 if kind == "events" else 100_000
raw = {"name": "versus", "seeds": [0],
       "data": {"dataset": "synthetic", "train_size": 2 * clients, "test_size": 10, "features": 4, "classes": 10,
                "partition": {"kind": "iid", "clients": clients}},
       "model": {"name": "mlp", "hidden": [2]}, "latency": {"model": "uniform", "low": 1.0, "high": 10.0},
       "budget": {"updates": updates}, "eval": {"every": 100.0},
       "algorithms": [{"name": "fedasync", "alpha": 0.6}], "executor": {"kind": "none"}}
if kind == "population":
    raw["server"] = {"concurrency": 1000}
torch.set_num_threads(1)
scn = scenario_mod.validate(raw)
fed = experiment.federation(scn, experiment.load_dataset(scn), 0)
marks = []
result = experiment.run_one(scn, fed, 0, engine=engine,
                            progress=lambda s: marks.append((time.perf_counter(), time.process_time(), s.updates)))
(w0, c0, u0), (w1, c1, u1) = marks[0], marks[-1]
print(json.dumps({"wall": (u1 - u0) / (w1 - w0), "cpu": (u1 - u0) / (c1 - c0)}))
"""

SERIES = (("events", "heap", 200_000), ("events", "simpy", 20_000), ("population", "heap", 200_000),
          ("population", "simpy", 20_000))


Env = dict[str, str]
"""Variables a tree's runs get beside its ``PYTHONPATH`` (this tree's ``SIMFL_NUMERICS`` with ``--numerics``)."""


def start(tree: Path, kind: str, clock: str, updates: int, env: Env, core: int | None = None) -> subprocess.Popen[str]:
    """A run of ``kind`` on ``clock`` with the code of ``tree``, in a fresh process (pinned to ``core``, if given)."""
    pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
    env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", **env}
    return subprocess.Popen([sys.executable, "-c", PROBE, kind, clock, str(updates)], cwd=tree, stdout=subprocess.PIPE,
                            text=True, env=env, preexec_fn=pin)


def result(run: subprocess.Popen[str]) -> dict[str, float]:
    """The rates a run printed (its last line)."""
    out, _ = run.communicate()
    if run.returncode != 0:
        raise RuntimeError(f"a probe run failed (exit {run.returncode})")
    return dict(json.loads(out.strip().splitlines()[-1]))


def probe(tree: Path, kind: str, clock: str, updates: int, env: Env) -> dict[str, float]:
    """One run of ``kind`` on ``clock`` with the code of ``tree``, alone."""
    return result(start(tree, kind, clock, updates, env))


def pair(base: Path, kind: str, clock: str, updates: int, env: Env, cores: tuple[int, int]
         ) -> tuple[dict[str, float], ...]:
    """The runs of both trees at once, ``base`` on ``cores[0]`` and this tree (with ``env``) on ``cores[1]``."""
    runs = (start(base, kind, clock, updates, {}, cores[0]), start(ROOT, kind, clock, updates, env, cores[1]))
    return tuple(result(r) for r in runs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the commit to compare with")
    parser.add_argument("--repeat", type=int, default=3, help="runs per tree and series")
    parser.add_argument("--paired", action="store_true", help="run the trees at once, one per core, swapping cores")
    parser.add_argument("--numerics", choices=("portable", "native"), help="this tree's SIMFL_NUMERICS (default: unset)")
    args = parser.parse_args(argv)
    env: Env = {"SIMFL_NUMERICS": args.numerics} if args.numerics else {}
    cores = sorted(os.sched_getaffinity(0))[:2]
    if args.paired and len(cores) < 2:
        parser.error("--paired needs two cores")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), args.base], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            rates: dict[tuple[str, str, str], list[dict[str, float]]] = {}
            for i in range(args.repeat):
                for kind, clock, updates in SERIES:
                    if args.paired:
                        order = (cores[0], cores[1]) if i % 2 == 0 else (cores[1], cores[0])
                        got = dict(zip(("base", "this"), pair(base, kind, clock, updates, env, order), strict=True))
                    else:
                        got = {"base": probe(base, kind, clock, updates, {}), "this": probe(ROOT, kind, clock, updates, env)}
                    for name, rate in got.items():
                        rates.setdefault((name, kind, clock), []).append(rate)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False,
                           capture_output=True)
    print(f"base={args.base}")
    print(f"numerics={args.numerics or 'default'}")
    for kind, clock, _ in SERIES:
        for measure in ("wall", "cpu"):
            runs = list(zip(rates[("base", kind, clock)], rates[("this", kind, clock)], strict=True))
            before = statistics.median(b[measure] for b, _ in runs)
            after = statistics.median(t[measure] for _, t in runs)
            ratio = statistics.geometric_mean(t[measure] / b[measure] for b, t in runs) if args.paired else after / before
            print(f"{kind}_{clock}_{measure}_arrivals_per_second_base={before:.0f}")
            print(f"{kind}_{clock}_{measure}_arrivals_per_second_this={after:.0f}")
            print(f"{kind}_{clock}_{measure}_ratio={ratio:.3f}")


if __name__ == "__main__":
    main()
