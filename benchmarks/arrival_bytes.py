"""What an arrival without training costs as the model grows: each built-in rule at two model sizes and populations.

The estimate counts an arrival without training (``executor: {kind: none}``) at the engine's probe's cost
(:func:`simfl.launch.measure_speeds.engine`, a model of 108 parameters) plus the passes over the model's bytes its
rule states (``arrival_passes`` of :mod:`simfl.algorithms.configs`, read off this benchmark). This times
each rule's pure-latency run in this process, warm, on one thread, at an MLP of ``--small`` and ``--large`` hidden
units over 64 features and 10 classes, and prints per rule and population

- ``<rule>_n<N>_us=A-B``: CPU microseconds an arrival at the small and the large model;
- ``<rule>_n<N>_ns_per_byte=S``: their difference over the difference of the models' bytes (float32);

and ``pass_ns_per_byte``: one out-of-place elementwise torch operation over the large model's vector (``a + b``),
the unit in which a rule's per-byte cost reads as passes over the model. The asynchronous rules and OrthoFL are
served (``server: {concurrency: N}``, at most 1,000 in flight); the synchronous ones run 10 clients a round of N.
A population a rule refuses is printed as ``<rule>_n<N>=refused`` with its reason.

Run it with nothing else on the machine: another process's load is what it must not see.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from simfl.errors import InputError
from simfl.launch import experiment
from simfl.launch.measure_speeds import PROBE, measuring
from simfl.schema.scenario import validate

RULES: dict[str, dict[str, Any]] = {
    "fedasync": {"name": "fedasync", "alpha": 0.6},
    "fedbuff": {"name": "fedbuff", "buffer": 10},
    "ca2fl": {"name": "ca2fl", "buffer": 10},
    "orthofl_chain": {"name": "orthofl", "shift_source": "chain"},
    "orthofl_global": {"name": "orthofl", "shift_source": "global"},
    "orthofl_no_calib": {"name": "orthofl_no_calib"},
    "orthofl_no_ma": {"name": "orthofl_no_ma"},
    "orthofl_pairwise": {"name": "orthofl_pairwise"},
    "fedavg": {"name": "fedavg", "clients_per_round": 10},
    "fedprox": {"name": "fedprox", "clients_per_round": 10},
    "fedadam": {"name": "fedadam", "clients_per_round": 10},
    "scaffold": {"name": "scaffold", "clients_per_round": 10},
}
"""The rules timed, by the name printed."""
CONCURRENCY = 1_000
"""Clients in flight at most (as the population cases of ``python -m benchmarks.estimate``)."""
WARM, TIMED = 1_000, 6_000
"""Updates of the warm-up run and of the timed run (one each, in the same process)."""


def model_bytes(hidden: int) -> int:
    """Bytes of the MLP's float32 parameters (64 features, ``hidden`` units, 10 classes)."""
    return 4 * (64 * hidden + hidden + hidden * 10 + 10)


def scenario(rule: dict[str, Any], clients: int, hidden: int, updates: int) -> Any:
    """The probe's scenario with ``rule`` over ``clients`` clients and an MLP of ``hidden`` units."""
    raw: dict[str, Any] = {**PROBE, "algorithms": [rule], "model": {"name": "mlp", "hidden": [hidden]},
                           "data": {**PROBE["data"], "features": 64, "classes": 10,
                                    "train_size": max(PROBE["data"]["train_size"], 2 * clients),
                                    "partition": {"kind": "iid", "clients": clients}},
                           "budget": {"updates": updates}}
    if "clients_per_round" in rule:
        raw.pop("server")
    else:
        raw["server"] = {"concurrency": min(clients, CONCURRENCY)}
    return validate(raw)


def per_arrival(rule: dict[str, Any], clients: int, hidden: int) -> float:
    """CPU seconds an arrival of ``rule``'s timed run, after a warm-up run in the same federation."""
    warm, timed = (scenario(rule, clients, hidden, n) for n in (WARM, TIMED))
    with measuring():
        fed = experiment.federation(warm, experiment.load_dataset(warm), 0)
        experiment.run_one(warm, fed, 0)
        start = time.process_time()
        experiment.run_one(timed, fed, 0)
        return (time.process_time() - start) / TIMED


def add_seconds_per_byte(hidden: int, calls: int = 2_000) -> float:
    """CPU seconds per byte of one ``a + b`` over the MLP's vector: the shortest of five rounds of ``calls``."""
    n = model_bytes(hidden) // 4
    a, b = torch.randn(n), torch.randn(n)
    best = []
    with measuring():
        for _ in range(200):
            a + b
        for _ in range(5):
            start = time.process_time()
            for _ in range(calls):
                a + b
            best.append((time.process_time() - start) / calls)
    return min(best) / model_bytes(hidden)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--small", type=int, default=8, help="hidden units of the small model")
    parser.add_argument("--large", type=int, default=256, help="hidden units of the large model")
    parser.add_argument("--clients", default="100,1000", help="comma-separated populations")
    parser.add_argument("--only", default=",".join(RULES), help="comma-separated rules (" + ", ".join(RULES) + ")")
    args = parser.parse_args(argv)
    print(f"pass_ns_per_byte={add_seconds_per_byte(args.large) * 1e9:.3f}", flush=True)
    extra = model_bytes(args.large) - model_bytes(args.small)
    for name in args.only.split(","):
        for clients in (int(c) for c in args.clients.split(",")):
            try:
                small, large = (per_arrival(RULES[name], clients, h) for h in (args.small, args.large))
            except InputError as exc:  # a rule that refuses the population (orthofl_pairwise: at most 100 clients)
                print(f"{name}_n{clients}=refused ({exc})", flush=True)
                continue
            print(f"{name}_n{clients}_us={small * 1e6:.1f}-{large * 1e6:.1f}", flush=True)
            print(f"{name}_n{clients}_ns_per_byte={(large - small) / extra * 1e9:.3f}", flush=True)


if __name__ == "__main__":
    main()
