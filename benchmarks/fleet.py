"""Arrivals per wall second of the 10,000-device fleet (``scenarios/fleet/fleet10k.yaml``) in pure-latency mode.

Two runs of the committed scenario, both on the heap clock of :mod:`simfl.sim.clock`
(``simfl run`` takes it in pure-latency mode): with the fleet's availability windows and
without them (``availability: false``). Prints ``name=value``
lines, the last being ``arrivals_per_second`` (with windows, as the scenario
file runs).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "fleet" / "fleet10k.yaml"


def rate(overrides: list[str]) -> tuple[float, int, float]:
    """(arrivals per wall second, arrivals, virtual seconds) of one run of the fleet scenario."""
    scn = scenario_mod.load(SCENARIO, overrides)
    fed = federation(scn, load_dataset(scn), scn.seeds[0])
    result = run_one(scn, fed, 0)
    return result.state.updates / result.wall_seconds, result.state.updates, result.state.now


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--updates", type=int, default=200_000, help="arrivals per run")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    budget = f"budget.updates={args.updates}"
    plain, n_plain, t_plain = rate([budget, "latency.availability=false"])
    windows, n_win, t_win = rate([budget])
    print("devices=10000")
    print(f"no_windows_arrivals={n_plain}")
    print(f"no_windows_virtual_seconds={t_plain:.0f}")
    print(f"no_windows_arrivals_per_second={plain:.0f}")
    print(f"windows_simpy_arrivals={n_win}")
    print(f"windows_simpy_virtual_seconds={t_win:.0f}")
    print(f"arrivals_per_second={windows:.0f}")


if __name__ == "__main__":
    main()
