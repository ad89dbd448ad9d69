"""How much this machine's own speed moves: the engine's speed probe timed run by run, in one process and in fresh ones.

``simfl run`` times the probe on a cache miss and again every half hour (:func:`simfl.launch.measure_speeds.engine`,
the mean of three runs), and the estimate's wall time scales with the median of those samples. This prints what
one such measurement can be off by:

- ``--runs N``: the probe's timed run (:func:`simfl.launch.measure_speeds.probe`) N times in this process, each
  run's CPU seconds per arrival (``process_time``) with the seconds since the first, then their range and median;
- ``--fresh N``: :func:`~simfl.launch.measure_speeds.engine` in N fresh processes, as N cache misses would
  measure it, and their range.

Run it with nothing else on the machine: another process's load is what it must not see.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from simfl.launch.measure_speeds import PROBE_UPDATES, measuring, probe

FRESH = "from simfl.launch.measure_speeds import engine; print(engine()['arrival'])"


def in_process(runs: int) -> list[float]:
    """CPU seconds per arrival of ``runs`` probe runs in this process, printed as they come."""
    out = []
    with measuring():
        call = probe()
        began = time.perf_counter()
        for _ in range(runs):
            start = time.process_time()
            call()
            out.append((time.process_time() - start) / PROBE_UPDATES[1])
            print(f"at {time.perf_counter() - began:5.1f} s: {out[-1] * 1e6:5.1f} us", flush=True)
    return out


def summary(name: str, values: list[float]) -> None:
    """``name_us=lowest-highest`` and the median, in microseconds an arrival."""
    print(f"{name}_us={min(values) * 1e6:.1f}-{max(values) * 1e6:.1f} median={statistics.median(values) * 1e6:.1f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=40, help="probe runs timed one by one in this process")
    parser.add_argument("--fresh", type=int, default=10, help="fresh processes measuring the probe as a cache miss")
    args = parser.parse_args(argv)
    if args.runs:
        summary("one_process", in_process(args.runs))
    if args.fresh:
        fresh = [float(subprocess.run([sys.executable, "-c", FRESH], check=True, capture_output=True,
                                      text=True).stdout) for _ in range(args.fresh)]
        summary("fresh_processes", fresh)


if __name__ == "__main__":
    main()
