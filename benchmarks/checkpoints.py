"""What the default checkpoints cost: runs checkpoint every 5 minutes of wall time and report progress every 2 s.

FedAsync in pure-latency mode (``executor: {kind: none}``, where an arrival costs least, so a fixed cost per
arrival weighs most), lognormal latencies, at most 1,000 clients in flight, ``--arrivals`` updates, for N
clients (``--clients``, default 10^5). Two parts:

- **in the run**: the same run plain (no observer) and with what every run now carries by default (the
  wall-clock checkpoint schedule, :class:`simfl.sim.checkpoints.Checkpoints`, and the progress pulse,
  :class:`simfl.sim.pulse.Pulse`, both reading the wall clock at each collected reply and metric row), paired
  and alternated ``--repeat`` times, in CPU seconds of the loop (first metric row to last). A run shorter than
  the interval takes no checkpoint, so this is the cost of watching for one. Prints arrivals per CPU second of
  each and ``default_overhead`` (the geometric mean of the paired ratios, less 1), and whether the two runs'
  metrics.csv and events.csv are identical;
- **one checkpoint**: the run's whole simulation taken as data at its last update (``Simulation.data``), made
  into a run's checkpoint file (:func:`simfl.launch.checkpoint.run_blob`) and written as the launching process
  writes it (``write_atomic``: a temporary file, fsync, rename), in wall seconds, with its size. A checkpoint
  that costs c seconds is followed by the next no sooner than max(300 s, c / 0.05) later, so its share of the
  run's wall time is c / max(300, c / 0.05): printed as ``checkpoint_share`` (at most 0.05 by construction).

``python -m benchmarks.checkpoints --clients 100000 1000000``: the figures in benchmarks/README.md are taken with
nothing else running.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from simfl.launch.checkpoint import WALL_DEFAULT, run_blob, write_atomic
from simfl.launch.experiment import Federation, federation, load_dataset, run_one
from simfl.output.results import run_files
from simfl.schema.scenario import Scenario, validate
from simfl.sim import engine
from simfl.sim.checkpoints import WALL_SHARE
from simfl.sim.engine import Checkpointing


def scenario(clients: int, arrivals: int) -> dict[str, Any]:
    return {
        "name": "checkpoints", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 2 * clients, "test_size": 10, "features": 4, "classes": 10,
                 "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [8]}, "latency": {"model": "lognormal", "mean": 5.0, "std": 2.0},
        "budget": {"updates": arrivals}, "eval": {"every": 100.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}], "server": {"concurrency": min(1000, clients)},
        "executor": {"kind": "none"},
    }


def loop_cpu(scn: Scenario, fed: Federation, default: bool) -> tuple[float, dict[str, bytes]]:
    """CPU seconds from the first metric row to the last, plain or with the default checkpoint schedule and pulse."""
    marks: list[float] = []
    options: dict[str, Any] = {}
    if default:
        options = {"checkpointing": Checkpointing(lambda data: None, every_wall=WALL_DEFAULT),
                   "pulse": lambda state: None}
    result = run_one(scn, fed, 0, progress=lambda _: marks.append(time.process_time()), **options)
    return marks[-1] - marks[0], run_files(result.state)


def one_checkpoint(scn: Scenario, fed: Federation, arrivals: int, folder: Path) -> tuple[float, int]:
    """Wall seconds and bytes of the checkpoint taken at the run's last update: data, file bytes, written."""
    spent: list[float] = []
    sizes: list[int] = []
    data_of = engine.Simulation.data

    def timed_data(self: engine.Simulation) -> dict[str, Any]:
        start = time.perf_counter()
        data = data_of(self)
        spent.append(time.perf_counter() - start)
        return data

    def save(data: dict[str, Any]) -> None:
        start = time.perf_counter()
        blob = run_blob("fedasync", 0, 1.0, data)
        write_atomic(folder / "seed0.pt", blob)
        spent.append(time.perf_counter() - start)
        sizes.append(len(blob))

    engine.Simulation.data = timed_data  # type: ignore[method-assign]
    try:
        run_one(scn, fed, 0, checkpointing=Checkpointing(save, every_updates=arrivals - 1))
    finally:
        engine.Simulation.data = data_of  # type: ignore[method-assign]
    return sum(spent[-2:]), sizes[-1]  # the last checkpoint: its data, then its file


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[100_000])
    parser.add_argument("--arrivals", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3, help="paired runs (plain, default) per population")
    args = parser.parse_args(argv)
    for n in args.clients:
        scn = validate(scenario(n, args.arrivals))
        fed = federation(scn, load_dataset(scn), 0)
        ratios: list[float] = []
        rates: dict[bool, list[float]] = {False: [], True: []}
        same = True
        for rep in range(args.repeat):
            cpu: dict[bool, float] = {}
            files: dict[bool, dict[str, bytes]] = {}
            for default in ((False, True) if rep % 2 == 0 else (True, False)):  # alternate which goes first
                cpu[default], files[default] = loop_cpu(scn, fed, default)
                rates[default].append(args.arrivals / cpu[default])
            ratios.append(cpu[True] / cpu[False])
            same = same and files[True] == files[False]
        with tempfile.TemporaryDirectory() as tmp:
            seconds, size = one_checkpoint(scn, fed, args.arrivals, Path(tmp))
        share = seconds / max(WALL_DEFAULT, seconds / WALL_SHARE)
        print(f"n{n}_plain_arrivals_per_cpu_s={sorted(rates[False])[len(rates[False]) // 2]:.0f}", flush=True)
        print(f"n{n}_default_arrivals_per_cpu_s={sorted(rates[True])[len(rates[True]) // 2]:.0f}", flush=True)
        print(f"n{n}_default_overhead={math.exp(sum(map(math.log, ratios)) / len(ratios)) - 1:.4f}", flush=True)
        print(f"n{n}_files_identical={same}", flush=True)
        print(f"n{n}_checkpoint_s={seconds:.3f}", flush=True)
        print(f"n{n}_checkpoint_bytes={size}", flush=True)
        print(f"n{n}_checkpoint_share={share:.5f}", flush=True)


if __name__ == "__main__":
    main()
