"""A Flower App under ``simfl flwr run`` and under Flower's own simulation engine: wall seconds, and agreement.

The app is ``examples/flower/app`` (a quickstart-style ServerApp with FedAvg and a server-side evaluation, a
ClientApp loading and partitioning scikit-learn's digits itself and shuffling through an unseeded DataLoader), 6
nodes, one CPU (one torch thread) per ClientApp on both sides. Flower's engine is run as ``flwr run``'s simulation
process runs it (``flwr.simulation.run_simulation._run_simulation`` with the app folder, its Ray backend), in a fresh
process with torch's own kernels (not the ones simfl pins in the benchmark's environment); ``simfl flwr run`` too
(its defaults: portable numerics, the ClientApp calls one at a time in the simulating process).

Two measures:

- wall time (default): each side's wall time includes its start (imports, Ray), medians of ``--repeat`` runs, the
  sides alternating. Prints ``name=value`` lines, the last ``flower_vs_simfl`` (Flower's wall time over simfl's).
  ``--split A,B``: the same at A and at B rounds in one run, and each side's start and cost of a round apart
  (:func:`split`).
- ``--agreement N``: the app, unseeded, for N seeds under simfl (seeds 0 to N-1) and N runs of Flower's engine
  (Flower seeds nothing: each run draws its own initial model and shuffles). For each round, the server-side test
  accuracy of the two engines' runs is compared by Welch's t-test (SciPy's ``ttest_ind``, unequal variances): the
  engines agree when no round's p-value falls below 0.05 divided by the number of rounds compared (Bonferroni: a
  5% chance over all rounds of calling two engines with the same distribution different). Prints each round's means,
  standard deviations and p-value, then ``agree=yes`` or ``agree=no``.

Both sides save the app's final model and per-round metrics (the app's ``save-to``), which :func:`flower_engine`
returns for the comparison in ``tests/flower/test_flwr_run.py``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "examples" / "flower" / "app"


@dataclass(frozen=True)
class BenchApp:
    """An app the benchmark runs: its folder, package, nodes, the run-config key of its rounds and its scenario."""

    folder: Path
    package: str
    nodes: int
    rounds_key: str
    scenario: Path | None
    saves_model: bool = True
    """Its ``save-to`` is a torch file of the model and the rounds' metrics (the analytics app writes JSON)."""


APPS = {
    "digits": BenchApp(APP, "digits_app", 6, "num-server-rounds", APP / "scenario.yaml"),
    "analytics": BenchApp(ROOT / "examples" / "flower" / "analytics", "digits_analytics", 5, "rounds", None, False),
}
"""``--app``: the example app (FedAvg over a small CNN, a round a train and an evaluation message per node), and the
analytics example (no model: a round two query messages per node, each answered in about a millisecond), where the
cost of a message, not training, is what a round takes."""

_ENGINE = """
import sys
sys.path.insert(0, {app!r})
from flwr.app import Context, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID
from flwr.simulation.run_simulation import _run_simulation
from flwr.supercore.constant import NOOP_FEDERATION_ID
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity
from flwr.supercore.telemetry import EventType
config = {config!r}
run = Run.create_empty(1)
run.override_config, run.primary_task_id, run.federation_id = dict(config), 7, NOOP_FEDERATION_ID
TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = 1, 1, SUPERLINK_NODE_ID
context = Context(run_id=1, node_id=0, node_config={{}}, state=RecordDict(), run_config=dict(config))
_run_simulation(num_supernodes={nodes}, exit_event=EventType.PYTHON_API_RUN_SIMULATION_LEAVE,
                client_app_attr="{package}.client_app:app", server_app_attr="{package}.server_app:app", app_dir={app!r},
                is_app=True, backend_config={{"client_resources": {{"num_cpus": {cpus}, "num_gpus": 0.0}},
                                              "init_args": {{"num_cpus": 2, "address": "local"}}}},
                server_app_context=context, run=run)
"""


def flower_engine(config: dict[str, Any], nodes: int, cpus: int = 1, app: Path = APP,
                  package: str = "digits_app", saves_model: bool = True, pinned: bool = False) -> dict[str, Any]:
    """Run the app with ``config`` (its whole run config, ``save-to`` included) under Flower's simulation engine in
    a fresh process; what its ServerApp saved (empty for an app that saves no model: the analytics app).

    The process computes with torch's own kernels, as Flower's engine does on its own, unless ``pinned``: then with
    the kernels simfl's numerics pinned in this process's environment (:data:`simfl.numerics.PORTABLE_ENV`), so
    that numbers compared with simfl's differ by what the engines do alone, not by the kernels they chose."""
    import torch

    from simfl import numerics

    own = dict(os.environ) if pinned else numerics.unpinned_environment()
    env = {**own, "FLWR_TELEMETRY_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}
    script = _ENGINE.format(app=str(app), config=config, nodes=nodes, cpus=cpus, package=package)
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=1800, env=env,
                              cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"Flower's engine failed:\n{done.stderr[-3000:]}")
    if not saves_model:
        return {}
    return torch.load(config["save-to"])  # type: ignore[no-any-return]


def simfl_flwr_run(out: Path, rounds: int, seeds: int = 1, save_to: Path | None = None,
                   app: BenchApp = APPS["digits"]) -> None:
    """``simfl flwr run`` of the app (the example app: constant latencies, 6 nodes; seeds 0 to ``seeds`` - 1) in a
    fresh process."""
    config = f"{app.rounds_key}={rounds}" + (f" save-to='{save_to}'" if save_to is not None else "")
    scenario = ["--scenario", str(app.scenario)] if app.scenario is not None else []
    subprocess.run([sys.executable, "-m", "simfl", "flwr", "run", str(app.folder), *scenario,
                    "--out", str(out), "--force", "--quiet", "--workers", "1", "--seeds",
                    ",".join(map(str, range(seeds))), "--run-config", config],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def walls(rounds: int, repeat: int, app: BenchApp = APPS["digits"]) -> dict[str, float]:
    """Median wall seconds of each side over ``repeat`` runs of ``rounds`` rounds, the sides alternating."""
    from simfl.launch.flwr_app import read_app

    taken: dict[str, list[float]] = {"simfl": [], "flower": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = {**read_app(app.folder).config, app.rounds_key: rounds, "save-to": str(work / "flower.pt")}
        for _ in range(repeat):
            start = time.perf_counter()
            simfl_flwr_run(work / "out", rounds, save_to=work / "simfl.pt", app=app)
            taken["simfl"].append(time.perf_counter() - start)
            start = time.perf_counter()
            flower_engine(config, app.nodes, app=app.folder, package=app.package, saves_model=app.saves_model)
            taken["flower"].append(time.perf_counter() - start)
    return {side: statistics.median(values) for side, values in taken.items()}


def split(low: int, high: int, repeat: int, app: BenchApp = APPS["digits"]) -> list[str]:
    """Each side's wall at ``low`` and ``high`` rounds (medians, :func:`walls`), and what they give apart: the cost of
    a round, ``(wall(high) - wall(low)) / (high - low)``, and the start, ``wall(low) - low`` rounds of it (imports,
    Ray, the app's own set-up: what does not grow with the rounds). ``name=value`` lines, the ratios last."""
    at = {rounds: walls(rounds, repeat, app) for rounds in (low, high)}
    lines = []
    per: dict[str, float] = {}
    for side in ("simfl", "flower"):
        per[side] = (at[high][side] - at[low][side]) / (high - low)
        lines += [f"{side}_seconds_at_{low}={at[low][side]:.2f}", f"{side}_seconds_at_{high}={at[high][side]:.2f}",
                  f"{side}_start_seconds={at[low][side] - low * per[side]:.2f}", f"{side}_round_seconds={per[side]:.3f}"]
    lines += [f"flower_vs_simfl_at_{low}={at[low]['flower'] / at[low]['simfl']:.2f}",
              f"flower_vs_simfl_at_{high}={at[high]['flower'] / at[high]['simfl']:.2f}",
              f"flower_vs_simfl_per_round={per['flower'] / per['simfl']:.2f}"]
    return lines


def agreement(seeds: int, rounds: int) -> tuple[list[dict[str, float]], bool]:
    """Per round, the server-side accuracy of ``seeds`` runs under each engine (mean, standard deviation) and
    Welch's p-value; whether the engines agree (the module docstring's rule)."""
    import pandas as pd
    from scipy.stats import ttest_ind

    from simfl.launch.flwr_app import read_app

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        simfl_flwr_run(work / "out", rounds, seeds)
        ours = [pd.read_csv(work / "out" / "serverapp" / f"seed{k}" / "server.csv").set_index("round")["accuracy"]
                for k in range(seeds)]
        theirs = []
        for k in range(seeds):
            config = {**read_app(APP).config, "num-server-rounds": rounds, "save-to": str(work / f"flower{k}.pt")}
            saved = flower_engine(config, 6)["server"]
            theirs.append({r: float(m["accuracy"]) for r, m in saved.items()})
    rows = []
    for r in range(1, rounds + 1):
        a, b = [float(s[r]) for s in ours], [t[r] for t in theirs]
        test = ttest_ind(a, b, equal_var=False)
        rows.append({"round": r, "simfl_mean": statistics.mean(a), "simfl_sd": statistics.stdev(a),
                     "flower_mean": statistics.mean(b), "flower_sd": statistics.stdev(b), "p": float(test.pvalue)})
    return rows, all(not (row["p"] < 0.05 / rounds) for row in rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="num-server-rounds of each run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (medians)")
    parser.add_argument("--app", choices=sorted(APPS), default="digits", help="the app to run (default digits)")
    parser.add_argument("--split", default=None, metavar="A,B",
                        help="wall times at A and at B rounds in this one run: each side's start and per-round cost")
    parser.add_argument("--agreement", type=int, default=0, metavar="N",
                        help="compare the accuracy of N seeds under each engine instead of the wall time")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(APPS[args.app].folder))
    print(f"app={args.app} rounds={args.rounds}")
    if args.agreement:
        rows, agree = agreement(args.agreement, args.rounds)
        for row in rows:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
        print(f"agree={'yes' if agree else 'no'}")
        return
    if args.split:
        low, high = sorted(int(r) for r in args.split.split(","))
        for line in split(low, high, args.repeat, APPS[args.app]):
            print(line)
        return
    taken = walls(args.rounds, args.repeat, APPS[args.app])
    print(f"simfl_flwr_run_seconds={taken['simfl']:.2f}")
    print(f"flower_engine_seconds={taken['flower']:.2f}")
    print(f"flower_vs_simfl={taken['flower'] / taken['simfl']:.2f}")


if __name__ == "__main__":
    main()
