"""How a training process's jobs compare with what the estimate measures: its first job, and its jobs over minutes.

The figures behind two of the estimate's reference values (:mod:`simfl.schema.costs`), each case in a fresh process
(one thread, simfl's numerics pin, one client's job of a case of ``python -m benchmarks.estimate``):

- ``<case>_first_extra_s``: the process's first job less the median of the next five: what
  :data:`~simfl.schema.costs.TRAINER_START_SECONDS` counts (the first optimizer imports ``torch._dynamo``);
  ``dynamo_import_s``: that import alone, in a fresh process with torch loaded;
- ``<case>_sustained``: the mean of ``--jobs`` jobs in a row (after fifteen) over the shortest of the first three,
  as :func:`simfl.launch.measure_speeds.per_call` keeps the shortest of a few warm calls: what
  :data:`~simfl.schema.costs.SUSTAINED` scales a measured speed by.

Run it with nothing else on the machine. ``--processes N`` repeats each case in N fresh processes. ``--write`` sets
``TRAINER_START_SECONDS`` of ``simfl/schema/costs.json`` to the top of what it measured (the largest first job's
extra, to two significant digits), with this run as its provenance (:func:`benchmarks.costs.refit`).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import time
from pathlib import Path

CASES = ("train_smallcnn_digits", "train_mlp_synthetic")
IMPORT = ("import time, torch; t = time.perf_counter(); import torch._dynamo; "
          "print(time.perf_counter() - t)")


def phases(case: str, jobs: int) -> tuple[float, float]:
    """(first job's extra seconds, sustained over shortest) of ``case``'s client 0, in this process."""
    import tempfile

    from benchmarks.estimate import cases
    from simfl import numerics
    from simfl.launch import experiment
    from simfl.schema.scenario import validate
    from simfl.train.executor import torch_threads
    from simfl.train.local import Job, LocalTrainer

    with tempfile.TemporaryDirectory() as tmp:
        scn = validate(dict(cases(False))[case](Path(tmp)))
        fed = experiment.federation(scn, experiment.load_dataset(scn), 0)
    with numerics.applied(), torch_threads(1):
        trainer = LocalTrainer(copy.deepcopy(fed.model), fed.layout, fed.shards, scn.train, 0)

        def job() -> float:
            start = time.thread_time()
            trainer.run(Job(0, 0, fed.init))
            return time.thread_time() - start

        first = job()
        warm = [job() for _ in range(15)]
        later = [job() for _ in range(jobs)]
    return first - statistics.median(warm[:5]), statistics.mean(later) / min(warm[:3])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--processes", type=int, default=3, help="fresh processes per case")
    parser.add_argument("--jobs", type=int, default=400, help="jobs in a row whose mean is compared")
    parser.add_argument("--case", default="", help="(internal) one case in this process")
    parser.add_argument("--write", action="store_true", help="write TRAINER_START_SECONDS to simfl/schema/costs.json")
    args = parser.parse_args(argv)
    if args.case:
        extra, ratio = phases(args.case, args.jobs)
        print(f"{extra} {ratio}")
        return
    imports = [float(subprocess.run([sys.executable, "-c", IMPORT], check=True, capture_output=True,
                                    text=True).stdout) for _ in range(args.processes)]
    print(f"dynamo_import_s={min(imports):.2f}-{max(imports):.2f}", flush=True)
    first: list[float] = []
    for case in CASES:
        got = [tuple(map(float, subprocess.run(
            [sys.executable, "-m", "benchmarks.trainer_phases", "--case", case, "--jobs", str(args.jobs)],
            check=True, capture_output=True, text=True).stdout.split())) for _ in range(args.processes)]
        extras, sustained = [g[0] for g in got], [g[1] for g in got]
        print(f"{case}_first_extra_s={min(extras):.2f}-{max(extras):.2f}", flush=True)
        print(f"{case}_sustained={min(sustained):.2f}-{max(sustained):.2f}", flush=True)
        first += extras
    if args.write:
        from benchmarks.costs import refit, significant

        notes = (f"the import {min(imports):.2f}-{max(imports):.2f} s, the first job {min(first):.2f}-{max(first):.2f} s "
                 f"more than the jobs after it ({', '.join(CASES)})")
        by = f"python -m benchmarks.trainer_phases --write --processes {args.processes} (nothing else running)"
        for line in refit({"TRAINER_START_SECONDS": significant(max(first))}, by, notes):
            print(line)


if __name__ == "__main__":
    main()
