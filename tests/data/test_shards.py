"""Client data gathered on access (simfl.data.base.Shards): the rows of each client's partition, as eager indexing gave."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from simfl.data.base import Shards
from simfl.data.partition import IIDConfig, Parts, split


def test_shards_give_each_clients_rows_and_sizes() -> None:
    x = torch.arange(60, dtype=torch.float32).view(30, 2)
    y = torch.arange(30) % 3
    parts = split(IIDConfig(kind="iid", clients=4), y.numpy(), np.random.default_rng(0))
    shards = Shards(x, y, parts)
    assert len(shards) == 4 and shards.sizes() == (8, 8, 7, 7)
    for (sx, sy), ix in zip(shards, parts, strict=True):  # iteration ends at the last client
        assert torch.equal(sx, x[torch.from_numpy(ix)]) and torch.equal(sy, y[torch.from_numpy(ix)])
    assert torch.equal(shards[-1][0], shards[3][0])
    with pytest.raises(IndexError):
        shards[4]
    sx, _ = shards[0]
    sx += 1  # a trainer's copy: the data stays as it was
    assert torch.equal(shards[0][0], x[torch.from_numpy(parts[0])])
    again = pickle.loads(pickle.dumps(shards.share_memory_()))  # what a worker process receives
    assert x.is_shared() and all(torch.equal(a[0], b[0]) for a, b in zip(again, shards, strict=True))


def test_the_iid_split_is_the_per_part_sort_of_array_split() -> None:
    for n, clients in [(10, 3), (100, 100), (7, 1), (60_000, 7), (20_001, 10_000)]:
        labels = np.zeros(n, dtype=np.int64)
        got = split(IIDConfig(kind="iid", clients=clients), labels, np.random.default_rng(n))
        perm = np.random.default_rng(n).permutation(n)
        want = [np.sort(p) for p in np.array_split(perm, clients)]
        assert len(got) == clients
        assert all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(got, want, strict=True))


def test_parts_of_arrays_are_the_arrays() -> None:
    arrays = [np.array([0, 4]), np.array([], dtype=np.int64), np.array([1, 2, 9])]
    parts = Parts.of(arrays)
    assert len(parts) == 3 and parts.sizes() == (2, 0, 3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, arrays, strict=True))
    assert np.array_equal(parts[-1], arrays[2]) and [len(p) for p in parts[1:]] == [0, 3]
    with pytest.raises(IndexError):
        parts[3]
