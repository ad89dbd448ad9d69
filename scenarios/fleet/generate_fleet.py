"""Write a synthetic fleet CSV for the ``fleet_csv`` delay model (default: 10,000 devices, seed 0).

    python scenarios/fleet/generate_fleet.py --devices 10000 --out scenarios/fleet/fleet10k.csv

Devices are drawn from one seeded NumPy generator (same arguments, same file):
training seconds per sample log-normal around 50 ms (sigma 0.6, a
single-board-computer class spread), bandwidth log-normal around 1 MB/s (sigma 1.0),
and a third of the devices present only in one daily window (start uniform
in the day, 4 to 12 hours long), repeating every 86,400 s.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np

DAY = 86_400.0


def rows(devices: int, seed: int) -> list[dict[str, str]]:
    """The fleet's rows, device by device."""
    gen = np.random.default_rng(seed)
    sps = 0.05 * gen.lognormal(0.0, 0.6, devices)
    bandwidth = 1e6 * gen.lognormal(0.0, 1.0, devices)
    windowed = gen.random(devices) < 1 / 3
    start = gen.uniform(0.0, DAY, devices)
    length = gen.uniform(4 * 3600.0, 12 * 3600.0, devices)
    out = []
    for i in range(devices):
        windows, period = "", ""
        if windowed[i]:
            s, e = start[i], start[i] + length[i]
            parts = [(s, min(e, DAY))] + ([(0.0, e - DAY)] if e > DAY else [])
            windows = ";".join(f"{a:.0f}-{b:.0f}" for a, b in sorted(parts))
            period = f"{DAY:.0f}"
        out.append({"client": str(i), "seconds_per_sample": f"{sps[i]:.6f}", "bandwidth": f"{bandwidth[i]:.0f}",
                    "windows": windows, "period": period})
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("fleet10k.csv"))
    args = parser.parse_args(argv)
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, ["client", "seconds_per_sample", "bandwidth", "windows", "period"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows(args.devices, args.seed))


if __name__ == "__main__":
    main()
