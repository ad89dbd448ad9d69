"""The validation split: rows held out of each client's training data, scored instead of the test set; and an
entry's own train: options."""

from __future__ import annotations

import numpy as np
import pytest

from simfl.data.partition import Parts, hold_out
from simfl.launch.experiment import federation, load_dataset, run_one
from simfl.rng import stream
from simfl.schema.scenario import validate
from tests.conftest import tiny_scenario
from tests.tune.test_tune import digits_scenario


def test_hold_out_takes_the_floor_of_each_clients_share() -> None:
    parts = Parts.of([np.arange(0, 10), np.arange(10, 13), np.array([13]), np.arange(14, 34)])
    kept, held = hold_out(parts, 0.3, stream(0, "validation"))
    assert kept.sizes() == (7, 3, 1, 14)  # floor(3.0), floor(0.9), floor(0.3), floor(6.0) rows held
    assert len(held) == 3 + 0 + 0 + 6 and list(held) == sorted(held)
    for m in range(4):
        assert set(kept[m]) | set(held[(held >= parts[m][0]) & (held <= parts[m][-1])]) == set(parts[m])
        assert list(kept[m]) == sorted(kept[m])
    again, held_again = hold_out(parts, 0.3, stream(0, "validation"))
    assert np.array_equal(held, held_again) and np.array_equal(again.rows, kept.rows)


def test_the_validation_split_is_disjoint_from_the_clients_rows_and_from_the_test_set() -> None:
    raw = digits_scenario(data={"dataset": "digits", "partition": {"kind": "dirichlet", "clients": 5, "alpha": 0.5}},
                          latency={"model": "exponential", "mean": 5.0})
    plain = validate(raw)
    held_out = validate({**raw, "data": {**raw["data"], "validation": 0.1}})
    dataset = load_dataset(plain)
    whole = federation(plain, dataset, 3)
    fed = federation(held_out, dataset, 3)
    trained = np.concatenate([fed.shards.parts[m] for m in range(len(fed.shards))])
    everyone = np.concatenate([whole.shards.parts[m] for m in range(len(whole.shards))])
    held = np.setdiff1d(everyone, trained)
    for m in range(5):  # each client trains on a subset of what it holds without a validation split, less a tenth
        assert set(fed.shards.parts[m]) <= set(whole.shards.parts[m])
        assert len(whole.shards.parts[m]) - len(fed.shards.parts[m]) == len(whole.shards.parts[m]) // 10
    assert len(np.intersect1d(held, trained)) == 0
    # what the run scores on is exactly those training rows ...
    assert len(fed.dataset.y_test) == len(held) > 0
    assert np.array_equal(fed.dataset.x_test.numpy(), dataset.x_train[held].numpy())
    assert np.array_equal(fed.dataset.y_test.numpy(), dataset.y_train[held].numpy())
    # ... and none of them is a test image
    test_rows = {bytes(r) for r in dataset.x_test.reshape(len(dataset.x_test), -1).numpy()}
    assert not any(bytes(r) in test_rows for r in fed.dataset.x_test.reshape(len(held), -1).numpy())
    # latency and weights see the clients' sizes as without the split: the same schedule
    assert fed.client_sizes == whole.client_sizes


def test_a_run_with_a_validation_split_scores_on_it() -> None:
    raw = tiny_scenario()
    raw["data"] = {**raw["data"], "validation": 0.25}
    scn = validate(raw)
    fed = federation(scn, load_dataset(scn), 0)
    assert len(fed.dataset.y_test) == 3 * (40 // 4)  # 120 rows over 3 clients, a quarter of each
    result = run_one(scn, fed, 0)
    for row in result.state.metrics:  # every accuracy is a share of the 30 validation rows, not of the 60 test rows
        assert row.accuracy * 30 == pytest.approx(round(row.accuracy * 30))
    assert len(result.state.metrics) > 1


def test_an_entrys_own_learning_rate_is_the_one_it_trains_with() -> None:
    fast = validate(tiny_scenario(train={"epochs": 1, "batch_size": 16, "lr": 0.3}))
    own = validate(tiny_scenario(train={"epochs": 1, "batch_size": 16, "lr": 0.01},
                                 algorithms=[{"name": "fedasync", "alpha": 0.6, "train": {"lr": 0.3}}]))
    slow = validate(tiny_scenario(train={"epochs": 1, "batch_size": 16, "lr": 0.01}))
    data = load_dataset(fast)
    runs = [run_one(s, federation(s, data, 0), 0).state.metrics for s in (fast, own, slow)]
    assert [m.accuracy for m in runs[0]] == [m.accuracy for m in runs[1]]
    assert [m.loss for m in runs[0]] == [m.loss for m in runs[1]] != [m.loss for m in runs[2]]
