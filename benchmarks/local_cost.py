"""What a rule's local training costs over plain SGD's: each rule with a local hook against FedAvg's job.

The estimate counts a client update's training from the model's measured or counted speed
(:mod:`simfl.schema.costs`), for plain local SGD. A rule whose clients run a hook add work to each step:
FedProx's proximal term and SCAFFOLD's and FedAC's corrections an elementwise pass or two over the model per
step, FedDyn's linear and proximal terms, MOON two more forward passes per batch (the global and the previous
model's representations). Their configs state it as ``train_cost`` (:mod:`simfl.algorithms.configs`, read off
this benchmark). This times, in one process, warm, on one thread, each rule's run of ``--updates`` client
updates more than a short run's, of LeNet5 on MNIST (10 clients, E = 1, batch 128; the 8x8 digits and the small
CNN where MNIST is not found), after a warm-up run in the same federation, alternating the rules over
``--rounds`` rounds, and prints per rule

- ``<rule>_cpu_s_per_update=S``: CPU seconds a client update costs (the shortest round's);
- ``<rule>_vs_fedavg=R``: that over FedAvg's in the same round (the median over the rounds).

Run it with nothing else on the machine: another process's load moves CPU time too, though less than wall time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from simfl.data.files import default_root
from simfl.launch import experiment
from simfl.launch.measure_speeds import measuring
from simfl.schema.scenario import validate

RULES: dict[str, dict[str, Any]] = {
    "fedavg": {"name": "fedavg", "clients_per_round": 10},
    "fedprox": {"name": "fedprox", "clients_per_round": 10},
    "scaffold": {"name": "scaffold", "clients_per_round": 10},
    "feddyn": {"name": "feddyn", "clients_per_round": 10},
    "moon": {"name": "moon", "clients_per_round": 10},
    "fedac": {"name": "fedac", "buffer": 5},
    "fedasync": {"name": "fedasync", "alpha": 0.6},
}
"""The rules timed, by the name printed; FedAvg first (the unit), FedAsync a rule with no hook (about 1)."""
WARM = 10
"""Updates of the short run whose cost a timed run's less (the warm-up's too)."""


def scenario(rule: dict[str, Any], updates: int, mnist: bool) -> Any:
    """A training scenario of ``rule`` over 10 clients for ``updates`` client updates."""
    data = {"dataset": "mnist", "download": False} if mnist else {"dataset": "digits"}
    model = {"name": "lenet5"} if mnist else {"name": "smallcnn", "channels": 8}
    return validate({
        "name": "local-cost", "seeds": [0],
        "data": {**data, "partition": {"kind": "iid", "clients": 10}},
        "model": model, "algorithms": [rule],
        "train": {"epochs": 1, "batch_size": 128, "lr": 0.01},
        "latency": {"model": "constant", "seconds": [1.0 + m for m in range(10)]},
        "budget": {"updates": updates}, "eval": {"every": 1e9},
        "executor": {"kind": "inline", "threads": 1},
    })


def per_update(rule: dict[str, Any], updates: int, mnist: bool, fed: Any | None) -> tuple[float, Any]:
    """CPU seconds an update of ``rule``: a run of ``updates`` less a run of :data:`WARM` updates, in the
    federation the first call builds (after a warm-up run), so the runs' evaluations and start cancel."""
    short, timed = scenario(rule, WARM, mnist), scenario(rule, WARM + updates, mnist)
    with measuring():
        if fed is None:
            fed = experiment.federation(short, experiment.load_dataset(short), 0)
            experiment.run_one(short, fed, 0)
        start = time.process_time()
        experiment.run_one(short, fed, 0)
        middle = time.process_time()
        experiment.run_one(timed, fed, 0)
        return (time.process_time() - 2 * middle + start) / updates, fed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--updates", type=int, default=30, help="client updates of each timed run")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the rules, alternating")
    parser.add_argument("--only", default=",".join(RULES), help="comma-separated rules (" + ", ".join(RULES) + ")")
    args = parser.parse_args(argv)
    names = ["fedavg"] + [n for n in args.only.split(",") if n != "fedavg"]
    mnist = any(default_root().glob("**/train-images-idx3-ubyte*"))
    print(f"model={'lenet5_mnist' if mnist else 'smallcnn_digits'}", flush=True)
    feds: dict[str, Any] = {}
    seconds: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(args.rounds):
        for name in names:
            s, feds[name] = per_update(RULES[name], args.updates, mnist, feds.get(name))
            seconds[name].append(s)
    for name in names:
        ratios = [s / f for s, f in zip(seconds[name], seconds["fedavg"], strict=True)]
        print(f"{name}_cpu_s_per_update={min(seconds[name]):.4f}", flush=True)
        print(f"{name}_vs_fedavg={statistics.median(ratios):.3f}", flush=True)


if __name__ == "__main__":
    main()
