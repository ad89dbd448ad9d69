"""Arrivals per wall second in pure-latency mode (``executor: {kind: none}``) with 1,000 clients.

The run is a real simfl run (scenario validation, federation, latency model,
algorithm state, event trace) on the heap clock of
:mod:`simfl.sim.clock`; the same run on SimPy's clock (the same rules) is timed for
comparison. The headline uses FedAsync on a tiny model with uniform random
latencies (one NumPy draw per dispatch, a sizeable share of the cost; a
run with fixed per-client latencies shows the loop without it), where the event
machinery itself dominates; OrthoFL at LeNet5 size shows the cost once the
aggregation maths dominate. Prints ``name=value`` lines, the last being
``arrivals_per_second``.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch

from simfl.launch.experiment import Engine, federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod

CLIENTS = 1000


def scenario(
    algorithm: dict[str, Any], features: int, hidden: list[int], updates: int, constant: bool = False
) -> scenario_mod.Scenario:
    """1,000 clients, uniform latencies in [1, 10] s (or fixed per client), an update budget, the null executor."""
    latency: dict[str, Any] = (
        {"model": "constant", "seconds": [1.0 + 9.0 * m / CLIENTS for m in range(CLIENTS)]} if constant
        else {"model": "uniform", "low": 1.0, "high": 10.0}
    )
    return scenario_mod.validate({
        "name": "events", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 2 * CLIENTS, "test_size": 10, "features": features,
                 "classes": 10, "partition": {"kind": "iid", "clients": CLIENTS}},
        "model": {"name": "mlp", "hidden": hidden},
        "latency": latency,
        "budget": {"updates": updates},
        "eval": {"every": 100.0},
        "algorithms": [algorithm],
        "executor": {"kind": "none"},
    })


def arrivals_per_second(scn: scenario_mod.Scenario, engine: Engine) -> tuple[float, int]:
    """Processed arrivals per wall second of one run (the run's own timer) and the parameter count."""
    fed = federation(scn, load_dataset(scn), 0)
    result = run_one(scn, fed, 0, engine=engine)
    return result.state.updates / result.wall_seconds, fed.layout.size


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200_000, help="arrivals per run (heap clock)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    tiny = scenario({"name": "fedasync", "alpha": 0.6}, 4, [2], args.updates)
    slow_updates = max(1000, args.updates // 20)
    tiny_simpy = scenario({"name": "fedasync", "alpha": 0.6}, 4, [2], slow_updates)
    lenet = scenario({"name": "orthofl"}, 784, [56], max(1000, args.updates // 20))
    rate_simpy, _ = arrivals_per_second(tiny_simpy, "simpy")
    rate_orthofl, params = arrivals_per_second(lenet, "heap")
    rate_constant, _ = arrivals_per_second(
        scenario({"name": "fedasync", "alpha": 0.6}, 4, [2], args.updates, constant=True), "heap"
    )
    rate, tiny_params = arrivals_per_second(tiny, "heap")
    print(f"clients={CLIENTS}")
    print(f"tiny_params={tiny_params}")
    print(f"fedasync_tiny_simpy_arrivals_per_second={rate_simpy:.0f}")
    print(f"orthofl_{params}_params_heap_arrivals_per_second={rate_orthofl:.0f}")
    print(f"fedasync_tiny_constant_latency_heap_arrivals_per_second={rate_constant:.0f}")
    print(f"fedasync_tiny_heap_arrivals_per_second={rate:.0f}")
    print(f"heap_vs_simpy={rate / rate_simpy:.2f}")
    print(f"arrivals_per_second={rate:.0f}")


if __name__ == "__main__":
    main()
