"""Cross-check of simfl's asynchronous rules against AFL-Lib's, on one replayed schedule.

AFL-Lib (github.com/boyi-liu/AFL-Lib) simulates asynchronous FL in one process: every client trains at its
dispatch, its round lasts the measured wall time of that training times a device factor, plus two transfers
and a random drop-out delay, and the server takes the arrivals in time order from a heap. This driver

1. ``prepare``: splits MNIST with simfl's own partition (``dirichlet``, equal sizes) and writes it twice: as
   simfl's ``indices`` partition file and as AFL-Lib's per-client ``dataset/mnist/{train,test}/<i>.npz`` (the
   test set cut into equal shares, so AFL-Lib's mean of per-client accuracies is the accuracy on the whole
   test set, simfl's measure);
2. ``afl``: runs AFL-Lib's own server and client classes from the copy given by ``--afl`` (never imported by
   simfl; nothing of it is in this file), with the MLP simfl builds, seeded RNGs, on the CPU, and logs every
   dispatch (client, the arrivals before it, its round latency) and every arrival (client, time, AFL-Lib's
   staleness), and the accuracy every ``--window`` arrivals;
3. ``replay``: turns that log into a trace folder for simfl's ``latency: replay`` (client m plays back its own
   latencies in order: device m of the folder), writes the scenario, runs ``simfl run``, checks that simfl's
   events.csv has AFL-Lib's client and staleness at every update, and reads simfl's accuracy at the same
   update counts;
4. ``compare``: tabulates both sides per window of updates (``comparison.csv``, ``comparison.md``).

Usage (``results/crosscheck-afl-lib/README.md`` gives the commands of the committed results)::

    python -m benchmarks.afl_crosscheck prepare --afl /tmp/afl --out results/crosscheck-afl-lib
    python -m benchmarks.afl_crosscheck afl --afl /tmp/afl --rule fedasync --seed 0 --out results/crosscheck-afl-lib
    python -m benchmarks.afl_crosscheck replay --rule fedasync --seed 0 --out results/crosscheck-afl-lib
    python -m benchmarks.afl_crosscheck compare --out results/crosscheck-afl-lib
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = 10
SHARES = 60
"""MNIST's 60,000 training rows split in 60 equal Dirichlet shares of 1,000; the first 10 are the clients."""
ALPHA = 0.5
PARTITION_SEED = 0
EPOCHS = 2
BATCH = 64
LR = 0.01
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
"""AFL-Lib's client optimizer: SGD(lr, momentum=0.9, weight_decay=1e-4) (alg/base.py)."""
SETTLED = 100
"""The windows from this many updates on are summarised (the first ones move fastest and differ most by chance)."""
HIDDEN = [512, 256]
"""AFL-Lib's mlp_mnist widths (784-512-256-10)."""

RULES: dict[str, dict[str, Any]] = {
    # AFL-Lib's options (its add_args) and simfl's entry with the same reading.
    "fedasync": {
        # AFL-Lib: alpha = decay / (tau + 1), tau the arrivals since dispatch; simfl's s = tau + 1, s^-1. Its --a
        # is 1 by default (and "--a" on the command line is read as --alg: argparse's prefix matching).
        "afl": ["--decay", "0.3", "--strategy", "poly"],
        "simfl": {"name": "fedasync", "alpha": 0.3, "staleness": {"kind": "polynomial", "a": 1.0}},
    },
    "fedbuff": {
        "afl": ["--etag", "5", "--k", "10"],
        # AFL-Lib: W += etag * mean(deltas) / k = 0.5 mean(deltas), unweighted; simfl weights 1/sqrt(1 + v).
        "simfl": {"name": "fedbuff", "buffer": 10, "server_lr": 0.5},
    },
    "fadas": {
        "afl": ["--M", "5", "--tau_c", "1", "--eta", "0.001", "--beta1", "0.9", "--beta2", "0.99"],
        # AFL-Lib divides by sqrt(v), simfl by sqrt(vhat) (Algorithm 1); the delay step is AFL-Lib's eta / tau_max.
        "simfl": {"name": "fadas", "buffer": 5, "server_lr": 0.001, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8,
                  "delay_threshold": 1, "delay_step": "scaled"},
    },
    "ca2fl": {
        # eta 1 (the paper's step) in place of AFL-Lib's default 0.01, with which neither side's model moves far
        "afl": ["--M", "10", "--eta", "1.0"],
        "simfl": {"name": "ca2fl", "buffer": 10, "server_lr": 1.0},
    },
}


def _mnist() -> Any:
    from simfl.data.mnist import Mnist, MnistConfig

    return Mnist.load(MnistConfig(partition={"kind": "iid", "clients": 1}))


def _record(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """AFL-Lib's client file holds one pickled dict {'x', 'y'} under the key data (its read_data: ``.tolist()``)."""
    record = np.empty((), dtype=object)
    record[()] = {"x": x, "y": y}
    return record


def prepare(afl: Path, out: Path) -> None:
    """Write simfl's partition as its indices file and as AFL-Lib's per-client npz files."""
    from simfl import rng
    from simfl.data.partition import DirichletConfig, split

    data = _mnist()
    labels = data.y_train.numpy()
    parts = split(DirichletConfig(clients=SHARES, alpha=ALPHA, sizes="equal"), labels,
                  rng.stream(PARTITION_SEED, "partition"))
    chosen = [np.asarray(parts[m]) for m in range(CLIENTS)]
    out.mkdir(parents=True, exist_ok=True)
    (out / "partition.json").write_text(json.dumps([c.tolist() for c in chosen]) + "\n")
    base = afl / "dataset" / "mnist"
    for sub in ("train", "test"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    test_shares = np.array_split(np.arange(len(data.y_test)), CLIENTS)
    for m in range(CLIENTS):
        x = data.x_train[chosen[m]].numpy().astype(np.float32)
        y = labels[chosen[m]].astype(np.int64)
        np.savez_compressed(base / "train" / f"{m}.npz", data=_record(x, y))
        tx = data.x_test[test_shares[m]].numpy().astype(np.float32)
        ty = data.y_test[test_shares[m]].numpy().astype(np.int64)
        np.savez_compressed(base / "test" / f"{m}.npz", data=_record(tx, ty))
    counts = [np.bincount(labels[c], minlength=10).tolist() for c in chosen]
    with (out / "partition_counts.csv").open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["client"] + [f"class{k}" for k in range(10)])
        for m, c in enumerate(counts):
            w.writerow([m] + c)
    print(f"partition: {CLIENTS} clients of {len(chosen[0])} rows, Dirichlet({ALPHA}); AFL-Lib files in {base}")


def run_name(rule: str, seed: int, fresh: bool) -> str:
    """The name of an AFL-Lib run's log and of what is derived from it."""
    return f"{rule}_seed{seed}" + ("_fresh" if fresh else "")


def afl(afl_dir: Path, rule: str, seed: int, updates: int, window: int, out: Path, fresh: bool = False) -> None:
    """Run AFL-Lib's rule in a child process (cwd: the AFL-Lib copy) and keep its log.

    ``fresh``: an ablation, AFL-Lib's client optimizer state (the momentum buffer, which its clients keep from
    one round to the next) cleared at each dispatch, as simfl's fresh SGD per round has it."""
    log = out / "afl" / f"{run_name(rule, seed, fresh)}.json"
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(afl_dir), str(ROOT)]), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, str(Path(__file__).resolve()), "_inner", "--rule", rule, "--seed", str(seed),
           "--updates", str(updates), "--window", str(window), "--log", str(log.resolve())] + (
               ["--fresh-optimizer"] if fresh else [])
    subprocess.run(cmd, cwd=afl_dir, env=env, check=True)
    print(f"AFL-Lib {rule} seed {seed}: {log}")


def _inner(rule: str, seed: int, updates: int, window: int, log: Path, fresh: bool) -> None:
    """Inside the AFL-Lib copy: build its FedSim, run ``updates`` server steps, log the schedule."""
    import time

    import torch

    torch.set_num_threads(1)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    from simfl.models.configs import MLPConfig
    from simfl.models.small import MLP

    def simfl_mlp(args: Any) -> torch.nn.Module:
        return MLP.build(MLPConfig(hidden=HIDDEN), (1, 28, 28), 10)

    sys.argv = ["main.py", "--alg", rule, "--dataset", "mnist", "--model", "mlp", "--total_num", str(CLIENTS),
                "--sr", "1.0", "--rnd", str(max(1, updates // CLIENTS)), "--test_gap", "1", "--bs", str(BATCH),
                "--epoch", str(EPOCHS), "--lr", str(LR), "--gamma", "1.0", "--suffix", f"xcheck_{rule}_{seed}",
                *RULES[rule]["afl"]]
    import importlib

    base = importlib.import_module("alg.base")
    # the model both sides train (AFL-Lib's own adds a ReLU on the logits); setattr: a module of the copy
    setattr(base, "load_model", simfl_mlp)  # noqa: B010
    from utils.options import args_parser

    args = args_parser()
    args.device = "cpu"
    main = importlib.import_module("main")
    module = importlib.import_module(f"alg.{rule}")
    dispatches: list[dict[str, Any]] = []
    original = module.Client.run

    def logged_run(self: Any) -> None:
        if fresh:
            self.optim.state.clear()
        original(self)
        dispatches.append({"client": self.id, "after": self.server.round, "time": self.server.wall_clock_time,
                           "latency": self.training_time})

    module.Client.run = logged_run
    fed = main.FedSim(args)
    server = fed.server
    arrivals: list[dict[str, Any]] = []
    accuracy: list[dict[str, Any]] = [{"updates": 0, "accuracy": float(server.test_all()["acc"]) / 100.0}]
    started = time.process_time()
    for k in range(updates):
        server.round = k
        server.run()
        c = server.cur_client
        arrivals.append({"update": k + 1, "client": c.id, "time": server.wall_clock_time,
                         "staleness": server.staleness[c.id]})
        if (k + 1) % window == 0:
            accuracy.append({"updates": k + 1, "accuracy": float(server.test_all()["acc"]) / 100.0})
    log.write_text(json.dumps({"rule": rule, "seed": seed, "fresh_optimizer": fresh, "argv": sys.argv[1:],
                               "cpu_seconds": time.process_time() - started,
                               "dispatches": dispatches, "arrivals": arrivals, "accuracy": accuracy}) + "\n")


def _dispatch_after(arrivals: list[dict[str, Any]], dispatches: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Per client, the arrivals counted before each of its dispatches (AFL-Lib's ``server.round``)."""
    out: dict[int, list[int]] = {}
    for d in dispatches:
        out.setdefault(d["client"], []).append(d["after"])
    return out


def write_traces(log: dict[str, Any], folder: Path) -> None:
    """A trace folder for ``latency: replay``: device m is client m, its uploads its round latencies in order."""
    from simfl.latency.traces import import_traces

    per: dict[int, list[float]] = {m: [] for m in range(CLIENTS)}
    for d in log["dispatches"]:
        per[d["client"]].append(d["latency"])
    rows = sum(len(v) for v in per.values())
    rounds = np.zeros((rows, CLIENTS))
    comps = np.zeros((rows, CLIENTS))
    i = 0
    for m in range(CLIENTS):
        for lat in per[m]:
            rounds[i, m] = lat
            comps[i, m] = lat / 2  # the trace format needs a compute part below the round; replay plays the round
            i += 1
    with tempfile.TemporaryDirectory() as raw:
        for name, table in (("gw1_round_delay.txt", rounds), ("gw1_comp_delay.txt", comps)):
            (Path(raw) / name).write_text("".join(",".join(repr(float(v)) for v in row) + "\n" for row in table))
        folder.mkdir(parents=True, exist_ok=True)
        import_traces(Path(raw), folder, force=True)


def scenario(rule: str, seed: int, updates: int, traces: Path, partition: Path) -> dict[str, Any]:
    """The simfl scenario of one replayed AFL-Lib run."""
    return {
        "name": f"afl-{rule}-seed{seed}",
        "seeds": [seed],
        "data": {"dataset": "mnist", "partition": {"kind": "indices", "path": str(partition), "clients": CLIENTS}},
        "model": {"name": "mlp", "hidden": HIDDEN},
        "train": {"epochs": EPOCHS, "batch_size": BATCH, "lr": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY},
        "latency": {"model": "replay", "traces": str(traces), "profiles": "all", "devices": list(range(CLIENTS))},
        "budget": {"updates": updates},
        "eval": {"every": 1.0e9, "after_each_update": True},
        "executor": {"kind": "inline", "threads": 1},
        "algorithms": [RULES[rule]["simfl"]],
    }


def replay(rule: str, seed: int, out: Path, simfl_seed: int | None = None, fresh: bool = False) -> None:
    """Replay AFL-Lib's schedule of (rule, seed) in simfl, check the event order, keep simfl's accuracy.

    ``simfl_seed`` (default: ``seed``) is simfl's seed: its initial model and batch order. The schedule is the
    AFL-Lib run's whatever it is (the replay draws nothing), so a second simfl seed on one schedule measures
    what the initial model and the batch order alone change."""
    import yaml

    own = seed if simfl_seed is None else simfl_seed
    run = run_name(rule, seed, fresh)
    name = run + ("" if own == seed else f"_simfl{own}")
    log = json.loads((out / "afl" / f"{run}.json").read_text())
    updates = len(log["arrivals"])
    traces = out / "traces" / run
    write_traces(log, traces)
    scn = scenario(rule, own, updates, Path("..") / "traces" / run, Path("..") / "partition.json")
    path = out / "scenarios" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(scn, sort_keys=False))
    run_dir = Path(tempfile.mkdtemp(prefix=f"xcheck-{name}-"))
    env = {**os.environ, "SIMFL_DATA": os.environ.get("SIMFL_DATA", "/work/shared/datasets")}
    # cwd: simfl resolves latency.traces against the working folder (it is not among fields.PATH_KEYS, which
    # are resolved against the scenario file), so the run starts in the scenario's folder, where both agree
    subprocess.run([str(ROOT / ".venv" / "bin" / "simfl"), "run", str(path.resolve()), "--out", str(run_dir / "run"),
                    "--force"], check=True, env=env, cwd=path.parent)
    events = _rows(next((run_dir / "run").rglob("events.csv")))
    metrics = _rows(next((run_dir / "run").rglob("metrics.csv")))
    check = order_check(log, events)
    (out / "simfl").mkdir(parents=True, exist_ok=True)
    accuracy = simfl_accuracy(metrics, [a["updates"] for a in log["accuracy"]])
    (out / "simfl" / f"{name}.json").write_text(json.dumps(
        {"rule": rule, "entry": RULES[rule]["simfl"]["name"], "seed": seed, "simfl_seed": own, "fresh_optimizer": fresh,
         "order": check,
         "accuracy": accuracy}) + "\n")
    shutil.copyfile(next((run_dir / "run").rglob("events.csv")), out / "simfl" / f"{name}_events.csv")
    shutil.rmtree(run_dir)
    print(f"simfl {name}: order {check['verdict']}")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def order_check(log: dict[str, Any], events: list[dict[str, str]]) -> dict[str, Any]:
    """Compare simfl's updates (events.csv rows of event arrival) with AFL-Lib's arrivals, one by one: the client,
    the arrival time, and the staleness in arrivals (simfl's ``s = t - tau`` is AFL-Lib's arrivals since
    dispatch plus one)."""
    updates = [e for e in events if e["event"] == "arrival"]
    disp = _dispatch_after(log["arrivals"], log["dispatches"])
    taken = {m: 0 for m in disp}
    mismatches: list[str] = []
    for a, e in zip(log["arrivals"], updates, strict=False):
        m = a["client"]
        after = disp[m][taken[m]]
        taken[m] += 1
        afl_s = a["update"] - after  # arrivals since its dispatch, this one included
        if int(e["client"]) != m or int(e["staleness"]) != afl_s or float(e["time"]) != a["time"]:
            mismatches.append(f"update {a['update']}: AFL-Lib client {m} s={afl_s} t={a['time']!r}; "
                              f"simfl client {e['client']} s={e['staleness']} t={e['time']}")
    same = not mismatches and len(updates) >= len(log["arrivals"])
    return {"updates": len(log["arrivals"]), "simfl_updates": len(updates), "mismatches": mismatches[:20],
            "verdict": "identical" if same else f"{len(mismatches)} mismatches"}


def simfl_accuracy(metrics: list[dict[str, str]], at: list[int]) -> list[dict[str, Any]]:
    """simfl's accuracy of the global model after each update count in ``at`` (0: the initial model): the last
    metrics.csv row at or before that count (``eval.after_each_update`` writes one after every aggregation)."""
    out: list[dict[str, Any]] = []
    for n in at:
        row = [r for r in metrics if int(r["updates"]) <= n][-1]
        out.append({"updates": n, "accuracy": float(row["accuracy"]), "virtual_time": float(row["virtual_time"])})
    return out


def fadas_steps(log: dict[str, Any], events: list[dict[str, str]]) -> str:
    """FADAS's step ``eta_t`` of each flush as AFL-Lib computes it from its own logged delays (its staleness counts
    flushes since dispatch: eta / tau_max when tau_max > tau_c = 1, else eta; alg/fadas.py) against the step
    simfl wrote in events.csv's weight column, flush by flush."""
    eta, buffer = 0.001, 5
    flushes = [e for e in events if e["event"] == "arrival" and e["weight"] != ""]
    arrivals = log["arrivals"]
    bad = 0
    for j, e in enumerate(flushes):
        tau = max(a["staleness"] for a in arrivals[j * buffer:(j + 1) * buffer])
        afl_step = eta / tau if tau > 1 else eta
        bad += float(e["weight"]) != afl_step
    return f"{len(flushes) - bad} of {len(flushes)} flushes take AFL-Lib's step"


def compare(out: Path, extra_seed: int = 100) -> None:
    """``comparison.csv`` (one row per rule, AFL-Lib seed, simfl seed and window), ``windows.csv`` and ``windows.md``
    (per rule and window: both seeds of each side, their means and difference, and the two noise measures: AFL-Lib's
    seed-to-seed gap, whose schedule, initial model and batches all change, and simfl's gap between two seeds on
    one schedule, ``--simfl-seed extra_seed`` on AFL-Lib seed 0's, where only the initial model and batches do)."""
    rows: list[dict[str, Any]] = []
    runs: dict[tuple[str, int, int], dict[int, float]] = {}
    afl_runs: dict[tuple[str, int], dict[int, float]] = {}
    for f in sorted((out / "simfl").glob("*.json")):
        s = json.loads(f.read_text())
        fresh = bool(s.get("fresh_optimizer", False))
        a = json.loads((out / "afl" / f"{run_name(s['rule'], s['seed'], fresh)}.json").read_text())
        own = s.get("simfl_seed", s["seed"])
        if not fresh:
            afl_runs[(s["rule"], s["seed"])] = {x["updates"]: x["accuracy"] for x in a["accuracy"]}
            runs[(s["rule"], s["seed"], own)] = {y["updates"]: y["accuracy"] for y in s["accuracy"]}
        if s["rule"] == "fadas":
            print(f"{f.stem}: {fadas_steps(a, _rows(f.with_name(f.stem + '_events.csv')))}")
        for x, y in zip(a["accuracy"], s["accuracy"], strict=True):
            rows.append({"rule": s["rule"], "afl_seed": s["seed"], "simfl_seed": own,
                         "afl_optimizer": "fresh" if fresh else "kept", "updates": x["updates"],
                         "afl_lib": x["accuracy"], "simfl": y["accuracy"], "diff": y["accuracy"] - x["accuracy"],
                         "order": s["order"]["verdict"]})
    with (out / "comparison.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    table: list[dict[str, Any]] = []
    for rule in RULES:
        if (rule, 0) not in afl_runs or (rule, 1) not in afl_runs:
            continue
        a0, a1 = afl_runs[(rule, 0)], afl_runs[(rule, 1)]
        s0, s1 = runs[(rule, 0, 0)], runs[(rule, 1, 1)]
        sx = runs.get((rule, 0, extra_seed))
        for n in sorted(a0):
            afl_mean, simfl_mean = (a0[n] + a1[n]) / 2, (s0[n] + s1[n]) / 2
            table.append({"rule": rule, "updates": n, "afl_seed0": a0[n], "afl_seed1": a1[n], "simfl_seed0": s0[n],
                          "simfl_seed1": s1[n], f"simfl_seed0_simfl{extra_seed}": sx[n] if sx else "",
                          "afl_mean": afl_mean, "simfl_mean": simfl_mean, "diff_of_means": simfl_mean - afl_mean,
                          "afl_seed_gap": abs(a0[n] - a1[n]),
                          "simfl_init_gap": abs(s0[n] - sx[n]) if sx else ""})
    with (out / "windows.csv").open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(table[0]))
        w.writeheader()
        w.writerows(table)
    pct = "{:.1f}".format
    lines = [f"| rule | updates | AFL-Lib s0 / s1 | simfl s0 / s1 | simfl s0, seed {extra_seed} | diff of means | "
             "AFL-Lib seed gap | simfl init gap |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in table:
        sx_text = pct(100 * r[f"simfl_seed0_simfl{extra_seed}"]) if r["simfl_init_gap"] != "" else ""
        gap = pct(100 * r["simfl_init_gap"]) if r["simfl_init_gap"] != "" else ""
        lines.append(f"| {r['rule']} | {r['updates']} | {pct(100 * r['afl_seed0'])} / {pct(100 * r['afl_seed1'])} | "
                     f"{pct(100 * r['simfl_seed0'])} / {pct(100 * r['simfl_seed1'])} | {sx_text} | "
                     f"{100 * r['diff_of_means']:+.1f} | {pct(100 * r['afl_seed_gap'])} | {gap} |")
    lines += ["", f"Mean over the windows from {SETTLED} updates on (percentage points):", "",
              "| rule | simfl - AFL-Lib, seed 0 (same schedule) | seed 1 (same schedule) | simfl seed 0 - seed "
              f"{extra_seed} (same schedule) | its mean abs. per window | AFL-Lib seed 0 - seed 1 | its mean abs. "
              "per window |", "|---|---:|---:|---:|---:|---:|---:|"]
    for rule in RULES:
        mine = [r for r in table if r["rule"] == rule and r["updates"] >= SETTLED]
        if not mine:
            continue
        d0 = np.mean([r["simfl_seed0"] - r["afl_seed0"] for r in mine])
        d1 = np.mean([r["simfl_seed1"] - r["afl_seed1"] for r in mine])
        init = [r["simfl_seed0"] - r[f"simfl_seed0_simfl{extra_seed}"] for r in mine if r["simfl_init_gap"] != ""]
        init_text = f"{100 * np.mean(init):+.2f} | {100 * np.mean(np.abs(init)):.2f}" if init else " | "
        afl_gap = [r["afl_seed0"] - r["afl_seed1"] for r in mine]
        lines.append(f"| {rule} | {100 * d0:+.2f} | {100 * d1:+.2f} | {init_text} | {100 * np.mean(afl_gap):+.2f} | "
                     f"{100 * np.mean(np.abs(afl_gap)):.2f} |")
    (out / "windows.md").write_text("\n".join(lines) + "\n")
    print(f"{len(rows)} rows -> {out / 'comparison.csv'}; {len(table)} windows -> {out / 'windows.csv'}, windows.md")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("prepare", "afl", "replay", "compare", "_inner"):
        s = sub.add_parser(name)
        s.add_argument("--out", type=Path, default=ROOT / "results" / "crosscheck-afl-lib")
        s.add_argument("--afl", type=Path, default=None)
        s.add_argument("--rule", choices=sorted(RULES), default="fedasync")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--updates", type=int, default=200)
        s.add_argument("--window", type=int, default=20)
        s.add_argument("--log", type=Path, default=None)
        s.add_argument("--simfl-seed", type=int, default=None, help="replay: simfl's seed (default: --seed)")
        s.add_argument("--fresh-optimizer", action="store_true",
                       help="afl, replay: the ablation whose AFL-Lib clients clear their optimizer state at dispatch")
    a = p.parse_args(argv)
    if a.cmd in ("prepare", "afl") and a.afl is None:
        p.error("--afl DIR (an AFL-Lib copy) is needed")
    if a.cmd == "prepare":
        prepare(a.afl, a.out)
    elif a.cmd == "afl":
        afl(a.afl, a.rule, a.seed, a.updates, a.window, a.out, a.fresh_optimizer)
    elif a.cmd == "replay":
        replay(a.rule, a.seed, a.out, a.simfl_seed, a.fresh_optimizer)
    elif a.cmd == "compare":
        compare(a.out)
    else:
        _inner(a.rule, a.seed, a.updates, a.window, a.log, a.fresh_optimizer)


if __name__ == "__main__":
    main()
