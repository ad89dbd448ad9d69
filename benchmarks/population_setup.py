"""Where a large population's run spends its CPU before and after the first arrival.

FedAsync in pure-latency mode (``executor: {kind: none}``), lognormal latencies (mean 5 s, std 2 s),
at most 1,000 clients in flight, 200,000 arrivals, for N clients (``--clients``, default 10^5 and
10^6). Timed in CPU seconds of this process: loading the dataset, building the federation
(partition and client data), the run's own setup up to its first metric row (latency streams,
client records, selection), and the loop from there to the last row, printed as arrivals per CPU
second. ``--latency uniform`` draws uniform latencies in [1, 10] s instead. Several ``--clients`` run one
after another in this process (the later ones then find the allocator warm); one per process times each alone.

``--cli`` times the same scenario through ``simfl run`` instead (one worker, in a fresh process each, CPU
seconds of the child), with ``--arrivals`` and five times as many: the difference gives the CPU per arrival
(writing the events included) and the rest is the command's setup (interpreter, imports, validation, the
federation and the run's own setup, and the result files' fixed part).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema.scenario import validate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--arrivals", type=int, default=200_000)
    parser.add_argument("--latency", choices=["lognormal", "uniform"], default="lognormal")
    parser.add_argument("--cli", action="store_true", help="time simfl run of the scenario instead")
    args = parser.parse_args(argv)
    latency = ({"model": "lognormal", "mean": 5.0, "std": 2.0} if args.latency == "lognormal"
               else {"model": "uniform", "low": 1.0, "high": 10.0})
    for n in args.clients:
        raw = {
            "name": "setup", "seeds": [0],
            "data": {"dataset": "synthetic", "train_size": 2 * n, "test_size": 10, "features": 4, "classes": 10,
                     "partition": {"kind": "iid", "clients": n}},
            "model": {"name": "mlp", "hidden": [8]}, "latency": latency,
            "budget": {"updates": args.arrivals}, "eval": {"every": 1000.0},
            "algorithms": [{"name": "fedasync", "alpha": 0.6}], "server": {"concurrency": min(1000, n)},
            "executor": {"kind": "none"},
        }
        if args.cli:
            cli(raw, n, args.arrivals)
            continue
        scn = validate(raw)
        start = time.process_time()
        dataset = load_dataset(scn)
        loaded = time.process_time()
        fed = federation(scn, dataset, 0)
        built = time.process_time()
        marks: list[float] = []
        result = run_one(scn, fed, 0, progress=lambda _, m=marks: m.append(time.process_time()))
        loop = marks[-1] - marks[0]
        print(f"n{n}_load_cpu_s={loaded - start:.2f}", flush=True)
        print(f"n{n}_federation_cpu_s={built - loaded:.2f}", flush=True)
        print(f"n{n}_run_setup_cpu_s={marks[0] - built:.2f}", flush=True)
        print(f"n{n}_arrivals_per_cpu_s={result.state.updates / loop:.0f}", flush=True)


def child_cpu(command: list[str]) -> float:
    """CPU seconds (user and system) of ``command`` run to its end in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "SIMFL_WORKERS": "1"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cli(raw: dict[str, Any], n: int, arrivals: int) -> None:
    """``simfl run`` of ``raw`` with ``arrivals`` and 5x as many updates: its setup and arrivals per CPU second."""
    with tempfile.TemporaryDirectory() as tmp:
        cpu = []
        for updates in (arrivals, 5 * arrivals):
            path = Path(tmp) / f"setup{updates}.yaml"
            path.write_text(yaml.safe_dump({**raw, "budget": {"updates": updates}}))
            cpu.append(child_cpu([sys.executable, "-m", "simfl", "run", str(path), "--out", str(Path(tmp) / "out"),
                                  "--force", "--quiet", "--workers", "1"]))
        per_arrival = (cpu[1] - cpu[0]) / (4 * arrivals)
        print(f"n{n}_cli_setup_cpu_s={cpu[0] - arrivals * per_arrival:.2f}", flush=True)
        print(f"n{n}_cli_arrivals_per_cpu_s={1 / per_arrival:.0f}", flush=True)


if __name__ == "__main__":
    main()
