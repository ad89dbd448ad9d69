"""Flower's legacy server (``ServerApp(server_fn=...)``: a Server, a legacy Strategy, its own thread pool) as written,
in virtual time, reproducibly; and the thread warning only where a thread can change numbers."""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("flwr")

from simfl.algorithms import legacy_server  # noqa: E402
from tests.flower.test_flwr_run import flwr  # noqa: E402

SCENARIO = """\
data: {dataset: digits, partition: {kind: dirichlet, clients: 6, alpha: 0.5}}
latency: {model: constant, seconds: [10, 10, 10, 12, 14, 20]}
eval: {every: 20}
"""
"""Six clients on the digits, each round trip of a client its constant latency."""


def legacy_folder(folder: Path, rounds: int = 3) -> Path:
    """A Flower App folder whose ServerApp is the legacy ``server_fn`` app and whose ClientApp a legacy NumPyClient."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pyproject.toml").write_text(
        '[project]\nname = "legacy"\nversion = "1.0.0"\n\n[tool.flwr.app.components]\n'
        'serverapp = "tests.flower.server_apps:legacy_app"\nclientapp = "tests.flower.server_apps:legacy_client_app"\n\n'
        f'[tool.flwr.app.config]\nnum-server-rounds = {rounds}\nlocal-epochs = 1\nbatch-size = 16\n'
        'min-available = 4\norder-to = ""\n\n'
        '[tool.flwr.federations]\ndefault = "local"\n\n[tool.flwr.federations.local]\noptions.num-supernodes = 6\n')
    (folder / "scenario.yaml").write_text(SCENARIO)
    return folder


def rounds_of(events: pd.DataFrame) -> list[pd.DataFrame]:
    """The events of each round (its dispatch time), in the order the rounds opened."""
    return [group for _, group in events.groupby("dispatch_time", sort=True)]


def test_a_legacy_server_fn_app_runs_as_written_and_is_recorded(tmp_path: Path) -> None:
    """Flower's default Server with a legacy FedAvg (evaluate_fn, on_fit_config_fn, fraction_fit 0.3 and
    min_fit_clients 3, fraction_evaluate 0.5) runs its fit and evaluate rounds through its own thread pool.

    Rounds: fit samples max(int(6 * 0.3), 3) = 3 nodes, evaluate max(int(6 * 0.5), 2) = 3; three rounds of both are
    6 rounds of 3 messages, 18 events, each round closing at the slowest of its 3 (constant latencies), the next
    opening then. The server-side evaluate_fn gives server.csv (rounds 0 to 3), its round 0 is the initial model's
    score on the digits (computed here again), simfl's evaluation grid (metrics.csv) is that evaluate_fn scoring the
    model the app sent last (its last row the final model: server.csv's round 3); each fit round's results reach
    aggregate_fit in the order their replies arrived (events.csv's order), not the order of Flower's set of futures."""
    from tests.flower.server_apps import digits_scores, initial_model

    app = legacy_folder(tmp_path / "app")
    order = tmp_path / "order.txt"
    done = flwr(str(app), "--scenario", str(app / "scenario.yaml"), "--out", str(tmp_path / "o"), "--workers", "1",
                "--run-config", f"order-to='{order}'")
    assert done.returncode == 0, done.stderr
    assert "from a thread of its own" not in done.stderr and "left the thread" not in done.stderr
    said = done.stderr.splitlines()
    assert sum("configure_fit: strategy sampled 3 clients (out of 6)" in line for line in said) == 3, done.stderr
    assert sum("configure_evaluate: strategy sampled 3 clients (out of 6)" in line for line in said) == 3
    assert any(line.startswith("serverapp seed0: [0 s] INFO :      [ROUND 1]") for line in said), done.stderr
    folder = tmp_path / "o" / "serverapp" / "seed0"
    events = pd.read_csv(folder / "events.csv")
    rounds = rounds_of(events)
    assert len(events) == 18 and [len(r) for r in rounds] == [3] * 6
    opened = 0.0
    for group in rounds:  # each round opens when the one before closed, and closes at its slowest
        assert set(group["dispatch_time"]) == {opened}
        opened = opened + group["latency"].max()
        assert group["time"].max() == opened
    loss0, accuracy0 = digits_scores(initial_model())
    server = pd.read_csv(folder / "server.csv")
    assert list(server["round"]) == [0, 1, 2, 3]
    assert server["accuracy"].iloc[0] == pytest.approx(accuracy0, abs=1e-12)
    assert server["loss"].iloc[0] == pytest.approx(loss0, rel=1e-6)
    metrics = pd.read_csv(folder / "metrics.csv")
    assert metrics["accuracy"].iloc[0] == server["accuracy"].iloc[0]
    assert metrics["virtual_time"].iloc[-1] == opened and metrics["accuracy"].iloc[-1] == server["accuracy"].iloc[-1]
    assert set(metrics["accuracy"]) <= set(server["accuracy"])  # the models the app sent, scored by its evaluate_fn
    train = pd.read_csv(folder / "train.csv")
    assert list(train["round"]) == [1, 2, 3] and list(train["server-round"]) == [1.0, 2.0, 3.0]  # on_fit_config_fn
    federated = pd.read_csv(folder / "federated.csv")
    assert list(federated["round"]) == [1, 2, 3] and federated["accuracy"].between(0, 1).all()
    read = [line.split() for line in order.read_text().splitlines()]
    arrived = [[str(c + 1) for c in group["client"]] for group in rounds[0::2]]  # events.csv: in arrival order
    assert read == arrived


def test_a_legacy_app_gives_the_same_files_every_time(tmp_path: Path) -> None:
    """Two runs of the legacy app with the same seed, and one with its ClientApp calls on two worker processes: the
    same files byte for byte, though Flower's pool threads run in whatever order the machine gives them."""
    app = legacy_folder(tmp_path / "app", rounds=2)
    for out, extra in (("once", []), ("twice", []), ("apart", ["--set", "executor={kind: process, workers: 2, threads: 1}"])):
        done = flwr(str(app), "--scenario", str(app / "scenario.yaml"), "--out", str(tmp_path / out), "--workers", "1",
                    "--quiet", *extra)
        assert done.returncode == 0, done.stderr
    files = sorted(p.relative_to(tmp_path / "once") for p in (tmp_path / "once" / "serverapp").rglob("*.csv"))
    assert {p.name for p in files} == {"metrics.csv", "events.csv", "train.csv", "federated.csv", "server.csv"}
    for out in ("twice", "apart"):
        for name in files:
            assert (tmp_path / out / name).read_bytes() == (tmp_path / "once" / name).read_bytes(), (out, name)


def test_a_legacy_app_waiting_for_more_nodes_than_the_federation_is_one_line(tmp_path: Path) -> None:
    """min_available_clients 7 of 6: the legacy client manager's wait is a wait in virtual time, which no client
    ends: one line, exit 2."""
    app = legacy_folder(tmp_path / "app", rounds=1)
    done = flwr(str(app), "--scenario", str(app / "scenario.yaml"), "--out", str(tmp_path / "o"), "--workers", "1",
                "--quiet", "--run-config", "min-available=7")
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "while all 6 clients were free: it waits for more nodes than the federation has" in lines[0]


def test_a_pool_width_the_app_sets_sends_a_round_in_batches(tmp_path: Path) -> None:
    """A Server of the app's own with set_max_workers(2): a round of 3 sampled nodes goes as 2 messages, then 1 once
    those replied (Flower's pool runs 2 at a time): one server round of fit and evaluate is 4 batches of 2, 1, 2, 1,
    each opening when the one before closed."""
    import simfl
    from tests.flower.test_flower import RUN_CONFIG, scenario

    raw = scenario([{"name": "serverapp", "app": "tests.flower.server_apps:narrow_app",
                     "run_config": {"num-server-rounds": 1, "min-available": 4}}],
                   client={"flower_app": "tests.flower.server_apps:legacy_client_app", "run_config": RUN_CONFIG},
                   latency={"model": "constant", "seconds": [10.0, 10.0, 10.0, 12.0, 14.0, 20.0]},
                   model={"name": "flower_app", "app": "tests.flower.server_apps:narrow_app"})
    simfl.run(raw, out=tmp_path / "o", allow_imports=True, workers=1, quiet=True)
    rounds = rounds_of(pd.read_csv(tmp_path / "o" / "serverapp" / "seed0" / "events.csv"))
    assert [len(r) for r in rounds] == [2, 1, 2, 1]
    opened = 0.0
    for group in rounds:
        assert set(group["dispatch_time"]) == {opened}
        opened += group["latency"].max()


def test_results_are_read_in_arrival_order() -> None:
    """in_arrival_order sorts a strategy's results by the arrival rank of their nodes (nodes 3, 1, 2 arrived in that
    order: ranks 0, 1, 2), failures' replies the same way and their exceptions after them by text."""
    import sys

    class Proxy:
        def __init__(self, node: int) -> None:
            self.node_id, self.cid = node, str(node)

    def aggregate(results: list[object], failures: list[object]) -> None:
        legacy_server.in_arrival_order(sys._getframe(), {3: 0, 1: 1, 2: 2})

    results = [(Proxy(1), "a"), (Proxy(2), "b"), (Proxy(3), "c")]
    failures: list[object] = [ValueError("z"), (Proxy(2), "x"), ValueError("y"), (Proxy(3), "w")]
    aggregate(results, failures)
    assert [p.node_id for p, _ in results] == [3, 1, 2]  # type: ignore[attr-defined]
    assert [f if isinstance(f, tuple) else str(f) for f in failures][2:] == ["y", "z"]
    assert [f[0].node_id for f in failures[:2]] == [3, 2]  # type: ignore[index]


# -- the thread warning ---------------------------------------------------------------------------------------------


def test_a_tqdm_monitor_is_no_warning_and_a_users_thread_left_running_is(capfd: pytest.CaptureFixture[str]) -> None:
    """tqdm's monitor thread (its TMonitor, started by the first bar: it only refreshes bars) changes no number: no
    warning; a thread of the user's own left running still gets one."""
    from tqdm import tqdm
    from tqdm._monitor import TMonitor

    from simfl.train.flower import left_running

    # an earlier test in this process may have started tqdm's one monitor already: it counts as started here
    before = {t for t in threading.enumerate() if not isinstance(t, TMonitor)}
    monitor_interval, tqdm.monitor_interval = tqdm.monitor_interval, 10
    try:
        for _ in tqdm(range(2), file=io.StringIO()):
            pass
        assert any(isinstance(t, TMonitor) and t not in before for t in threading.enumerate())
        left_running(before, "client", "the ClientApp with a bar")
        assert "left the thread" not in capfd.readouterr().err
        stop = threading.Event()
        mine = threading.Thread(target=stop.wait, name="tqdm_monitor_of_mine", daemon=True)  # a name is not what it is
        mine.start()
        left_running(before, "client", "the ClientApp with a thread")
        stop.set()
        err = capfd.readouterr().err
        assert "the ClientApp with a thread left the thread 'tqdm_monitor_of_mine' running" in err
    finally:
        tqdm.monitor_interval = monitor_interval
        if tqdm.monitor is not None:
            tqdm.monitor.exit()
            tqdm.monitor = None
