"""A Flower App under ``simfl flwr run`` and under Flower's own simulation engine: wall seconds of each.

The app is ``examples/flower/app`` (a quickstart-style ServerApp with FedAvg and a server-side
evaluation, a ClientApp loading and partitioning scikit-learn's digits itself), 6 nodes, one CPU (one
torch thread) per ClientApp on both sides. Flower's engine is run as ``flwr run``'s simulation process runs
it (``flwr.simulation.run_simulation._run_simulation`` with the app folder, its Ray backend), in a fresh
process; ``simfl flwr run`` too, with one worker. Each side's wall time includes its start (imports, Ray),
medians of ``--repeat`` runs, the sides alternating. Both save the app's final model and per-round metrics
(the app's ``save-to``), which :func:`flower_engine` returns for the comparison in
``tests/flower/test_flwr_run.py``. Prints ``name=value`` lines, the last ``flower_vs_simfl`` (Flower's wall
time over simfl's).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "examples" / "flower" / "app"

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
                client_app_attr="digits_app.client_app:app", server_app_attr="digits_app.server_app:app", app_dir={app!r},
                is_app=True, backend_config={{"client_resources": {{"num_cpus": {cpus}, "num_gpus": 0.0}},
                                              "init_args": {{"num_cpus": 2, "address": "local"}}}},
                server_app_context=context, run=run)
"""


def flower_engine(config: dict[str, Any], nodes: int, cpus: int = 1, app: Path = APP) -> dict[str, Any]:
    """Run the app with ``config`` (its whole run config, ``save-to`` included) under Flower's simulation engine in
    a fresh process; what its ServerApp saved."""
    import torch

    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "RAY_DEDUP_LOGS": "0"}
    script = _ENGINE.format(app=str(app), config=config, nodes=nodes, cpus=cpus)
    with tempfile.TemporaryDirectory() as work:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, env=env,
                              cwd=work)
    if done.returncode != 0:
        raise RuntimeError(f"Flower's engine failed:\n{done.stderr[-3000:]}")
    return torch.load(config["save-to"])  # type: ignore[no-any-return]


def simfl_flwr_run(out: Path, save_to: Path, rounds: int) -> None:
    """``simfl flwr run`` of the app (constant latencies, 6 nodes, one worker) in a fresh process."""
    subprocess.run([sys.executable, "-m", "simfl", "flwr", "run", str(APP), "--scenario", str(APP / "scenario.yaml"),
                    "--out", str(out), "--force", "--quiet", "--workers", "1", "--run-config",
                    f"save-to='{save_to}' num-server-rounds={rounds}"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="num-server-rounds of each run")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side (medians)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(APP))
    from simfl.launch.flwr_app import read_app

    walls: dict[str, list[float]] = {"simfl": [], "flower": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        config = {**read_app(APP).config, "num-server-rounds": args.rounds, "save-to": str(work / "flower.pt")}
        for _ in range(args.repeat):
            start = time.perf_counter()
            simfl_flwr_run(work / "out", work / "simfl.pt", args.rounds)
            walls["simfl"].append(time.perf_counter() - start)
            start = time.perf_counter()
            flower_engine(config, 6)
            walls["flower"].append(time.perf_counter() - start)
    simfl_s, flower_s = statistics.median(walls["simfl"]), statistics.median(walls["flower"])
    print(f"rounds={args.rounds}")
    print(f"simfl_flwr_run_seconds={simfl_s:.2f}")
    print(f"flower_engine_seconds={flower_s:.2f}")
    print(f"flower_vs_simfl={flower_s / simfl_s:.2f}")


if __name__ == "__main__":
    main()
