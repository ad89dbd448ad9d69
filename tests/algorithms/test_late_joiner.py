"""A client absent at time 0 joins later: it is anchored where it joins, in every algorithm (hand-computed)."""

from __future__ import annotations

import math

import pytest

from simfl.algorithms.fedbuff import FedBuff, FedBuffConfig
from simfl.algorithms.orthofl import OrthoFL, OrthoFLConfig
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.schema import scenario as scenario_mod
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec
from tests.conftest import tiny_scenario


def test_orthofl_anchors_a_late_joiner_at_the_global_model_it_joins_on() -> None:
    # beta 0.5, a = 0 (beta_t = 0.5 always); client 1 absent until after the first update
    alg = OrthoFL(OrthoFLConfig(beta=0.5, a=0.0, shift_source="global"), make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    # t=1 client 0: [2,0,0] from W0, no shift -> sent [2,0,0]; W1 = .5*0 + .5*[2,0,0] = [1,0,0]
    sent0, _ = alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    close(sent0, [2, 0, 0])
    # client 1 joins now: it is sent W1 and anchored there
    start1 = alg.on_join(1)
    close(start1, [1, 0, 0])
    # t=2 client 0: [2,2,0] from [2,0,0]; shift W1 - anchor0 (= W1) = 0 -> sent [2,2,0]; W2 = [1.5,1,0]
    alg.on_arrival(arrival(0, vec(2, 2, 0), sent0, 1, 2))
    # t=3 client 1: [1,2,4] from W1 = [1,0,0], update [0,2 | 4]; shift W2 - W1 = [.5,1 | 0]
    #   weight layer: [.5,1] - (<[.5,1],[0,2]> / <[0,2],[0,2]>) [0,2] = [.5,0]; bias: 0 - 0 = 0
    #   sent [1,2,4] + [.5,0,0] = [1.5,2,4] (anchored at W0 instead, the shift would be [1.5,1 | 0]: [2.5,2,4])
    sent1, weight = alg.on_arrival(arrival(1, vec(1, 2, 4), start1, 2, 3))
    close(sent1, [1.5, 2, 4])
    assert weight == 0.5
    close(alg.global_weights(), [1.25, 1.5, 2])  # .5*[1.5,1,0] + .5*[1,2,4]


def test_orthofl_chain_sends_a_late_joiner_the_chain_model() -> None:
    alg = OrthoFL(OrthoFLConfig(beta=0.5, a=0.0, shift_source="chain"), make_setup(linear_layout(), [0, 0, 0], 2))
    # t=1 client 0 (first update at weight 1 under chain): chain G = sent [2,0,0], W = [2,0,0]
    sent0, weight = alg.on_arrival(arrival(0, vec(2, 0, 0), alg.initial_weights(0), 1, 1))
    assert weight == 1.0
    assert alg.on_join(1) is sent0


def test_fedbuff_counts_a_late_joiners_versions_from_its_join() -> None:
    alg = FedBuff(FedBuffConfig(buffer=2), make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    # t=1, t=2 client 0 (version 0 both times): deltas [2,0,0], [0,2,0]; flush W1 = [1,1,0], version 1
    alg.on_arrival(arrival(0, vec(2, 0, 0), w0, 1, 1))
    w1, _ = alg.on_arrival(arrival(0, vec(0, 2, 0), w0, 1, 2))
    close(w1, [1, 1, 0])
    # client 1 joins on version 1
    assert alg.on_join(1) is w1
    # t=3 client 1: no flush since it joined -> weight 1/sqrt(1 + 0) = 1 (from version 0 it would be 1/sqrt(2))
    _, weight = alg.on_arrival(arrival(1, w1 + vec(0, 0, 4), w1, 2, 3))
    assert weight == 1.0
    # t=4 client 0 from W1, delta [2,0,0], weight 1: flush W2 = W1 + ([0,0,4] + [2,0,0]) / 2 = [2,1,2]
    w2, _ = alg.on_arrival(arrival(0, w1 + vec(2, 0, 0), w1, 2, 4))
    close(w2, [2, 1, 2])


@pytest.mark.parametrize(
    ("algorithm", "expected_weight"),
    [
        # staleness 6 counted from the join: 0.6 * 6^-0.5 (from time 0 it would be 10: 0.6 * 10^-0.5)
        ({"name": "fedasync", "alpha": 0.6}, 0.6 * 6 ** -0.5),
        ({"name": "orthofl", "beta": 0.6, "a": 0.5}, 0.6 * 6 ** -0.5),
        # versions 2 at the join (updates 2, 4), 4 at the arrival (6, 8): 1/sqrt(1 + 2), not 1/sqrt(1 + 4)
        ({"name": "fedbuff", "buffer": 2}, 1 / math.sqrt(3)),
    ],
)
def test_late_joiner_staleness_counts_from_its_join(algorithm: dict[str, object], expected_weight: float) -> None:
    # latencies 1.0, 2.5, 4.0; client 2 absent until 3.25, after updates 1-4 (1.0 c0, 2.0 c0, 2.5 c1, 3.0 c0);
    # it arrives at 7.25 after updates 5-9 (c0 at 4, 5, 6, 7 and c1 at 5): update 10, staleness 10 - 4 = 6
    raw = tiny_scenario(algorithms=[algorithm],
                        availability={"departures": [{"client": 2, "leave": 0.0, "rejoin": 3.25}]})
    scn = scenario_mod.validate(raw)
    state = run_one(scn, federation(scn, load_dataset(scn), 0), 0).state
    first = next(e for e in state.events if e.client == 2 and e.event == "arrival")
    assert (first.time, first.update, first.staleness, first.dispatch_time) == (7.25, 10, 6, 3.25)
    assert first.weight == pytest.approx(expected_weight, rel=1e-12)
