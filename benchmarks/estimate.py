"""The estimate against measured runs over a grid: does `simfl validate` say what a run will use?

Every case is a scenario; each is run by ``simfl run`` in a fresh process and compared with
:func:`simfl.schema.estimate.estimate` of the same scenario on three counts:

- **client updates** (``updates``): per entry, the mean over seeds of summary.csv's updates against the entry's
  estimated updates (``updates_ratio``), or where the budget is in updates, the virtual time it took against the
  estimated horizon (``horizon_ratio``). These follow from the latency model's statement and the simulation's
  rules alone: deterministic, checked on any machine (``--counts`` runs only these, every case in pure-latency
  mode, where the virtual clock is the same as with training);
- **wall time** (``wall_ratio``): ``simfl run``'s wall time less that of ``simfl validate`` of the same file in
  pure-latency mode (``executor: {kind: none}``) in a fresh process (the imports, the scenario's checks and its
  world's statement; in training mode, validate also measures a model that ``models/model_costs.json`` does not
  list, which loads PyTorch's compiler front end, 2.5-2.9 s on this VM: what a training run pays once,
  :data:`simfl.schema.costs.TRAINER_START_SECONDS`, and the estimate counts) against the estimated wall time of
  every run plus the launch's (:func:`simfl.schema.costs.launch_seconds`), at this machine's speeds as ``simfl run`` measures them
  (:mod:`simfl.launch.measure_speeds`, measured here before the run on a cache miss, so that the run's wall time
  does not include the measuring); a case of under :data:`SHORT_SECONDS` takes the shortest of
  :data:`REPEATS` runs and of as many validates. The cases share one cache, as a user's runs do: each run that
  finishes alone teaches the estimates after it (:func:`simfl.launch.measure_speeds.learn`), so a case's estimate,
  made before its runs, is scaled by what the cases before it measured; the line of figures also gives the
  estimate without that (``untaught``);
- **peak memory** (``memory_ratio``): the run's peak resident set (``wait4``'s ``ru_maxrss``) against the
  estimated memory plus, for the disk store, its mapped file.

The grid: every built-in delay model in pure-latency mode (constant per client, exponential, lognormal,
half-normal, uniform and Pareto per round and per client, the RPi Gaussian devices, replay of the traces, a fleet
CSV and FedScale traces with their availability windows), failures and departures, synchronous rounds with a
deadline and over-selection, served populations (FedAsync over N = 10^3 ... 10^6 clients, OrthoFL's per-client
vectors in RAM and on disk); and training (one process, one thread) of the small CNN, an MLP and the paper's
models: LeNet5 on MNIST, ResNet18-1D on the HAPT windows (where their files are found: ``SIMFL_DATA`` or
``../shared``), VGG11 on CIFAR-10 and MobileNetV2 on CIFAR-100 (random images written in CIFAR's format: the
timing does not depend on the pixels). The paper's text model states no cost ahead (its encoder is read when
the run starts) and is not in the grid.

Prints ``<case>_<what>=measured/estimated`` lines and the figures, then ``worst=`` the ratio furthest from 1, and
exits 1 when any ratio is off by more than 1.5x either way.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simfl.launch.measure_speeds import ensure
from simfl.schema.estimate import Estimate, estimate
from simfl.schema.scenario import validate

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 1.5
SHORT_SECONDS = 30.0
"""A case whose run takes less is measured :data:`REPEATS` times: its wall beyond ``simfl validate`` is a few
seconds beside several of the interpreter's and PyTorch's start, whose own wall varied by a second or two from one
start to the next on this VM (``replay`` measured 4.1 s and 1.8 s, ``pareto_per_round`` 3.0 s and 4.5 s, in the
two grids of ``benchmarks/estimate_grid_2026-11-27*.txt``, one run each in the first)."""
REPEATS = 3
"""Runs and validates of a short case: the shortest of each is taken (a process is slowed, never sped up, by what
else the machine does)."""
DATA = os.environ.get("SIMFL_DATA") or str(ROOT.parent / "shared" / "datasets")
"""The data folder the runs read (MNIST, HAPT): ``$SIMFL_DATA``, else the shared datasets beside the checkout."""
FLEET = ROOT / "scenarios" / "fleet" / "fleet1k.csv"


def pure(latency: dict[str, Any], budget: dict[str, Any], clients: int = 50, seeds: int = 3,
         algorithms: list[dict[str, Any]] | None = None, **changes: Any) -> dict[str, Any]:
    """A pure-latency scenario of ``clients`` clients (FedAsync unless ``algorithms``), three seeds."""
    raw: dict[str, Any] = {
        "name": "estimate", "seeds": list(range(seeds)),
        "data": {"dataset": "synthetic", "train_size": 20 * clients, "test_size": 10, "features": 8, "classes": 4,
                 "partition": {"kind": "iid", "clients": clients}},
        "model": {"name": "mlp", "hidden": [8]}, "train": {"epochs": 1},
        "latency": latency, "budget": budget, "eval": {"every": 1000.0},
        "algorithms": algorithms or [{"name": "fedasync", "alpha": 0.6}],
        "executor": {"kind": "none"},
    }
    raw.update(changes)
    return raw


def population(clients: int, algorithm: str, hidden: int, store: str, arrivals: int) -> dict[str, Any]:
    """A served pure-latency scenario of ``clients`` devices, at most 1,000 in flight, ``algorithm`` (its defaults
    but FedAsync's alpha and CA2FL's buffer), an MLP of ``hidden`` units, OrthoFL's vectors in ``store``."""
    rule = {"fedasync": {"name": "fedasync", "alpha": 0.6}, "ca2fl": {"name": "ca2fl", "buffer": 10}}.get(
        algorithm, {"name": algorithm})
    raw = pure({"model": "lognormal", "mean": 5.0, "std": 2.0}, {"updates": arrivals}, clients=clients, seeds=1,
               algorithms=[rule], server={"concurrency": min(1000, clients)})
    raw["data"].update(train_size=2 * clients, test_size=10, features=64, classes=10)
    raw["model"] = {"name": "mlp", "hidden": [hidden]}
    if algorithm == "orthofl":
        raw["client_state"] = {"store": store}
    return raw


def training(model: dict[str, Any], data: dict[str, Any], epochs: int, updates: int, clients: int = 10,
             batch: int = 32) -> dict[str, Any]:
    """A training scenario: FedAsync, one thread, ``updates`` arrivals."""
    return {
        "name": "estimate", "seeds": [0], "data": {**data, "partition": {"kind": "iid", "clients": clients}},
        "model": model, "train": {"epochs": epochs, "batch_size": batch, "lr": 0.05},
        "latency": {"model": "exponential", "mean": 10.0, "floor": 5.0},
        "budget": {"updates": updates}, "eval": {"every": 100.0},
        "algorithms": [{"name": "fedasync", "alpha": 0.6}], "executor": {"kind": "inline", "threads": 1},
    }


def found(pattern: str) -> bool:
    """Whether files matching ``pattern`` are in the data folder the runs read."""
    return any(Path(DATA).glob(pattern))


def cifar(folder: Path, variant: str) -> Path:
    """A data folder holding random images in CIFAR-10's or CIFAR-100's python format, full size."""
    gen = np.random.default_rng(0)
    if variant == "cifar10":
        out = folder / "cifar10" / "cifar-10-batches-py"
        batches = {f"data_batch_{i}": 10_000 for i in range(1, 6)} | {"test_batch": 10_000}
        key, classes = "labels", 10
    else:
        out = folder / "cifar100" / "cifar-100-python"
        batches, key, classes = {"train": 50_000, "test": 10_000}, "fine_labels", 100
    out.mkdir(parents=True, exist_ok=True)
    for name, n in batches.items():
        data = {b"data": gen.integers(0, 256, (n, 3072), dtype=np.uint8),
                key.encode(): gen.integers(0, classes, n).tolist()}
        (out / name).write_bytes(pickle.dumps(data, protocol=2))
    return out.parent


def fedscale(folder: Path) -> tuple[Path, Path]:
    """FedScale-format capacity and availability pickles of 500 devices: 20-200 ms per sample, 1-10 MB/s, present
    in one to three windows a day."""
    gen = np.random.default_rng(1)
    capacity = {i: {"computation": float(gen.uniform(20, 200)), "communication": float(gen.uniform(8e3, 8e4))}
                for i in range(500)}
    behaviour = {}
    for i in range(500):
        starts = np.sort(gen.uniform(0, 86_400, gen.integers(1, 4)))
        ends = np.minimum(starts + gen.uniform(3600, 6 * 3600, len(starts)), np.append(starts[1:], 86_400.0))
        behaviour[i] = {"active": starts.tolist(), "inactive": ends.tolist(), "finish_time": 86_400.0}
    paths = folder / "capacity.pkl", folder / "behaviour.pkl"
    for path, value in zip(paths, (capacity, behaviour), strict=True):
        path.write_bytes(pickle.dumps(value))
    return paths


Case = tuple[str, Callable[[Path], dict[str, Any]]]
"""A case's name and what makes its scenario (given a scratch folder for generated files)."""


def cases(quick: bool) -> list[Case]:
    """The grid by case name. The full grid's pure-latency cases are sized to 120,000-420,000 arrivals (10-20 s
    of runs on this project's VM) so that a case's wall time is mostly its runs, not the launch's few seconds,
    which moved by 2x between starts (``replay`` measured 4.1 s and 1.8 s in all at 17,000 arrivals, in the grids
    of ``benchmarks/estimate_grid_2026-11-27*.txt``); ``quick`` keeps them small."""
    lognormal = {"model": "lognormal", "mean": 30.0, "std": 40.0}
    per_case = {"lognormal_per_round": 340_000.0, "lognormal_per_client": 80_000.0, "halfnormal_per_round": 340_000.0,
                "halfnormal_per_client": 60_000.0, "uniform_per_round": 800_000.0, "uniform_per_client": 400_000.0,
                "pareto_per_round": 340_000.0, "pareto_per_client": 300_000.0}
    out: list[Case] = [
        ("constant", lambda _: pure({"model": "constant", "seconds": [float(1 + m % 7) for m in range(50)]},
                                    {"time": 500.0 if quick else 20_000.0}, seeds=1)),
        ("exponential", lambda _: pure({"model": "exponential", "mean": 10.0, "floor": 5.0},
                                       {"time": 3000.0 if quick else 40_000.0})),
    ]
    for model in ("lognormal", "halfnormal", "uniform", "pareto"):
        for mode in ("per_round", "per_client"):
            name = f"{model}_{mode}"
            out.append((name, lambda _, m=model, o=mode, t=20_000.0 if quick else per_case[name]:
                        pure({"model": m, "mode": o}, {"time": t})))
    out += [
        ("rpi_gaussian", lambda _: pure({"model": "rpi_gaussian"}, {"time": 20_000.0 if quick else 560_000.0})),
        ("rpi_gaussian_all", lambda _: pure({"model": "rpi_gaussian", "profiles": "all"},
                                            {"time": 20_000.0 if quick else 110_000.0})),
        ("replay", lambda _: pure({"model": "replay"}, {"time": 20_000.0 if quick else 460_000.0})),
        ("replay_all", lambda _: pure({"model": "replay", "profiles": "all", "random_offset": True},
                                      {"time": 20_000.0 if quick else 100_000.0})),
        ("replay_updates", lambda _: pure({"model": "replay", "profiles": "all"},
                                          {"updates": 5000 if quick else 130_000})),
        ("lognormal_per_client_quickstart", lambda _: pure({"model": "lognormal", "mode": "per_client"},
                                                           {"time": 600.0 if quick else 150_000.0}, clients=10,
                                                           seeds=8)),
        ("fleet_csv_windows", lambda _: pure({"model": "fleet_csv", "path": str(FLEET), "horizon": 86_400.0},
                                             {"time": 86_400.0}, clients=1000, seeds=1 if quick else 5,
                                             train={"epochs": 100}, server={"concurrency": 100})),
        ("fleet_csv_everyone", lambda _: pure({"model": "fleet_csv", "path": str(FLEET), "horizon": 86_400.0},
                                              {"time": 86_400.0}, clients=1000, seeds=1 if quick else 5,
                                              train={"epochs": 1000})),
        ("fedscale_windows", lambda d: _fedscale(d, 1 if quick else 10)),
        ("availability", lambda _: pure(lognormal, {"time": 5000.0 if quick else 100_000.0}, availability={
            "p": 0.2, "rejoin_delay": 30.0,
            "departures": [{"client": m, "leave": 500.0 * (m % 5), "rejoin": 500.0 * (m % 5) + 1500.0}
                           for m in range(0, 50, 2)]})),
        ("sync_deadline", lambda _: pure(lognormal, {"time": 20_000.0 if quick else 300_000.0},
                                         algorithms=[{"name": "fedavg", "clients_per_round": 10}],
                                         rounds={"deadline": 40.0, "over_select": 0.3})),
        ("sync_replay", lambda _: pure({"model": "replay", "profiles": "all"}, {"time": 50_000.0 if quick else 100_000.0},
                                       algorithms=[{"name": "fedavg", "clients_per_round": 10},
                                                   {"name": "fedasync", "alpha": 0.6}])),
        ("sync_served", lambda _: pure(lognormal, {"updates": 3000 if quick else 40_000}, clients=500,
                                       server={"concurrency": 40},
                                       algorithms=[{"name": "fedavg", "clients_per_round": 20}])),
    ]
    arrivals = 10_000 if quick else 100_000
    out += [(f"fedasync_n{n}", lambda _, n=n: population(n, "fedasync", 8, "ram", arrivals))
            for n in ((1_000, 10_000) if quick else (1_000, 10_000, 100_000, 1_000_000))]
    # a rule's passes over a larger model (AlgorithmConfig.arrival_passes), CA2FL's growing with the clients
    out += [(f"{rule}_n1000_h{hidden}", lambda _, r=rule, h=hidden: population(1_000, r, h, "ram", arrivals // 5))
            for rule, hidden in (("fedasync", 256), ("ca2fl", 64))]
    for n in (1_000,) if quick else (1_000, 10_000):
        for hidden in (40, 256):
            for store in ("ram", "disk"):
                out.append((f"orthofl_n{n}_h{hidden}_{store}",
                            lambda _, n=n, h=hidden, s=store: population(n, "orthofl", h, s, arrivals // 5)))
    updates = 50 if quick else 400
    out.append(("train_smallcnn_digits", lambda _: training({"name": "smallcnn", "channels": 8}, {"dataset": "digits"},
                                                            2, updates)))
    out.append(("train_mlp_synthetic", lambda _: training({"name": "mlp", "hidden": [256]},
                                                          {"dataset": "synthetic", "train_size": 3000, "test_size": 500,
                                                           "features": 64, "classes": 10}, 2, updates)))
    if found("**/train-images-idx3-ubyte*"):
        out.append(("train_lenet5_mnist", lambda _: training({"name": "lenet5"}, {"dataset": "mnist"}, 1,
                                                             updates // 10, batch=128)))
    if found("**/hapt_raw.npz"):
        out.append(("train_resnet18_1d_hapt", lambda _: training(
            {"name": "resnet18_1d"}, {"dataset": "hapt"}, 1, updates // 10, clients=21, batch=128) | {
            "data": {"dataset": "hapt", "partition": {"kind": "by_subject", "clients": 21}}}))
    out.append(("train_vgg11_cifar10", lambda d: training(
        {"name": "vgg11"}, {"dataset": "cifar10", "root": str(cifar(d, "cifar10"))}, 1, 10 if quick else 20,
        clients=500, batch=32)))
    out.append(("train_mobilenetv2_cifar100", lambda d: training(
        {"name": "mobilenetv2"}, {"dataset": "cifar100", "root": str(cifar(d, "cifar100"))}, 1, 10 if quick else 20,
        clients=500, batch=32)))
    return out


def _fedscale(folder: Path, seeds: int) -> dict[str, Any]:
    capacity, behaviour = fedscale(folder)
    return pure({"model": "fedscale", "path": str(capacity), "behavior": str(behaviour), "horizon": 86_400.0},
                {"time": 86_400.0}, clients=500, seeds=seeds, train={"epochs": 50}, server={"concurrency": 50})


def child(argv: list[str]) -> tuple[float, int, float]:
    """(wall seconds, peak resident bytes, CPU seconds) of ``python -m simfl ARGV`` in a fresh process."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "simfl", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env={**os.environ, "SIMFL_DATA": DATA})
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        err = proc.stderr.read().decode() if proc.stderr else ""
        raise SystemExit(f"simfl {' '.join(argv)} failed (exit {os.waitstatus_to_exitcode(status)}): {err.strip()}")
    return wall, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def summary(out: Path) -> dict[str, tuple[float, float]]:
    """Per entry, the mean over seeds of (updates, virtual time) in the result folder's summary.csv."""
    rows: dict[str, list[tuple[float, float]]] = {}
    with (out / "summary.csv").open() as fh:
        for row in csv.DictReader(fh):
            rows.setdefault(row["algorithm"], []).append((float(row["updates"]), float(row["virtual_time"])))
    return {k: (float(np.mean([u for u, _ in v])), float(np.mean([t for _, t in v]))) for k, v in rows.items()}


def counts(raw: dict[str, Any], est: Estimate, out: Path) -> list[tuple[str, float]]:
    """``updates_<entry>`` (time budgets) or ``horizon_<entry>`` (update budgets): measured over estimated."""
    got = summary(out)
    ratios = []
    for run in est.entries:
        assert run.extent is not None, f"{run.name}: nothing stated"
        updates, virtual = got[run.name]
        if "updates" in raw["budget"] and updates >= raw["budget"]["updates"]:
            ratios.append((f"horizon_{run.name}", virtual / run.extent.horizon))
        else:
            ratios.append((f"updates_{run.name}", updates / max(run.extent.arrivals, 1e-9)))
    return ratios


def measure(name: str, raw: dict[str, Any], folder: Path, only_counts: bool) -> list[tuple[str, float]]:
    """The ratios of one case (printed as they come)."""
    pure_latency = {**raw, "executor": {"kind": "none"}}
    if only_counts:
        raw = pure_latency
    path, checked = folder / "s.yaml", folder / "checked.yaml"
    path.write_text(yaml.safe_dump(raw))
    checked.write_text(yaml.safe_dump(pure_latency))  # the wall subtracted
    scenario = validate(raw)
    if not only_counts:
        ensure(scenario)  # cached in $SIMFL_CACHE, which the run reads too
    est, untaught_est = estimate(scenario), estimate(scenario, learned=False)
    out = folder / "out"
    commands = (["validate", str(checked)], ["run", str(path), "--out", str(out), "--quiet", "--workers", "1", "--force"])
    taken = [[child(c) for c in commands]]
    if not only_counts and taken[0][1][0] < SHORT_SECONDS:  # REPEATS of each, taken in turn
        taken += [[child(c) for c in commands] for _ in range(REPEATS - 1)]
    checked, checked_cpu = min(v[0] for v, _ in taken), min(v[2] for v, _ in taken)
    ran, peak, cpu = min(r[0] for _, r in taken), max(r[1] for _, r in taken), min(r[2] for _, r in taken)
    ratios = counts(raw, est, out)
    if not only_counts:
        wall = estimated_wall(name, est)
        untaught = estimated_wall(name, untaught_est)
        memory = est.memory + est.disk_bytes
        ratios += [("wall", (ran - checked) / wall), ("memory", peak / memory)]
        print(f"{name}_measured=wall {ran - checked:.1f} s (CPU {cpu - checked_cpu:.1f} s), memory {peak / 2**30:.2f} "
              f"GiB; estimated wall {wall:.1f} s (untaught {untaught:.1f} s), memory {memory / 2**30:.2f} GiB "
              f"({est.speeds_text()})", flush=True)
    for what, ratio in ratios:
        print(f"{name}_{what}={ratio:.2f}", flush=True)
    return ratios


def against(log: Path) -> float:
    """The wall ratios of the cases a saved output of this grid measured (its ``<case>_measured=wall X s`` lines)
    against the estimate of this code, without running anything (the measured side does not depend on the
    estimate's code): for refitting the constants of :mod:`simfl.schema.costs` to one grid. The worst ratio."""
    measured = {}
    for line in log.read_text().splitlines():
        found = re.match(r"(\w+)_measured=wall (-?[\d.]+) s", line)
        if found:
            measured[found.group(1)] = float(found.group(2))
    worst = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases(False):
            if name not in measured:
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            ratio = max(measured[name], 1e-12) / estimated_wall(name, estimate(validate(make(folder))))
            print(f"{name}_wall={ratio:.2f}", flush=True)
            worst = further(worst, ratio)
    return worst


def estimated_wall(name: str, est: Estimate) -> float:
    """The wall seconds a case's launch is estimated to take beyond ``simfl validate``: its runs and the launch's."""
    assert est.wall_total is not None, f"{name}: no wall time estimated"
    return est.wall_total + est.launch_seconds


def further(worst: float, ratio: float) -> float:
    """Of two ratios, the one further from 1 (either way)."""
    return ratio if abs(math.log(ratio)) > abs(math.log(worst)) else worst


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (for a check, not for figures)")
    parser.add_argument("--only", default="", help="the cases whose name starts with this (e.g. train_)")
    parser.add_argument("--skip", default="", help="leave out the cases whose name starts with one of these "
                        "(comma-separated, e.g. train_vgg11,train_mobilenetv2)")
    parser.add_argument("--counts", action="store_true",
                        help="only the client updates and horizons (every case in pure-latency mode): deterministic, "
                        "checked on a busy machine too")
    parser.add_argument("--against", type=Path, default=None,
                        help="a saved output of this grid: its measured walls against this code's estimate, nothing run")
    args = parser.parse_args(argv)
    if args.against is not None:
        worst = against(args.against)
        print(f"worst={worst:.2f}")
        sys.exit(0 if 1 / LIMIT <= worst <= LIMIT else 1)
    worst = 1.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in cases(args.quick):
            skipped = any(name.startswith(p) for p in args.skip.split(",") if p)
            if skipped or not name.startswith(args.only) or args.counts and name.startswith("train_") and "cifar" in name:
                continue
            folder = Path(tmp) / name
            folder.mkdir()
            for _, ratio in measure(name, make(folder), folder, args.counts):
                # a negative wall (validate slower than the run, on a busy machine) counts as 0
                worst = further(worst, max(ratio, 1e-12))
    print(f"worst={worst:.2f}")
    if not 1 / LIMIT <= worst <= LIMIT:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
