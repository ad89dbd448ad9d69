"""``simfl flwr run APP_DIR --compare RULES``: simfl's rules over the app's ClientApp beside its own ServerApp.

The app is ``examples/flower/app`` (the other Flower tests' app): Flower's FedAvg over 6 nodes, 3 rounds, a
server-side ``evaluate_fn`` (the app's own evaluation, which also scores simfl's rules over its model); its
``scenario.yaml`` gives constant latencies 10, 10, 10, 12, 14 and 20 s and the grid every 20 s. Worked out by hand:

- the ServerApp: each FedAvg round waits for its slowest node, 20 s, so its 3 rounds end at 60 s, 18 updates; its
  entry says ``budget_updates: false``, so the update budget of the rules below does not cut its last round;
- FedBuff (buffer 3) over the same ClientApp runs the app's rounds as client updates, R * K = 3 rounds * 6 nodes
  = 18 (no synchronous rule beside it, so K is every node: ``budget.updates`` 18). Each node starts its next round
  as it delivers, so node m delivers at multiples of its latency: nodes 0-2 at 10, 20, 30, 40 s, node 3 at 12, 24,
  36 s, node 4 at 14, 28 s, node 5 at 20, 40 s. By 20 s: 2 + 2 + 2 + 1 + 1 + 1 = 9 updates; by 30 s: 3 * 3 + 2 + 2
  + 1 = 14; node 3 at 36 s makes 15; at 40 s nodes 5, 0, 1 and 2 deliver, in the order their rounds began (node 5's
  at 20 s, the others' at 30 s), so the 18th update is node 1's at 40 s and the run ends there: grid rows at 0, 20
  and 40 s with 0, 9 and 18 updates.
- the comparison reads the final accuracies at the horizon, the latest time every run reached: min(60, 40) = 40 s.
"""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytest.importorskip("flwr")

from simfl.cli import main  # noqa: E402
from simfl.errors import InputError  # noqa: E402
from simfl.names import allowing_imports  # noqa: E402
from simfl.schema.scenario import validate  # noqa: E402

APP = Path(__file__).parents[2] / "examples" / "flower" / "app"


def flwr(*argv: str, app: Path = APP) -> subprocess.CompletedProcess[str]:
    """``simfl flwr run`` on the example app (with its scenario) through the command's entry in this process; exit
    code and output."""
    out, err = io.StringIO(), io.StringIO()
    scenario = ["--scenario", str(APP / "scenario.yaml")] if app == APP else []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["flwr", "run", str(app), *scenario, *argv])
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_compare_runs_the_serverapp_and_the_rule_and_prints_the_verdict(tmp_path: Path) -> None:
    """``--compare '[{name: fedbuff, buffer: 3}]'``: one folder, the ServerApp the baseline and first, FedBuff over the
    same nodes and latencies; the numbers of the module docstring; the same files with 1 and 2 workers."""
    rules = "[{name: fedbuff, buffer: 3}]"
    done = {}
    for workers in (1, 2):
        out = tmp_path / f"w{workers}"
        done[workers] = flwr("--compare", rules, "--out", str(out), "--quiet", "--workers", str(workers))
        assert done[workers].returncode == 0, done[workers].stderr
    out = tmp_path / "w1"
    verdicts = [line for line in done[1].stdout.splitlines() if line.startswith("verdict: ")]
    assert len(verdicts) == 1 and "serverapp" in verdicts[0] and "fedbuff" in verdicts[0]
    comparison = pd.read_csv(out / "comparison.csv")
    assert list(comparison["entry"]) == ["serverapp", "fedbuff"]
    assert set(comparison["baseline"]) == {"serverapp"} and set(comparison["horizon"]) == {40.0}
    assert "fedbuff" in (out / "comparison.md").read_text()
    saved = yaml.safe_load((out / "scenario.yaml").read_text())
    assert [a["name"] for a in saved["algorithms"]] == ["serverapp", "fedbuff"]
    assert saved["algorithms"][0]["budget_updates"] is False and saved["budget"]["updates"] == 18
    assert saved["eval"]["baseline"] == "serverapp"

    server = pd.read_csv(out / "serverapp" / "seed0" / "metrics.csv")
    assert list(server["virtual_time"]) == [0.0, 20.0, 40.0, 60.0] and list(server["updates"]) == [0, 6, 12, 18]
    # its third round aggregated (the update budget of 18 would stop it before: its last row would repeat the 40 s
    # model's): the last row is the app's evaluate_fn of its final arrays, server.csv's round 3
    rounds = pd.read_csv(out / "serverapp" / "seed0" / "server.csv")
    assert list(rounds["round"]) == [0, 1, 2, 3] and server["accuracy"].iloc[-1] == rounds["accuracy"].iloc[-1]
    assert server["accuracy"].iloc[-1] != server["accuracy"].iloc[-2]
    with pytest.raises(InputError, match=r"algorithms\[0\] \(serverapp\) has budget_updates: false, so budget.updates "
                       "does not stop its runs; set budget.time too"), allowing_imports(True):
        validate({**saved, "budget": {"updates": 18}})
    events = pd.read_csv(out / "fedbuff" / "seed0" / "events.csv")
    assert list(events["event"]) == ["arrival"] * 18
    assert [(events["time"] <= t).sum() for t in (20.0, 30.0, 36.0)] == [9, 14, 15]
    assert list(events[["time", "client"]].itertuples(index=False, name=None))[-3:] == [(40.0, 5), (40.0, 0), (40.0, 1)]
    metrics = pd.read_csv(out / "fedbuff" / "seed0" / "metrics.csv")
    assert list(metrics["virtual_time"]) == [0.0, 20.0, 40.0] and list(metrics["updates"]) == [0, 9, 18]
    # scored by the app's own evaluation (its evaluate_fn): the initial model the same as the ServerApp's round 0
    assert metrics["accuracy"].notna().all() and metrics["accuracy"].iloc[0] == server["accuracy"].iloc[0]
    assert metrics["accuracy"].iloc[-1] > metrics["accuracy"].iloc[0]
    assert comparison.set_index("entry")["final_accuracy"]["fedbuff"] == metrics["accuracy"].iloc[-1]

    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file() and p.suffix in (".csv", ".md", ".yaml"))
    assert {p.name for p in files} >= {"metrics.csv", "events.csv", "comparison.csv", "comparison.md", "scenario.yaml"}
    for name in files:
        mine, theirs = (out / name).read_text(), (tmp_path / "w2" / name).read_text()
        if name.name == "summary.csv":  # its wall_seconds aside
            mine, theirs = _without_wall(mine), _without_wall(theirs)
        assert mine == theirs, name


def _without_wall(text: str) -> str:
    """summary.csv without its column of wall-clock seconds."""
    return pd.read_csv(io.StringIO(text)).drop(columns=["wall_seconds"]).to_csv(index=False)


@pytest.mark.parametrize(("rules", "words"), [
    ("fedbuff,nosuchrule", "--compare: no rule named 'nosuchrule'; simfl's rules: orthofl, "),
    ("port", "--compare: port: cannot run over this app: port recalls stale clients"),
    ("scaffold", "--compare: scaffold: cannot run over this app: scaffold changes simfl's own local training (its hook "
     "control_variate)"),
    ("moon", "--compare: moon: cannot run over this app: moon changes simfl's own local training (its hook contrastive)"),
    ("fedavg", "--compare: fedavg: cannot run over this app: clients_per_round: must be at most the 6 clients, got 10; "
     "options go in the YAML form"),
    ("serverapp", "--compare: serverapp is the app's own ServerApp"),
    ("fedbuff,fedbuff", "--compare: names fedbuff twice"),
    ("fedbuff --set algorithms=[{name:fedasync}]", "--compare: names the entries itself"),
])
def test_a_rule_that_cannot_run_is_one_line_exit_2_and_nothing_written(tmp_path: Path, rules: str, words: str) -> None:
    done = flwr("--compare", *rules.split(" "), "--out", str(tmp_path / "o"))
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simfl: ") and words in lines[0], done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_app_that_exchanges_no_model_is_refused_for_every_rule(tmp_path: Path) -> None:
    """examples/flower/analytics sends query messages with a config only: its first train message (none) carries no
    model for simfl's rules, found by starting its main once, before any folder is made."""
    done = flwr("--compare", "fedbuff,orthofl", "--set", "budget.time=100", "--out", str(tmp_path / "o"),
                app=APP.parent / "analytics")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simfl: --compare: fedbuff, orthofl: cannot run over this app: "), \
        done.stderr
    assert "this app exchanges no model" in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("entry", "refused"), [
    ({"name": "fedprox", "clients_per_round": 6, "mu": 0.1}, None),  # its term reaches the app as proximal-mu
    ({"name": "moon", "clients_per_round": 6, "mu": 0.0}, None),  # mu 0 sends no hook: FedAvg
    ({"name": "moon", "clients_per_round": 6}, "contrastive"),
    ({"name": "feddyn", "clients_per_round": 6}, "linear_term"),  # its prox_mu would pass; its linear term cannot
    ({"name": "fedac"}, "control_variate"),
])
def test_a_clientapp_takes_only_fedproxs_hook(entry: dict[str, object], refused: str | None) -> None:
    """Validation under client.flower_app refuses a rule whose messages carry a hook other than prox_mu, as its
    config states them (hooks_sent), before any run."""
    from tests.flower.test_flower import RUN_CONFIG, scenario

    raw = scenario([entry], client={"flower_app": "tests.flower.apps:sgd_app", "run_config": RUN_CONFIG})
    with allowing_imports(True):
        if refused is None:
            validate(raw)
            return
        with pytest.raises(InputError, match=rf"algorithms\[0\]: {entry['name']} changes simfl's own local training "
                           rf"\(its hook {refused}\), which a Flower ClientApp"):
            validate(raw)
