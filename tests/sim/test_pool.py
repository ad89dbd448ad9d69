"""The selection pool against a brute-force model: every draw, take and swap, at sizes around powers of two."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from simfl.sim.selection import BLOCK, Draws, Pool


def expected_draw(weights: list[int], members: set[int], u: float) -> int:
    """The member whose cumulative weight interval (index order) holds floor(u * total)."""
    order = sorted(members)
    edges = list(itertools.accumulate(weights[i] for i in order))
    target = min(int(u * edges[-1]), edges[-1] - 1)
    return order[next(i for i, e in enumerate(edges) if e > target)]


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 17, 64, 100])
@pytest.mark.parametrize("weighted", [False, True])
def test_pool_matches_a_brute_force_model(size: int, weighted: bool) -> None:
    rs = np.random.default_rng(size)
    weights = [int(w) for w in rs.integers(1, 50, size)] if weighted else [1] * size
    pool = Pool(weights)
    members = {int(m) for m in rs.choice(size, size=(size + 1) // 2, replace=False)}
    pool.add_all(sorted(members))
    for _ in range(400):
        op, m, u = int(rs.integers(5)), int(rs.integers(size)), float(rs.random())
        if op == 0:
            pool.add(m)
            members.add(m)
        elif op == 1:
            pool.remove(m)
            members.discard(m)
        elif op == 2 and members:
            assert pool.draw(u) == expected_draw(weights, members, u)
        elif op == 3 and members:
            got = pool.take(u)
            assert got == expected_draw(weights, members, u)
            members.discard(got)
        elif op == 4:
            members.add(m)
            got = pool.swap(m, u)
            assert got == expected_draw(weights, members, u)
            members.discard(got)
        assert pool.count == len(members)
        assert pool.total == sum(weights[i] for i in members)
        assert pool.selectable() == sorted(members)
    assert all(type(i) is int for i in pool.selectable())


def test_an_empty_pool_refuses_to_draw_and_extremes_of_u_stay_in_range() -> None:
    pool = Pool([2, 5, 1])
    with pytest.raises(ValueError, match="no client"):
        pool.take(0.5)
    with pytest.raises(ValueError, match="no client"):
        pool.draw(0.5)
    pool.add_all([0, 1, 2])
    assert pool.draw(0.0) == 0
    assert pool.draw(np.nextafter(1.0, 0.0)) == 2
    with pytest.raises(ValueError, match="positive"):
        Pool([1, 0])


def test_following_draws_are_the_draws_in_turn() -> None:
    """Draws.following(k) yields draw k, k + 1, ... across stream blocks, as calls with each k do."""
    draws = Draws(5)
    for start in (0, 3, BLOCK - 1, BLOCK, 2 * BLOCK + 7):
        following = draws.following(start)
        assert [next(following) for _ in range(BLOCK + 3)] == [draws(k) for k in range(start, start + BLOCK + 3)]


def test_add_all_to_an_empty_pool_counts_an_index_given_twice_once() -> None:
    pool = Pool([2, 5, 1, 4])
    pool.add_all([3, 1, 3])
    assert pool.count == 2 and pool.total == 9 and pool.selectable() == [1, 3]
    assert [pool.draw(u) for u in (0.0, 0.5, 0.6, 0.99)] == [1, 1, 3, 3]
