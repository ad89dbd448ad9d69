"""Cross-device serving in pure-latency mode: arrivals per wall second as the population grows.

FedAsync on a tiny model, uniform latencies in [1, 10] s, ``server: {concurrency: 1000}``
(uniform selection), the null executor and the heap clock, for populations of
N = 1,000, 10,000 and 100,000 clients. What is timed is the run itself (``run_one``'s own
timer: the loop, the draws, the pool, the event rows), not building the federation. The
cost per arrival must stay flat in N: sampling draws from a Fenwick tree (``O(log N)``)
and nothing per arrival visits the population. Beside the wall-clock figures, the
process's CPU time per arrival from the first metric row (time 0, the first C clients
dispatched) to the last: on a machine shared with other work it moves less than the wall
clock.

A second series asks the same of the parts a plain FedAsync run leaves out: OrthoFL, which keeps
each client's calibrated model and anchor in the client-state store (RAM here; rows only for
clients seen), with random round failures (``availability: {p: 0.1}``), on SimPy's clock,
50,000 arrivals per population (``--stateful-updates``):
its CPU microseconds per arrival at each N and their flatness.

Prints ``name=value`` lines, the last being ``arrivals_per_second`` at N = 100,000 (the first series).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod

POPULATIONS = (1_000, 10_000, 100_000)
CONCURRENCY = 1000


def scenario(clients: int, updates: int, **changes: Any) -> scenario_mod.Scenario:
    """``clients`` devices, at most 1,000 training at once, an update budget, no training (``changes``: other
    top-level sections)."""
    return scenario_mod.validate({**{
        "name": "population", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 2 * clients, "test_size": 10, "features": 4,
                 "classes": 10, "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [2]},
        "latency": {"model": "uniform", "low": 1.0, "high": 10.0},
        "budget": {"updates": updates},
        "eval": {"every": 100.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}],
        "server": {"concurrency": min(CONCURRENCY, clients)},
        "executor": {"kind": "none"},
    }, **changes})


def measure(scn: scenario_mod.Scenario, engine: str) -> tuple[float, float, int]:
    """One run: processed arrivals per wall second, CPU microseconds per arrival, distinct clients that arrived."""
    fed = federation(scn, load_dataset(scn), 0)
    marks: list[float] = []  # process CPU time at each metric row
    result = run_one(scn, fed, 0, engine=engine, progress=lambda _: marks.append(time.process_time()))
    st = result.state
    return st.updates / result.wall_seconds, 1e6 * (marks[-1] - marks[0]) / st.updates, len({e.client for e in st.events})


def rate(clients: int, updates: int) -> tuple[float, float]:
    """FedAsync on the heap clock: arrivals per wall second and CPU microseconds per arrival."""
    r, cpu, _ = measure(scenario(clients, updates), "heap")
    return r, cpu


def stateful_cost(clients: int, updates: int) -> tuple[float, int]:
    """OrthoFL (client-state store) with round failures on SimPy's clock: CPU microseconds per arrival and the
    distinct clients that arrived (each one seen first pays for its streams, rows and join)."""
    _, cpu, seen = measure(scenario(clients, updates, algorithms=[{"name": "orthofl", "shift_source": "chain"}],
                                    availability={"p": 0.1}, client_state={"store": "ram"}), "simpy")
    return cpu, seen


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200_000, help="arrivals per run")
    parser.add_argument("--stateful-updates", type=int, default=50_000, help="arrivals per run of the second series")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    measured = {n: rate(n, args.updates) for n in POPULATIONS}
    rates = {n: r for n, (r, _) in measured.items()}
    print(f"concurrency={CONCURRENCY}")
    for n, (r, cpu) in measured.items():
        print(f"n{n}_arrivals_per_second={r:.0f}")
        print(f"n{n}_microseconds_per_arrival={1e6 / r:.1f}")
        print(f"n{n}_cpu_microseconds_per_arrival={cpu:.1f}")
    print(f"flatness_n100000_vs_n1000={rates[1_000] / rates[100_000]:.2f}")
    print(f"cpu_flatness_n100000_vs_n1000={measured[100_000][1] / measured[1_000][1]:.2f}")
    stateful = {n: stateful_cost(n, args.stateful_updates) for n in POPULATIONS}
    for n, (cpu, seen) in stateful.items():
        print(f"n{n}_orthofl_store_failures_cpu_microseconds_per_arrival={cpu:.1f}")
        print(f"n{n}_orthofl_store_failures_distinct_clients={seen}")
    print(f"orthofl_store_failures_cpu_flatness_n100000_vs_n1000={stateful[100_000][0] / stateful[1_000][0]:.2f}")
    print(f"arrivals_per_second={rates[100_000]:.0f}")


if __name__ == "__main__":
    main()
