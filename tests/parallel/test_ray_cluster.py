"""Units on a Ray cluster of three nodes on this machine whose workers cannot see the output folder.

The head node has no CPU, so every unit runs on one of two worker nodes. Each worker node is
started by ``ray start`` in its own mount namespace, where a tmpfs hides the folder the
launching process writes into, and with a data folder that lacks the dataset: the results
and checkpoints must travel back to the launching process, and MNIST (small generated idx
files in the launching process's data folder, which lies in the hidden folder too) must reach
the nodes through Ray's object store.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from simfl.cli import main
from tests.conftest import tiny_scenario
from tests.data.helpers import write_mnist
from tests.parallel.test_units import result_files

ray = pytest.importorskip("ray", reason="the ray extra is not installed")
pytestmark = pytest.mark.data  # reads the data folder or ../shared: also run without them (.ci/run)
ROOT = Path(__file__).resolve().parents[2]
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _node(args: list[str], env: dict[str, str], hide: Path | None = None) -> subprocess.Popen[bytes]:
    """``ray start ... --block`` in its own process group; with ``hide``, in a mount namespace where a
    tmpfs covers that folder."""
    command = [RAY, "start", *args, "--block", "--disable-usage-stats"]
    if hide is not None:
        script = f"mount -t tmpfs simfl-hidden {hide} && exec {' '.join(command)}"
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


DRIVER = """
import json, os, sys, time
import ray
from simfl.cli import main
from simfl.data.files import data_root

address, hidden = sys.argv[1], sys.argv[2]
ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
deadline = time.monotonic() + 120
while ray.cluster_resources().get("CPU", 0) < 2:
    assert time.monotonic() < deadline, "the worker nodes did not join"
    time.sleep(0.2)

@ray.remote(num_cpus=1)
def probe(path):
    return {"sees_output": os.path.exists(os.path.join(path, "sentinel")),
            "has_mnist": any(data_root(None).glob("**/*-idx3-ubyte*")), "node": ray.get_runtime_context().get_node_id()}

from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
workers = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0]
# two probes pinned to each worker node: left to Ray, one node could take all of them before the other's first
# worker process started (a loaded machine)
seen = ray.get([probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote(hidden)
                for node in workers for _ in range(2)])
print(json.dumps(seen), flush=True)
code = main(sys.argv[3:])
assert ray.is_initialized()  # the launch used this process's connection and left it open
ray.shutdown()
sys.exit(code)
"""
"""The launching process: Ray reads its token when it is imported, so it runs apart from the test process."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[str, Path, dict[str, str]]]:
    """A head (no CPU) and two one-CPU worker nodes on the loopback address, with one token for the cluster
    (Ray's token authentication); yields the address, the folder the workers cannot see and the environment
    that reaches the cluster."""
    hidden = tmp_path / "driver"
    hidden.mkdir()
    (hidden / "sentinel").write_text("only the launching machine sees this")
    no_data = tmp_path / "empty-data"
    no_data.mkdir()
    temps = [Path(tempfile.mkdtemp(prefix="r", dir="/tmp")) for _ in range(3)]  # short: Ray's socket paths
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(16)}
    env.pop("SIMFL_WORKERS", None)
    address = f"127.0.0.1:{port}"
    nodes = [_node(["--head", f"--port={port}", "--num-cpus=0", "--include-dashboard=false",
                    "--node-ip-address=127.0.0.1", f"--temp-dir={temps[0]}"], env)]
    try:
        deadline = time.monotonic() + 60
        while True:  # the head is up once its port answers
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert time.monotonic() < deadline and nodes[0].poll() is None, "the head node did not start"
            time.sleep(0.2)
        worker_env = {**env, "SIMFL_DATA": str(no_data)}
        nodes += [_node([f"--address={address}", "--num-cpus=1", "--node-ip-address=127.0.0.1", f"--temp-dir={t}"],
                        worker_env, hidden)
                  for t in temps[1:]]
        yield address, hidden, env
    finally:
        for node in reversed(nodes):
            if node.poll() is None:
                os.killpg(node.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5  # one grace period for all nodes, then they are killed
        for node in nodes:
            try:
                node.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
                node.wait()
        for temp in temps:
            shutil.rmtree(temp, ignore_errors=True)


def test_units_on_a_cluster_without_shared_files_equal_a_local_run(
        cluster: tuple[str, Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address, hidden, env = cluster
    data = hidden / "data"  # the launching machine's data folder, which the worker nodes cannot see
    write_mnist(data / "mnist", n_train=450, n_test=50)  # 45 images of each digit: the counts below take them all
    monkeypatch.setenv("SIMFL_DATA", str(data))
    raw = tiny_scenario(
        seeds=[0, 1],
        data={"dataset": "mnist", "partition": {"kind": "counts", "counts": [[20] * 10, [15] * 10, [10] * 10]}},
        model={"name": "mlp", "hidden": [16]},
        budget={"time": 12.0},
        algorithms=[{"name": "fedasync", "alpha": 0.6}, {"name": "fedbuff", "buffer": 2}],
    )
    scn = tmp_path / "s.yaml"
    scn.write_text(yaml.safe_dump(raw))
    local = tmp_path / "local"
    assert main(["run", str(scn), "--out", str(local), "--quiet", "--workers", "1"]) == 0

    out = hidden / "out"
    proc = subprocess.run([sys.executable, "-c", DRIVER, address, str(hidden), "run", str(scn), "--out", str(out),
                           "--ray", address, "--checkpoint-every", "4"], env={**env, "SIMFL_DATA": str(data)}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.splitlines()[0])
    # the tasks ran on the two worker nodes, which see neither the output folder nor MNIST ...
    assert len({s["node"] for s in seen}) == 2
    assert not any(s["sees_output"] for s in seen) and not any(s["has_mnist"] for s in seen), seen
    assert (hidden / "sentinel").is_file()  # ... which this machine's own namespace has
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("[")]
    assert len(lines) == 4  # a line per unit, as they came back
    assert result_files(out) == result_files(local)


def test_a_tune_on_the_cluster_asks_and_scores_the_trials_of_one_worker(
        cluster: tuple[str, Path, dict[str, str]], tmp_path: Path) -> None:
    # the trials run on the worker nodes, which cannot see the tune's folder (its optuna.db stays with the
    # launching process): the same trials, scores and best configuration as one worker here
    from simfl.launch.tune import BEST_FILE, TRIALS_FILE
    from tests.tune.test_tune import _ranged

    address, hidden, env = cluster
    scn = tmp_path / "tune.yaml"
    scn.write_text(yaml.safe_dump(_ranged(4)))
    local = tmp_path / "local"
    assert main(["tune", str(scn), "--out", str(local), "--quiet", "--workers", "1"]) == 0
    out = hidden / "tuned"
    proc = subprocess.run([sys.executable, "-c", DRIVER, address, str(hidden), "tune", str(scn), "--out", str(out),
                           "--ray", address, "--quiet"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len({s["node"] for s in json.loads(proc.stdout.splitlines()[0])}) == 2
    assert (out / TRIALS_FILE).read_bytes() == (local / TRIALS_FILE).read_bytes()
    assert (out / BEST_FILE).read_bytes() == (local / BEST_FILE).read_bytes()
    assert len((out / TRIALS_FILE).read_text().splitlines()) == 5  # a header and the four trials
