"""Sequential seeds keep their error rate: simulated comparisons, and the boundary of each look by hand.

Every simulated comparison runs the rule of :mod:`simfl.output.sequential` as the runner does: per-seed log
ratios arrive in batches (first 3, step 3, most 10: looks at 3, 6, 9 and 10 seeds), and the comparison stops
at the first look that settles it. No training: the log ratios are drawn directly.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from simfl.output import sequential
from simfl.output.sequential import Looks

LOOKS = Looks(first=3, most=10, step=3)
RUNS = 2000


def _stops(draws: np.ndarray, looks: Looks) -> list[sequential.Decision]:
    """The decision each simulated comparison ends with (rows: comparisons, columns: seeds' log ratios)."""
    ends = []
    for row in draws:
        for n in looks.sizes:
            decision = sequential.decide(row[:n].tolist(), looks, n)
            if decision.settled:
                break
        ends.append(decision)
    return ends


def _naive_winners(draws: np.ndarray, looks: Looks) -> int:
    """Comparisons where a fixed 95% t interval, looked at after each batch, excludes 1x at some look."""
    from scipy import special

    named = 0
    for row in draws:
        for n in looks.sizes:
            x = row[:n]
            half = float(special.stdtrit(n - 1, 0.975)) * float(x.std(ddof=1)) / math.sqrt(n)
            if abs(float(x.mean())) > half:
                named += 1
                break
    return named


@pytest.mark.parametrize(("case", "sd"), [("normal", 0.1), ("normal", 0.5), ("t3", 0.3)])
def test_identical_entries_name_a_winner_at_most_five_percent_of_the_time(case: str, sd: float) -> None:
    rng = np.random.default_rng(72 + int(100 * sd))
    if case == "normal":
        draws = rng.normal(0.0, sd, size=(RUNS, LOOKS.most))
    else:  # heavier tails: Student's t with 3 degrees of freedom, scaled
        draws = sd * rng.standard_t(3, size=(RUNS, LOOKS.most))
    ends = _stops(draws, LOOKS)
    winners = sum(d.winner for d in ends)
    rate = winners / RUNS
    assert rate <= 0.05, f"{case} sd {sd}: {winners} of {RUNS} comparisons named a winner ({100 * rate:.2f}%)"
    assert all(d.reason in (sequential.EXCLUDES, sequential.MOST) for d in ends)
    if case == "normal" and sd == 0.5:  # the simulation can see an inflated rate: the naive looks have one
        naive = _naive_winners(draws, LOOKS)
        assert naive / RUNS > 0.06, f"naive looks named a winner in {naive} of {RUNS}"


def test_identical_entries_with_a_width_rule_still_name_few_winners() -> None:
    looks = Looks(first=3, most=10, step=1, width=0.1)
    draws = np.random.default_rng(7).normal(0.0, 0.1, size=(RUNS, looks.most))
    ends = _stops(draws, looks)
    winners = sum(d.winner for d in ends)
    assert winners / RUNS <= 0.05, f"{winners} of {RUNS} comparisons named a winner ({100 * winners / RUNS:.2f}%)"
    assert any(d.reason == sequential.narrower(0.1) for d in ends)


def test_a_clearly_faster_entry_stops_at_the_first_look_in_most_comparisons() -> None:
    draws = np.random.default_rng(3).normal(math.log(0.25), 0.2, size=(RUNS, LOOKS.most))
    ends = _stops(draws, LOOKS)
    first = sum(1 for row, d in zip(draws, ends, strict=True) if sequential.decide(row[:3].tolist(), LOOKS, 3).settled)
    assert first / RUNS >= 0.8, f"{first} of {RUNS} stopped at the first look ({100 * first / RUNS:.1f}%)"
    assert all(d.winner and d.high < 0 for d in ends)  # every one names the entry faster, at some look


def _t_cdf(t: float, df: int) -> float:
    """Student's t distribution function by its closed form (a finite series in theta = atan(t / sqrt(df))), without
    SciPy: the check of the quantiles SciPy gives."""
    theta = math.atan(t / math.sqrt(df))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if df % 2 == 0:  # 1/2 + (s/2) (1 + c2/2 + 1*3/(2*4) c2^2 + ... up to df/2 - 1 terms after the first)
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        return 0.5 + s * total / 2
    term, total = math.cos(theta), 0.0  # 1/2 + (theta + s (c + 2/3 c^3 + 2*4/(3*5) c^5 + ...)) / pi
    for k in range(1, (df - 1) // 2 + 1):
        total += term
        term *= c2 * (2 * k) / (2 * k + 1)
    return 0.5 + (theta + s * total) / math.pi


def test_the_boundary_of_each_look_by_hand() -> None:
    # first 3, step 3, most 10: looks at n = 3, 6, 9, 10, information fractions t = 0.3, 0.6, 0.9, 1.0.
    # Spent up to t: 0.05 ln(1 + (e - 1) t), e - 1 = 1.7182818:
    #   t 0.3: ln(1.5154845) = 0.4157352 -> 0.0207868     t 0.6: ln(2.0309691) = ln 2 + ln(1.0154845) = 0.7085131
    #   -> 0.0354257     t 0.9: ln(2.5464536) = ln 2.5 + ln(1.0185815) = 0.9347017 -> 0.0467351     t 1.0: ln(e) = 1 -> 0.05
    # so each look spends 0.0207868, 0.0146389, 0.0113094, 0.0032649 (sum 0.05).
    # Look 1, 3 seeds, 2 degrees of freedom, whose quantile has a closed form: t_p = (2p - 1) / sqrt(2 p (1 - p)),
    #   p = 1 - 0.0207868 / 2 = 0.9896066: 0.9792132 / sqrt(2 * 0.9896066 * 0.0103934) = 0.9792132 / 0.1434249 = 6.8273.
    # Looks 2-4 (5, 8, 9 degrees of freedom): c with P(T > c) = alpha_k / 2 = 0.0073195, 0.0056547, 0.0016325;
    #   SciPy's quantiles c = 3.6571, 3.2728, 3.9679 are checked below against the closed-form distribution function
    #   (_t_cdf, the finite series in atan(c / sqrt(df))).
    spent = [0.0207868, 0.0146389, 0.0113094, 0.0032649]
    assert LOOKS.sizes == [3, 6, 9, 10]
    assert LOOKS.spent == pytest.approx(spent, abs=1e-7)
    assert math.fsum(LOOKS.spent) == pytest.approx(0.05, abs=1e-15)
    critical = [LOOKS.critical(k, n) for k, n in enumerate(LOOKS.sizes)]
    assert critical[0] == pytest.approx(0.9792132 / 0.1434249, abs=1e-4)
    assert critical == pytest.approx([6.8274, 3.6571, 3.2728, 3.9679], abs=1e-4)
    for c, n, a in zip(critical, LOOKS.sizes, spent, strict=True):
        assert 1 - _t_cdf(c, n - 1) == pytest.approx(a / 2, rel=1e-5)
    # a look of 3 log ratios -0.3, -0.2, -0.1: mean -0.2, s = 0.1, half width 6.8273 * 0.1 / sqrt(3) = 0.39418
    decision = sequential.decide([-0.3, -0.2, -0.1], LOOKS, 3)
    assert (decision.low, decision.high) == pytest.approx((-0.59418, 0.19418), abs=1e-5)
    assert decision.reason == sequential.NOT_YET  # a fixed t interval (half width 0.2484) would have excluded 1x
    assert sequential.decide([-0.3, -0.2, -0.1], LOOKS, 10).reason == sequential.MOST


def test_bounds_settle_only_in_their_direction_and_widths_only_exact() -> None:
    faster = [-1.4, -1.3, -1.5]
    assert sequential.decide(faster, LOOKS, 3).winner
    assert sequential.decide(faster, LOOKS, 3, "upper").winner  # at most this: faster still
    assert not sequential.decide(faster, LOOKS, 3, "lower").settled  # at least this: says nothing of faster
    assert not sequential.decide(faster, LOOKS, 3, "mixed").settled
    assert not sequential.decide([-0.2], LOOKS, 3).settled  # one paired seed: no interval
    level = Looks(first=3, most=10, step=3, width=0.1)
    near = [0.01, -0.01, 0.0, 0.005, -0.005, 0.0]
    assert sequential.decide(near, level, 6).reason == "settled: narrower than ±10%"
    assert sequential.decide(near, level, 6, "upper").reason == sequential.NOT_YET
