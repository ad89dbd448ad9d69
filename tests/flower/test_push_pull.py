"""A ServerApp's push/pull messaging in virtual time: pushes without waiting, a node's messages first come, first
served (each its own latency draw), pulls of what has arrived by now, send_and_receive's timeout in virtual time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

pytest.importorskip("flwr")

import simfl  # noqa: E402
from tests.flower.test_flower import scenario  # noqa: E402

CONSTANT = {"model": "constant", "seconds": [10.0, 10.0, 10.0, 12.0, 14.0, 20.0]}
"""Six nodes; every message to node m takes its constant latency (the k-th message its k-th draw, all equal)."""


def run(tmp_path: Path, app: str, out: str = "o", **config: Any) -> tuple[dict[str, Any], Path]:
    """Run ``app`` over the ClientApp that answers every message type; what the app recorded, and its folder."""
    record = tmp_path / f"{out}.json"
    changes = config.pop("changes", {})
    raw = scenario([{"name": "serverapp", "app": f"tests.flower.server_apps:{app}",
                     "run_config": {"record": str(record), **config}}],
                   client={"flower_app": "tests.flower.apps:every_type_app"},
                   model={"name": "flower_app", "app": f"tests.flower.server_apps:{app}"},
                   latency=CONSTANT, **changes)
    simfl.run(raw, out=tmp_path / out, allow_imports=True, workers=1, quiet=True)
    return json.loads(record.read_text()), tmp_path / out / "serverapp" / "seed0"


def test_two_pushes_to_each_node_come_back_one_pull_at_a_time_in_virtual_time_order(tmp_path: Path) -> None:
    """At 0 the app pushes a query to each node (ids 1-6), then a second to each (7-12), and pulls in a loop.
    Each node works its two in order, each taking its latency: node m's first reply at L_m, its second at 2 L_m:
      10: ids 1, 2, 3 | 12: 4 | 14: 5 | 20: 6 (node 6's first, sent at 0), 7, 8, 9 (nodes 1-3's second, sent at 10)
      | 24: 10 | 28: 11 | 40: 12.
    A pull with nothing arrived waits until the next reply arrives, and returns every reply in by then (not the
    ones still to come): seven pulls, whatever the loop sleeps. At 20, node 6's reply (dispatched at 0) comes before
    nodes 1-3's second ones (dispatched at 10). Once every reply is taken, a pull returns nothing without waiting."""
    seen, folder = run(tmp_path, "pushing_app")
    assert seen["first"] == [str(i) for i in range(1, 7)] and seen["second"] == [str(i) for i in range(7, 13)]
    assert seen["pulls"] == [["1", "2", "3"], ["4"], ["5"], ["6", "7", "8", "9"], ["10"], ["11"], ["12"]]
    assert seen["after"] == 0
    events = pd.read_csv(folder / "events.csv")
    assert list(events["time"]) == [10.0, 10.0, 10.0, 12.0, 14.0, 20.0, 20.0, 20.0, 20.0, 24.0, 28.0, 40.0]
    assert list(events["client"]) == [0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5]
    assert list(events["dispatch_time"]) == [0.0] * 6 + [10.0, 10.0, 10.0, 12.0, 14.0, 20.0]  # queued behind the first
    assert list(events["event"]) == ["arrival"] * 12
    assert pd.read_csv(folder / "metrics.csv")["virtual_time"].iloc[-1] == 40.0  # main returned at the last pull


def test_a_timeout_drops_a_late_nodes_reply_in_virtual_time(tmp_path: Path) -> None:
    """send_and_receive(timeout=15) at 0: nodes 1-5 reply by 14, node 6's reply (20) is late: the call returns at 15
    with five replies. Node 6 is still working on its dropped message, so the grid lists nodes 1-5 only; their next
    call (no timeout) closes at 15 + 14 = 29. Node 6's reply, at 20, is a ``late`` row, thrown away."""
    seen, folder = run(tmp_path, "timeout_app", timeout=15)
    assert seen == {"early": [1, 2, 3, 4, 5], "listed": [1, 2, 3, 4, 5], "later": [1, 2, 3, 4, 5]}
    events = pd.read_csv(folder / "events.csv")
    assert list(events["event"]) == ["arrival"] * 5 + ["late"] + ["arrival"] * 5
    late = events[events["event"] == "late"].iloc[0]
    assert (late["time"], late["client"]) == (20.0, 5)
    assert list(events[events["dispatch_time"] == 15.0]["time"]) == [25.0, 25.0, 25.0, 27.0, 29.0]


def test_a_timeout_longer_than_the_slowest_node_drops_nothing(tmp_path: Path) -> None:
    """timeout=20 and the slowest reply at 20: a reply at the timeout's instant is in time."""
    seen, folder = run(tmp_path, "timeout_app", timeout=20)
    assert seen["early"] == [1, 2, 3, 4, 5, 6] and seen["listed"] == [1, 2, 3, 4, 5, 6]
    assert "late" not in set(pd.read_csv(folder / "events.csv")["event"])


def test_a_vertical_apps_pushed_gradients_queue_before_the_next_query(tmp_path: Path) -> None:
    """Round 1: queries at 0, replies at L_m, the round closes at 20, when the app pushes each node its gradient and
    sends round 2's queries at once. Node m works its gradient (20 to 20 + L_m), then its query (to 20 + 2 L_m):
    round 2's replies at 40, 40, 40, 44, 48, 60, in that order; the gradients' replies (at 30, 30, 30, 32, 34, 40)
    stay unpulled. At 40 node 6's gradient reply (sent at 20) comes before nodes 1-3's queries (sent at 30)."""
    seen, folder = run(tmp_path, "vertical_app", rounds=2)
    assert seen["rounds"] == [[1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6]]
    events = pd.read_csv(folder / "events.csv")
    second = events.iloc[6:]
    assert list(second["time"]) == [30.0, 30.0, 30.0, 32.0, 34.0, 40.0, 40.0, 40.0, 40.0, 44.0, 48.0, 60.0]
    assert list(second["dispatch_time"]) == [20.0] * 6 + [30.0, 30.0, 30.0, 32.0, 34.0, 40.0]


def test_the_same_seed_gives_the_same_files(tmp_path: Path) -> None:
    """The pushing app twice, and with its ClientApp calls on two worker processes: the same files byte for byte."""
    _, once = run(tmp_path, "pushing_app", "once")
    _, twice = run(tmp_path, "pushing_app", "twice")
    _, apart = run(tmp_path, "pushing_app", "apart",
                   changes={"executor": {"kind": "process", "workers": 2, "threads": 1}})
    names = sorted(p.name for p in once.glob("*.csv"))
    assert "events.csv" in names and "metrics.csv" in names
    for other in (twice, apart):
        for name in names:
            assert (other / name).read_bytes() == (once / name).read_bytes(), (other, name)
