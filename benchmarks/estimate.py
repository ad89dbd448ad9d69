"""The estimate against measured runs over a grid: does `simfl validate` say what a run will use?

Pure latency (``executor: {kind: none}``), lognormal latencies, 100,000 arrivals:
- FedAsync over N = 10^3, 10^4, 10^5 and 10^6 clients, at most 1,000 in flight;
- OrthoFL (its calibrated models and anchors are per-client vectors) over N = 10^3 and 10^4, with the
  client-state store in RAM and on disk, for two model sizes (MLPs of 2,954 and 19,210 parameters).

Training (one process, one thread), FedAsync over 10 clients, exponential latencies:
- the quickstart's small CNN on 8x8 digits (1,954 parameters: the optimizer step's fixed cost dominates);
- an MLP of 256 hidden units on 64 synthetic features (FLOPs and steps alike);
- LeNet5 on MNIST (FLOPs dominate), where the MNIST files are found (``SIMFL_DATA`` or ``../shared``).

Each run is ``simfl run`` in a fresh process. Measured: its wall time less that of ``simfl validate``
of the same file in a fresh process (the imports and the estimate itself: what a run adds), and the
run's peak resident memory (``wait4``'s ``ru_maxrss``). Estimated, by
:func:`simfl.schema.estimate.estimate` for the same scenario: ``wall_seconds`` of one run plus the
launch's own ``LAUNCH_SECONDS``, and ``memory`` plus, for the disk store, its mapped file
(``disk_bytes``: resident while its pages are cached). Prints ``<case>_wall=measured/estimated`` and
``<case>_memory=...`` lines, then ``worst=`` the ratio furthest from 1, and exits 1 when any ratio is
off by more than 2x either way.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from simfl.schema.estimate import LAUNCH_SECONDS, estimate
from simfl.schema.scenario import validate

ROOT = Path(__file__).resolve().parent.parent
ARRIVALS = 100_000
LIMIT = 2.0
DATA = os.environ.get("SIMFL_DATA") or str(ROOT.parent / "shared" / "datasets")
"""The data folder the runs read (MNIST): ``$SIMFL_DATA``, else the shared datasets beside the checkout."""


def scenario(clients: int, algorithm: str, hidden: int, store: str, arrivals: int) -> dict[str, Any]:
    """A pure-latency scenario of ``clients`` devices."""
    raw: dict[str, Any] = {
        "name": "estimate", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 2 * clients, "test_size": 10, "features": 64,
                 "classes": 10, "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [hidden]},
        "latency": {"model": "lognormal", "mean": 5.0, "std": 2.0},
        "budget": {"updates": arrivals},
        "eval": {"every": 1000.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6} if algorithm == "fedasync" else {"name": "orthofl"}],
        "server": {"concurrency": min(1000, clients)},
        "executor": {"kind": "none"},
    }
    if algorithm == "orthofl":
        raw["client_state"] = {"store": store}
    return raw


def training(model: dict[str, Any], data: dict[str, Any], epochs: int, updates: int) -> dict[str, Any]:
    """A training scenario: FedAsync over 10 clients, one thread, ``updates`` arrivals."""
    return {
        "name": "estimate", "seeds": [0], "data": {**data, "partition": {"kind": "iid", "clients": 10}},
        "model": model, "train": {"epochs": epochs, "batch_size": 32, "lr": 0.05},
        "latency": {"model": "exponential", "mean": 10.0, "floor": 5.0},
        "budget": {"updates": updates}, "eval": {"every": 100.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}], "executor": {"kind": "inline", "threads": 1},
    }


def mnist_found() -> bool:
    """Whether the MNIST files are where a run looks for them."""
    return any(Path(DATA).glob("**/train-images-idx3-ubyte*"))


def child(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak resident bytes) of ``python -m simfl ARGV`` in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "simfl", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "SIMFL_DATA": DATA})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"simfl {' '.join(argv)} failed (exit {os.waitstatus_to_exitcode(status)})")
    return wall, usage.ru_maxrss * 1024


def measure(raw: dict[str, Any], folder: Path) -> tuple[float, int]:
    """(what ``simfl run`` takes beyond ``simfl validate``, in wall seconds; the run's peak resident bytes)."""
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    checked, _ = child(["validate", str(path)])
    ran, peak = child(["run", str(path), "--out", str(folder / "out"), "--quiet", "--workers", "1", "--force"])
    return ran - checked, peak


def cases(quick: bool) -> list[tuple[str, dict[str, Any]]]:
    """The grid by case name."""
    arrivals = ARRIVALS // 10 if quick else ARRIVALS
    out = [(f"fedasync_n{n}", scenario(n, "fedasync", 8, "ram", arrivals))
           for n in ((1_000, 10_000) if quick else (1_000, 10_000, 100_000, 1_000_000))]
    for n in (1_000,) if quick else (1_000, 10_000):
        for hidden in (40, 256):
            for store in ("ram", "disk"):
                out.append((f"orthofl_n{n}_h{hidden}_{store}", scenario(n, "orthofl", hidden, store, arrivals // 5)))
    updates = 50 if quick else 400
    out.append(("train_smallcnn_digits", training({"name": "smallcnn", "channels": 8}, {"dataset": "digits"}, 2,
                                                  updates)))
    out.append(("train_mlp_synthetic", training({"name": "mlp", "hidden": [256]},
                                                {"dataset": "synthetic", "train_size": 3000, "test_size": 500,
                                                 "features": 64, "classes": 10}, 2, updates)))
    if mnist_found():
        out.append(("train_lenet5_mnist", training({"name": "lenet5"}, {"dataset": "mnist"}, 1, updates // 10)))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (for a check, not for figures)")
    parser.add_argument("--only", default="", help="the cases whose name starts with this (e.g. train_)")
    args = parser.parse_args(argv)
    worst = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, raw in (c for c in cases(args.quick) if c[0].startswith(args.only)):
            est = estimate(validate(raw))
            wall, peak = measure(raw, Path(tmp))
            assert est.wall_seconds is not None
            est_wall = est.wall_seconds + LAUNCH_SECONDS
            memory = est.memory + est.disk_bytes
            for what, ratio in (("wall", wall / est_wall), ("memory", peak / memory)):
                print(f"{name}_{what}={ratio:.2f}", flush=True)
                worst = ratio if abs(math.log(ratio)) > abs(math.log(worst)) else worst
            print(f"{name}_measured=wall {wall:.1f} s, memory {peak / 2**30:.2f} GiB; estimated wall "
                  f"{est_wall:.1f} s, memory {memory / 2**30:.2f} GiB", flush=True)
    print(f"worst={worst:.2f}")
    if not 1 / LIMIT <= worst <= LIMIT:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
