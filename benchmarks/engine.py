"""Simulated client updates per wall second with real training, against two floors measured in the same run.

Scenario: ``scenarios/paper/mnist.yaml`` shortened (real MNIST, LeNet5, 10
Dirichlet(0.1) clients, batch 128, OrthoFL only, an update budget, the
evaluation grid widened so the test set is scored only at 0 and at the end).

- ``inline``: one process, ``--inline-threads`` torch threads (default: all cores).
- ``process``: ``--workers`` worker processes (default: cores), one thread each.
- ``bare``: the same local trainings (the (client, round) pairs the inline run
  collected) as a bare PyTorch loop in one process, same threads as inline.
- ``parallel floor``: those trainings split over ``--workers`` bare
  single-thread processes (balanced by sample count), timed from the moment
  all of them are ready.

Each run's wall time excludes start-up (loading data, spawning workers).
The engine also scores the test set (at 0 and at the end): that requested
work is timed on its own (``evaluation_seconds``, the same number of
evaluations) and taken out of the inline wall time for the overhead;
``engine_overhead_inline_with_evaluation`` keeps it in. Process figures keep
it in (there it partly overlaps training).

The inline and bare loops run the same operations, so their difference is
small next to the noise of one pair of runs. ``engine_overhead_inline`` is
therefore the median over ``--overhead-rounds`` paired rounds (inline run and
bare loop back to back, their order alternating) of
``1 - bare / (inline - evaluation)``, measured at E = 1 where the engine's
fixed per-update cost weighs five times more than at E = 5; the spread of
the pairs is printed too.

Prints ``name=value`` lines, ending with ``engine_overhead_inline``,
``process_vs_parallel_floor`` and ``process_speedup``.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp
from torch import nn

from simfl import rng
from simfl.launch.experiment import Federation, federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.schema import scenario as scenario_mod
from simfl.train.evaluate import Evaluator
from simfl.train.executor import cores, torch_threads
from simfl.train.local import channels_last_helps

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "paper" / "mnist.yaml"
Jobs = list[tuple[int, int]]


def bare_train(
    model: nn.Module, layout: Layout, start: torch.Tensor, x: torch.Tensor, y: torch.Tensor,
    epochs: int, batch: int, lr: float, gen: torch.Generator,
) -> torch.Tensor:
    """Plain SGD epochs over one client's tensors: the floor's unit of work."""
    layout.load(model, start)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    n = len(y)
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        for i in range(0, n, batch):
            idx = order[i : i + batch]
            loss = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return layout.flatten(model)


def bare_jobs(fed: Federation, jobs: Jobs, epochs: int, batch: int, lr: float, seed: int) -> None:
    """Train ``jobs`` one after the other from the initial weights (in the memory layout simfl trains in)."""
    model = copy.deepcopy(fed.model)
    if channels_last_helps(model):
        model.to(memory_format=torch.channels_last)
    for client, round_ in jobs:
        x, y = fed.shards[client]
        bare_train(model, fed.layout, fed.init, x, y, epochs, batch, lr, rng.torch_generator(seed, "train", client, round_))


def _floor_worker(
    fed: Federation, jobs: Jobs, epochs: int, batch: int, lr: float, seed: int,
    ready: Any, go: Any, done: Any,
) -> None:
    torch.set_num_threads(1)
    fed = copy.copy(fed)
    fed.model = copy.deepcopy(fed.model)  # a private replica (arguments arrive in shared memory)
    ready.put(1)
    go.wait()
    bare_jobs(fed, jobs, epochs, batch, lr, seed)
    done.put(time.perf_counter())


def parallel_floor(fed: Federation, jobs: Jobs, workers: int, epochs: int, batch: int, lr: float, seed: int) -> float:
    """Wall seconds for ``jobs`` split over ``workers`` single-thread processes (LPT by sample count)."""
    sizes = fed.client_sizes
    bins: list[Jobs] = [[] for _ in range(workers)]
    loads = [0] * workers
    for job in sorted(jobs, key=lambda j: -sizes[j[0]]):
        w = loads.index(min(loads))
        bins[w].append(job)
        loads[w] += sizes[job[0]]
    ctx = mp.get_context("spawn")
    ready, done, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_floor_worker, args=(fed, b, epochs, batch, lr, seed, ready, go, done)) for b in bins]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    start = time.perf_counter()
    go.set()
    end = max(done.get() for _ in procs)
    for p in procs:
        p.join()
    return end - start


def collected_jobs(events: list[Any]) -> Jobs:
    """(client, round) of every collected training job, from the run's event trace."""
    rounds: dict[int, int] = {}
    jobs = []
    for e in events:
        k = rounds.get(e.client, 0)
        jobs.append((e.client, k))
        rounds[e.client] = k + 1
    return jobs


def paired_overhead(
    scn: scenario_mod.Scenario, fed: Federation, evaluator: Evaluator, threads: int, bare_first: bool
) -> float:
    """One paired round: ``1 - bare / (inline - evaluation)`` for one inline run and its bare-loop twin."""
    train = scn.train
    walls: dict[str, float] = {}

    def inline_run() -> list[Any]:
        result = run_one(scn, fed, 0)
        walls["inline"] = result.wall_seconds
        return list(result.state.events)

    def bare_run(jobs: Jobs) -> None:
        with torch_threads(threads):
            start = time.perf_counter()
            bare_jobs(fed, jobs, train.epochs, train.batch_size, train.lr, 0)
            walls["bare"] = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(2):  # the engine scores the test set at 0 and at the end
                evaluator(fed.init)
            walls["evaluation"] = time.perf_counter() - start

    if bare_first:  # the (client, round) jobs of this scenario do not depend on timing: take them from a dry run
        bare_run(collected_jobs(run_one(scn, fed, 0).state.events))
        inline_run()
    else:
        bare_run(collected_jobs(inline_run()))
    return 1 - walls["bare"] / (walls["inline"] - walls["evaluation"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 local epoch, 8 updates (a smoke run)")
    parser.add_argument("--epochs", type=int, default=None, help="local epochs E (default 5, quick 1)")
    parser.add_argument("--updates", type=int, default=None, help="client updates per run (default 20, quick 8)")
    parser.add_argument("--workers", type=int, default=cores(), help="process workers and floor processes")
    parser.add_argument("--repeats", type=int, default=None,
                        help="rounds of all four measurements, each figure the best round (default 2, quick 1)")
    parser.add_argument("--overhead-rounds", type=int, default=None,
                        help="paired inline/bare rounds at E=1 for engine_overhead_inline (default 12, quick 2)")
    parser.add_argument("--inline-threads", type=int, default=cores(), help="torch threads of inline and bare")
    args = parser.parse_args(argv)
    epochs = args.epochs or (1 if args.quick else 5)
    updates = args.updates or (8 if args.quick else 20)
    repeats = args.repeats or (1 if args.quick else 2)
    overhead_rounds = args.overhead_rounds or (2 if args.quick else 12)
    overrides = [
        "seeds=[0]", "algorithms=[{name: orthofl, beta: 0.6, a: 0.5}]", f"train.epochs={epochs}",
        f"budget={{updates: {updates}, time: 1.0e9}}", "eval.every=1.0e9",
    ]
    base = scenario_mod.load(SCENARIO, overrides)
    dataset = load_dataset(base)
    fed = federation(base, dataset, 0)
    train = base.train
    print(f"cores={cores()}")
    print(f"epochs={epochs}")
    print(f"updates={updates}")
    print(f"workers={args.workers}")
    print(f"inline_threads={args.inline_threads}")

    inline_scn = base.model_copy(deep=True)
    inline_scn.executor = scenario_mod.ExecutorConfig(kind="inline", threads=args.inline_threads)
    process_scn = base.model_copy(deep=True)
    process_scn.executor = scenario_mod.ExecutorConfig(kind="process", workers=args.workers, threads=1)
    evaluator = Evaluator(copy.deepcopy(fed.model), fed.layout, dataset.x_test, dataset.y_test)
    walls: dict[str, list[float]] = {"inline": [], "bare": [], "process": [], "floor": [], "evaluation": []}
    for _ in range(repeats):  # interleaved rounds: slow phases of a shared machine hit every figure alike
        inline = run_one(inline_scn, fed, 0)
        walls["inline"].append(inline.wall_seconds)
        jobs = collected_jobs(inline.state.events)
        with torch_threads(args.inline_threads):
            start = time.perf_counter()
            bare_jobs(fed, jobs, epochs, train.batch_size, train.lr, 0)
            walls["bare"].append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in inline.state.metrics:
                evaluator(fed.init)
            walls["evaluation"].append(time.perf_counter() - start)
        process = run_one(process_scn, fed, 0)
        assert process.state.events == inline.state.events
        walls["process"].append(process.wall_seconds)
        walls["floor"].append(parallel_floor(fed, jobs, args.workers, epochs, train.batch_size, train.lr, 0))
    best = {k: min(v) for k, v in walls.items()}
    inline_wall, bare, process_wall, floor, evaluation = (
        best["inline"], best["bare"], best["process"], best["floor"], best["evaluation"]
    )
    print(f"repeats={repeats}")
    n = len(jobs)
    print(f"inline_updates_per_second={n / inline_wall:.3f}")
    print(f"bare_updates_per_second={n / bare:.3f}")
    print(f"process_updates_per_second={n / process_wall:.3f}")
    print(f"parallel_floor_updates_per_second={n / floor:.3f}")
    print(f"evaluation_seconds={evaluation:.3f}")
    print(f"inline_wall_seconds={inline_wall:.3f}")
    print(f"bare_wall_seconds={bare:.3f}")
    print(f"process_wall_seconds={process_wall:.3f}")
    print(f"parallel_floor_wall_seconds={floor:.3f}")
    print(f"engine_overhead_inline_with_evaluation={1 - bare / inline_wall:.4f}")
    print(f"engine_overhead_inline_e{epochs}_best_rounds={1 - bare / (inline_wall - evaluation):.4f}")
    e1 = scenario_mod.load(SCENARIO, [*overrides[:2], "train.epochs=1", *overrides[3:]])
    e1.executor = scenario_mod.ExecutorConfig(kind="inline", threads=args.inline_threads)
    pairs = [paired_overhead(e1, fed, evaluator, args.inline_threads, bare_first=i % 2 == 1) for i in range(overhead_rounds)]
    print(f"overhead_rounds={overhead_rounds}")
    print(f"engine_overhead_inline_min={min(pairs):.4f}")
    print(f"engine_overhead_inline_max={max(pairs):.4f}")
    print(f"engine_overhead_inline={statistics.median(pairs):.4f}")
    print(f"process_vs_parallel_floor={floor / process_wall:.4f}")
    print(f"process_speedup={inline_wall / process_wall:.4f}")


if __name__ == "__main__":
    main()
