"""What ``server: {selection: by_data}`` does over a run: dispatches per training sample, largest clients vs smallest.

Each draw picks among the idle, present clients with probability proportional to their training samples. A
client in flight cannot be drawn, and a large client, drawn often, is in flight more often, so over a run the
largest clients are dispatched less often per sample than their share of the samples says. This measures by
how much in pure-latency runs (FedAsync, ``executor: {kind: none}``): 1,000
clients holding a Dirichlet(0.3) split of 60,000 samples with ``sizes: draw`` (3 to 192 samples each: the
cross-device MNIST study's split, with sizes drawn instead of equal), ``server: {concurrency: 50, selection:
by_data}``, 200,000 arrivals, seed 0 (the runs are deterministic: a second run prints the same lines), for

- ``fleet``: the cross-device study's latencies and presence (``scenarios/fleet/fleet1k.csv``: training time
  grows with a client's samples, a third of the devices present in one daily window; the SimPy engine);
- ``uniform``: latencies uniform in [1, 10] s, the same for every size (the heap clock);
- ``one_at_a_time``: the uniform run with concurrency 1, where no other client is ever in flight at a draw:
  the control, at 1.0 up to sampling noise.

For each, the arrivals of the largest and the smallest tenth of the clients (by samples) against what
proportional selection gives them (all arrivals times their share of the samples): ``<run>_largest_decile``
and ``<run>_smallest_decile`` (1.0: proportional), and the ratio of their arrivals per sample,
``<run>_largest_vs_smallest_per_sample``. Prints ``name=value`` lines, the last being
``fleet_largest_decile``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod

CLIENTS = 1_000
FLEET = Path(__file__).resolve().parents[1] / "scenarios" / "fleet" / "fleet1k.csv"


def scenario(updates: int, **changes: Any) -> scenario_mod.Scenario:
    """The measured run (``changes``: other top-level sections)."""
    return scenario_mod.validate({**{
        "name": "selection", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 60_000, "test_size": 10, "features": 4, "classes": 10,
                 "partition": {"kind": "dirichlet", "clients": CLIENTS, "alpha": 0.3, "sizes": "draw"}},
        "model": {"name": "mlp", "hidden": [2]},
        "latency": {"model": "uniform", "low": 1.0, "high": 10.0},
        "budget": {"updates": updates},
        "eval": {"every": 1_000.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}],
        "server": {"concurrency": 50, "selection": "by_data"},
        "executor": {"kind": "none"},
    }, **changes})


def deciles(scn: scenario_mod.Scenario) -> tuple[float, float, float, int, int]:
    """Arrivals of the largest and the smallest tenth of the clients against proportional selection, the ratio of
    their arrivals per sample, and the smallest and largest client's samples."""
    fed = federation(scn, load_dataset(scn), 0)
    sizes = np.array(fed.client_sizes, dtype=float)
    state = run_one(scn, fed, 0).state
    arrivals = np.bincount([e.client for e in state.events if e.event == "arrival"], minlength=len(sizes))
    expected = arrivals.sum() * sizes / sizes.sum()
    order = np.argsort(sizes, kind="stable")
    tenth = len(sizes) // 10
    small, large = order[:tenth], order[-tenth:]
    large_ratio = arrivals[large].sum() / expected[large].sum()
    small_ratio = arrivals[small].sum() / expected[small].sum()
    return large_ratio, small_ratio, large_ratio / small_ratio, int(sizes.min()), int(sizes.max())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200_000, help="arrivals per run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    runs = {
        "one_at_a_time": scenario(args.updates, server={"concurrency": 1, "selection": "by_data"}),
        "uniform": scenario(args.updates),
        "fleet": scenario(args.updates, latency={"model": "fleet_csv", "path": str(FLEET), "horizon": 86_400.0}),
    }
    for name, scn in runs.items():
        large, small, per_sample, low, high = deciles(scn)
        print(f"{name}_samples_per_client={low}-{high}")
        print(f"{name}_smallest_decile={small:.3f}")
        print(f"{name}_largest_vs_smallest_per_sample={per_sample:.3f}")
        print(f"{name}_largest_decile={large:.3f}")


if __name__ == "__main__":
    main()
