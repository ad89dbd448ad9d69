"""FedAsync with each staleness function against hand-computed cases."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from simfl.algorithms.configs import hinge_staleness
from simfl.algorithms.fedasync import FedAsync, FedAsyncConfig
from tests.algorithms.algo_helpers import arrival, close, linear_layout, make_setup, vec


@pytest.mark.parametrize(
    ("staleness", "second_weight", "expected"),
    [
        # constant: 0.5 whatever s;  W = .5*[1,0,.5] + .5*[0,2,-1] = [.5, 1, -.25]
        ({"kind": "constant"}, 0.5, [0.5, 1.0, -0.25]),
        # polynomial a=1, s=3: 0.5/3;  W = 5/6*[1,0,.5] + 1/6*[0,2,-1] = [.8333333, .3333333, .25]
        ({"kind": "polynomial", "a": 1.0}, 0.5 / 3, [5 / 6, 1 / 3, 0.25]),
        # hinge a=2, b=1, s=3: the paper's t - tau = 2 > b: 0.5 / (2*(2-1)+1) = 1/6 -> same numbers as above
        ({"kind": "hinge", "a": 2.0, "b": 1.0}, 1 / 6, [5 / 6, 1 / 3, 0.25]),
        # hinge a=1, b=2, s=3: t - tau = 2 <= b: undiscounted 0.5 (s = b + 1 is the last undiscounted step)
        ({"kind": "hinge", "a": 1.0, "b": 2.0}, 0.5, [0.5, 1.0, -0.25]),
    ],
)
def test_two_clients(staleness: dict[str, object], second_weight: float, expected: list[float]) -> None:
    alg = FedAsync(FedAsyncConfig(alpha=0.5, staleness=staleness), make_setup(linear_layout(), [0, 0, 0], 2))  # type: ignore[arg-type]
    w0 = alg.initial_weights(0)
    assert alg.initial_weights(1) is w0
    # t=1, client 0, s=1: every S gives 1 -> weight .5, W = [1,0,.5]
    sent, weight = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert weight == 0.5
    close(sent, [1, 0, 0.5])
    # t=3, client 1 started at W0, s=3 (another update in between)
    sent, weight = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 3, 3))
    assert weight == pytest.approx(second_weight, rel=1e-12)
    close(sent, expected)
    assert sent is alg.global_weights()


def test_hinge_values() -> None:
    # Xie et al. 2019: S = 1 while t - tau <= b, with t - tau = s - 1 (0 for a fresh update)
    assert hinge_staleness(1, 10.0, 0.0) == 1.0  # fresh update, b = 0: not discounted
    assert hinge_staleness(2, 10.0, 0.0) == pytest.approx(1 / 11)  # t - tau = 1 > 0: 1 / (10 * 1 + 1)
    assert hinge_staleness(5, 10.0, 4.0) == 1.0  # t - tau = 4 = b: zero point, still 1
    assert hinge_staleness(6, 10.0, 4.0) == pytest.approx(1 / 11)
    assert hinge_staleness(6, 0.5, 2.0) == pytest.approx(1 / 2.5)  # t - tau = 5: 1 / (0.5 * 3 + 1)


@pytest.mark.parametrize(("first_weight", "expected_first"), [(None, 0.5), (1.0, 1.0), (0.8, 0.8)])
def test_first_weight(first_weight: float | None, expected_first: float) -> None:
    """null: the paper's alpha_t for the first update too; 1: the OrthoFL released code's rule."""
    config = FedAsyncConfig(alpha=0.5, staleness={"kind": "constant"}, first_weight=first_weight)  # type: ignore[arg-type]
    alg = FedAsync(config, make_setup(linear_layout(), [0, 0, 0], 2))
    w0 = alg.initial_weights(0)
    sent, weight = alg.on_arrival(arrival(0, vec(2, 0, 1), w0, 1, 1))
    assert weight == expected_first
    close(sent, [2 * expected_first, 0, expected_first])
    # the second update is mixed at alpha whatever the first weight: W = .5 W + .5 [0, 2, -1]
    sent, weight = alg.on_arrival(arrival(1, vec(0, 2, -1), w0, 2, 2))
    assert weight == 0.5
    close(sent, [expected_first, 1.0, 0.5 * expected_first - 0.5])
    assert alg.state()["arrivals"] == 2


@pytest.mark.parametrize(
    "bad", [{"alpha": 1.0}, {"staleness": {"kind": "exp"}}, {"staleness": {"kind": "hinge", "b": -1}}]
)
def test_config_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        FedAsyncConfig(**bad)  # type: ignore[arg-type]
