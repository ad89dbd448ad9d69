"""PORT against cases worked out by hand: its weights (staleness and interference terms), both aggregations and both
similarity readings, the clients an aggregation takes past the staleness bound, where a recall cuts a round, a run
whose arrivals follow from those rules (every number in the comments), and a cut job's weights."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from simfl.algorithms.port import PORT, PORTConfig
from simfl.errors import InputError
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.models.flat import Layout
from simfl.schema import scenario as scenario_mod
from simfl.sim.recall import boundary
from simfl.train.configs import TrainConfig
from simfl.train.local import Job, LocalTrainer
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec
from tests.sim.same import assert_same_state


def two_flushes(aggregation: str) -> tuple[PORT, list[torch.Tensor], list[float | None]]:
    """alpha 1, beta 1, omega 2, buffer 2; clients of 2, 1, 1 samples; W0 = 0; four arrivals, two aggregations."""
    alg = PORT(PORTConfig(alpha=1.0, beta=1.0, omega=2, buffer=2, aggregation=aggregation),  # type: ignore[arg-type]
               make_setup(linear_layout(), [0, 0, 0], 3, (2, 1, 1)))
    w0 = alg.initial_weights(0)
    sent, factors = [], []
    for client, weights, n in ((0, vec(2, 0, 0), 2), (1, vec(0, 2, 0), 1), (2, vec(0, 0, 3), 1), (0, vec(-1, 0, 0), 2)):
        out, factor = alg.on_arrival(arrival(client, weights, w0, 1, len(sent) + 1, n))
        sent.append(out.clone())
        factors.append(factor)
    return alg, sent, factors


def test_deltas_weighted_by_staleness_and_samples() -> None:
    """factor = 1 * 2 / (s + 2) + 1 * (cos + 1) / 2, cos 1 before a second version (and for s < 2).

    client 0 (s 0): factor 1 + 1 = 2, raw n * factor = 4, delta [2,0,0]; buffered
    client 1 (s 0): factor 2, raw 2, delta [0,2,0]; flush: W1 = 0 + (4 [2,0,0] + 2 [0,2,0]) / 6 = [4/3, 2/3, 0]
    client 2 (sent W0, s 1: cos taken as 1): factor 2/3 + 1 = 5/3, raw 5/3, delta [0,0,3]; buffered
    client 0 (sent W0 at its first arrival, before W1: s 1): factor 5/3, raw 10/3, delta [-1,0,0];
      flush: W2 = W1 + (5/3 [0,0,3] + 10/3 [-1,0,0]) / 5 = W1 + [-2/3, 0, 1] = [2/3, 2/3, 1]
    """
    alg, sent, factors = two_flushes("deltas")
    assert factors == [2.0, 2.0, pytest.approx(5 / 3), pytest.approx(5 / 3)]
    close(sent[0], [0, 0, 0])
    close(sent[1], [4 / 3, 2 / 3, 0])
    close(sent[2], [4 / 3, 2 / 3, 0])
    close(sent[3], [2 / 3, 2 / 3, 1])
    assert alg.versions.version == 2 and alg.count == 0
    assert alg.step is not None
    close(alg.step, [-2 / 3, 0, 1])


def test_models_reading_is_the_buffers_weighted_mean() -> None:
    """AFL-Lib's reading: W = sum p_i W_i. The first flush is the same (both started from W0 = W at the flush);
    the second: W2 = (5/3 [0,0,3] + 10/3 [-1,0,0]) / 5 = [-2/3, 0, 1]: the stale models pull W1 back."""
    _, sent, _ = two_flushes("models")
    close(sent[1], [4 / 3, 2 / 3, 0])
    close(sent[3], [-2 / 3, 0, 1])


def test_interference_term_and_the_clients_past_the_bound() -> None:
    """buffer 1 (every arrival a version), alpha 1, beta 1, omega 2; four clients, W0 = 0.

    client 0 (s 0): factor 2, W1 = [1,0,0]; the last step [1,0,0]
    client 1 (sent W0, s 1: cos 1): factor 2/3 + 1; W2 = W1 + [0,1,0] = [1,1,0]; the last step [0,1,0]
    client 2 (sent W0, s 2): cos([0,1,1], [0,1,0]) = 1 / sqrt 2: factor 2/4 + (1 + 1/sqrt 2) / 2; W3 = [1,2,1]
      version 3 takes the clients dispatched at version 0 past the bound (3 - 0 > 2): client 3 only (0, 1 and 2
      went out again at versions 1, 2 and 3); recalled once
    """
    alg = PORT(PORTConfig(alpha=1.0, beta=1.0, omega=2, buffer=1), make_setup(linear_layout(), [0, 0, 0], 4))
    w0 = alg.initial_weights(0)
    _, f0 = alg.on_arrival(arrival(0, vec(1, 0, 0), w0, 1, 1))
    assert f0 == 2.0 and alg.recall() == []
    _, f1 = alg.on_arrival(arrival(1, vec(0, 1, 0), w0, 2, 2))
    assert f1 == pytest.approx(2 / 3 + 1) and alg.recall() == []
    w3, f2 = alg.on_arrival(arrival(2, vec(0, 1, 1), w0, 3, 3))
    assert f2 == pytest.approx(0.5 + (1 + 1 / math.sqrt(2)) / 2)
    close(w3, [1, 2, 1])
    assert alg.recall() == [3]
    assert alg.recall() == []  # handed over once


def test_constant_similarity_is_afl_libs_zero_global_change() -> None:
    """similarity constant: cos 1 before the first aggregation, 0 after. Client 1 (s 1): 2/3 + 1/2 = 7/6."""
    alg = PORT(PORTConfig(alpha=1.0, beta=1.0, omega=2, buffer=1, similarity="constant"),
               make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    assert alg.on_arrival(arrival(0, vec(1, 0, 0), w0, 1, 1))[1] == 2.0
    assert alg.on_arrival(arrival(1, vec(0, 1, 0), w0, 2, 2))[1] == pytest.approx(7 / 6)


def test_without_recall_nobody_is_recalled_and_the_weights_are_the_same() -> None:
    alg = PORT(PORTConfig(alpha=1.0, beta=1.0, omega=2, buffer=1, recall=False), make_setup(linear_layout(), [0, 0, 0], 4))
    w0 = alg.initial_weights(0)
    assert not alg.recalls_clients
    for m, weights in enumerate((vec(1, 0, 0), vec(0, 1, 0), vec(0, 1, 1))):
        out, _ = alg.on_arrival(arrival(m, weights, w0, 1, m + 1))
        assert alg.recall() == []
    close(out, [1, 2, 1])


def test_state_round_trip_keeps_the_cohorts() -> None:
    """A copy loaded mid-run aggregates and recalls as the original: the cohorts are rebuilt from the versions."""
    def build() -> PORT:
        return PORT(PORTConfig(alpha=1.0, beta=1.0, omega=2, buffer=1), make_setup(linear_layout(), [0, 0, 0], 4))

    alg = build()
    w0 = alg.initial_weights(0)
    alg.on_arrival(arrival(0, vec(1, 0, 0), w0, 1, 1))
    alg.on_arrival(arrival(1, vec(0, 1, 0), w0, 2, 2))
    copy = build()
    copy.load_state(alg.state())
    for a in (alg, copy):
        a.on_arrival(arrival(2, vec(0, 1, 1), w0, 3, 3))
    close(copy.global_weights(), alg.global_weights().tolist())
    assert copy.recall() == alg.recall() == [3]


def test_the_next_epoch_boundary() -> None:
    """Compute of 10 s in 5 epochs from t = 0: boundaries at 2, 4, 6, 8 (10 is the end: nothing to cut)."""
    assert boundary(0.0, 1.0, 10.0, 5) == (1, 2.0)
    assert boundary(0.0, 4.0, 10.0, 5) == (2, 4.0)  # at a boundary: that one
    assert boundary(0.0, 0.0, 10.0, 5) == (1, 2.0)  # at least one epoch
    assert boundary(0.0, 8.5, 10.0, 5) is None  # in its last epoch
    assert boundary(3.0, 3.5, 10.0, 1) is None  # one epoch: nothing to cut
    assert boundary(0.3, 0.5, 0.9, 3) == (1, 0.9 / 3)  # boundaries at 0.6, 0.9 (after the start 0.3)
    # at now = 0.9: the second boundary is 0.3 + 0.6 = 0.8999999999999999 in floats, before now; the next is the end
    assert boundary(0.3, 0.9, 0.9, 3) is None


def served(algorithm: dict[str, Any], executor: str = "none") -> dict[str, Any]:
    """3 clients of 12 samples, constant latencies 1, 1 and 10 s, 5 epochs a round."""
    return {
        "name": "port", "seeds": [0],
        "data": {"dataset": "synthetic", "train_size": 36, "test_size": 8, "features": 4, "classes": 2,
                 "partition": {"kind": "iid", "clients": 3}},
        "model": {"name": "mlp", "hidden": [3]}, "train": {"epochs": 5, "batch_size": 4, "lr": 0.05},
        "latency": {"model": "constant", "seconds": [1.0, 1.0, 10.0]},
        "budget": {"updates": 6}, "eval": {"every": 100.0}, "algorithms": [algorithm], "executor": {"kind": executor},
    }


def test_a_run_recalls_the_straggler_at_its_next_epoch_boundary() -> None:
    """buffer 1, omega 1: every arrival is a version; a client in flight 2 versions old is recalled.

    t=1: 0 arrives: version 1 (nobody 2 old); 1 arrives: version 2, client 2 (sent version 0) is recalled at t = 1:
         its 10 s compute in 5 epochs has its next boundary at 2 s, one epoch: it arrives at t = 2, latency 2
    t=2: 0 (sent at 1) arrives: version 3; then 2 (its end created at t = 1 before 1 went out again): version 4,
         recalls client 1 (sent at version 2) but it is in its last (only remaining) epoch: not cut; then 1: version
         5, recalls 0 (sent at version 3, at t = 2): its next boundary is its first epoch's, 0.2 s: it arrives at 2.2
    recall false: client 2 runs its 10 s.
    """
    scn = scenario_mod.validate(served({"name": "port", "buffer": 1, "omega": 1}))
    fed = federation(scn, load_dataset(scn), 0)
    for engine in ("heap", "simpy"):
        state = run_one(scn, fed, 0, engine=engine, verify=True).state
        arrivals = [(e.time, e.client, e.dispatch_time, e.latency) for e in state.events if e.event == "arrival"]
        assert arrivals == [(1.0, 0, 0.0, 1.0), (1.0, 1, 0.0, 1.0), (2.0, 0, 1.0, 1.0), (2.0, 2, 0.0, 2.0),
                            (2.0, 1, 1.0, 1.0), (2.2, 0, 2.0, 0.2)]
    scn = scenario_mod.validate(served({"name": "port", "buffer": 1, "omega": 1, "recall": False}))
    state = run_one(scn, federation(scn, load_dataset(scn), 0), 0, verify=True).state
    assert all(e.client != 2 for e in state.events if e.event == "arrival")  # 6 updates before t = 10


def test_a_recalled_round_trains_its_first_epochs() -> None:
    """A job cut to k epochs is the full job's first k (the same stream): 2 of 5 epochs equal a 2-epoch round."""
    model = torch.nn.Linear(2, 2)
    layout = Layout.of(model)
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(12, 2, generator=gen), torch.randint(0, 2, (12,), generator=gen)
    start = torch.randn(layout.size, generator=gen)
    five = LocalTrainer(model, layout, [(x, y)], TrainConfig(epochs=5, batch_size=4, lr=0.1), seed=3)
    two = LocalTrainer(model, layout, [(x, y)], TrainConfig(epochs=2, batch_size=4, lr=0.1), seed=3)
    cut = five.run(Job(0, 4, start.clone(), epochs=2))
    assert torch.equal(cut.weights, two.run(Job(0, 4, start.clone())).weights)
    assert not torch.equal(cut.weights, five.run(Job(0, 4, start.clone())).weights)
    assert cut.metrics["steps"] == 2 * 3


def test_a_trained_run_with_recalls_is_verified_on_both_clocks() -> None:
    """Real training under the recall: the verifier's checks hold on both clocks, which give the same whole state
    (events, clients, their cut epochs, the weights)."""
    scn = scenario_mod.validate(served({"name": "port", "buffer": 1, "omega": 1}, executor="inline"))
    fed = federation(scn, load_dataset(scn), 0)
    heap = run_one(scn, fed, 0, engine="heap", verify=True).state
    simpy = run_one(scn, fed, 0, engine="simpy", verify=True).state
    assert_same_state(heap, simpy)
    assert [e.latency for e in heap.events if e.event == "arrival"][3] == 2.0  # client 2 cut to one epoch


@pytest.mark.parametrize("bad", [{"buffer": 0}, {"omega": 0}, {"alpha": -1.0}, {"aggregation": "sum"},
                                 {"similarity": "cosine"}])
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        PORTConfig(**bad)  # type: ignore[arg-type]


def test_the_recall_under_a_client_app_is_refused_in_its_own_words() -> None:
    with pytest.raises(InputError, match="set recall: false"):
        PORTConfig().check_federation(4, True, "algorithms[0]")
    PORTConfig(recall=False).check_federation(4, True, "algorithms[0]")
