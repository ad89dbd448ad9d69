"""``simfl tune``'s estimate against what its trials took: a small digits tune halved over three rungs.

Prints the estimate of the tune (:func:`simfl.launch.tune.tune_seconds`, with halving's share and without), the
wall seconds its trials' runs took (their summary.csv), the tune command's own CPU seconds (the runs, Optuna, the
tables and figures), and the ratios. Timings: run it with nothing else on the machine.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
from pathlib import Path
from typing import Any


def scenario(budget: float, trials: int) -> dict[str, Any]:
    """One entry, a learning-rate grid of ``trials`` values, an MLP on digits over 4 clients, evaluated every tenth
    of the budget: rungs at a ninth, a third and the whole budget (rounded down to the grid)."""
    lrs = [0.3, 0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001, 0.00003][:trials]
    return {
        "name": "tune-estimate", "seeds": [0],
        "data": {"dataset": "digits", "partition": {"kind": "iid", "clients": 4}},
        "model": {"name": "mlp", "hidden": [16]},
        "train": {"epochs": 1, "batch_size": 32, "lr": 0.05},
        "latency": {"model": "constant", "seconds": [2.0, 3.0, 5.0, 7.0]},
        "budget": {"time": budget}, "eval": {"every": budget / 9},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}],
        "tune": {"trials": trials, "batch": trials, "params": {"train.lr": lrs}},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=900.0, help="virtual seconds of a trial")
    parser.add_argument("--trials", type=int, default=6)
    args = parser.parse_args(argv)
    from simfl.launch.tune import plan_of, tune, tune_seconds
    from simfl.output.tables import read_table
    from simfl.schema.scenario import validate

    raw = scenario(args.budget, args.trials)
    estimated = tune_seconds(plan_of(validate(raw)))
    assert estimated is not None
    with tempfile.TemporaryDirectory() as folder:
        before = resource.getrusage(resource.RUSAGE_SELF)
        out = tune(raw, Path(folder) / "tune", workers=1, quiet=True, base=Path(folder)).out
        after = resource.getrusage(resource.RUSAGE_SELF)
        took = sum(float(read_table(f, {"wall_seconds": "number"}, "runs")["wall_seconds"].sum())
                   for f in out.glob("trials/*/trial*/rung*/summary.csv"))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    print(f"estimated_seconds={estimated[0]:.1f}")
    print(f"estimated_without_halving_seconds={estimated[1]:.1f}")
    print(f"runs_wall_seconds={took:.1f}")
    print(f"tune_cpu_seconds={cpu:.1f}")
    print(f"estimate_vs_runs={estimated[0] / took:.2f}")
    print(f"estimate_vs_tune_cpu={estimated[0] / cpu:.2f}")


if __name__ == "__main__":
    main()
