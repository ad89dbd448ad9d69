"""Sequential seeds: after each batch of seeds, whether an entry's time ratio to the baseline is settled.

A scenario may ask for its seeds in batches (``seeds: {first: 3, most: 10, until: settled}``): the runner runs
the first batch, compares, and runs another batch while some comparison is not settled. Looking at the interval
after every batch and stopping when it excludes 1x is optional stopping: a fixed 95% t interval checked at
n = 3, 6, 9, 10 names a winner between identical entries in 12.9% of comparisons, not 5% (400,000 simulated).
This module is the rule that keeps the error rate what it says; pure functions on numbers (the comparison gives
them).

**The looks.** A plan looks at n = first, first + step, ..., and last at most: the *planned* looks, fixed
before any seed runs (:class:`Looks`). Look k has the information fraction t_k = n_k / most.

**The method: Lan–DeMets alpha spending, each look's share spent by a Student-t test.** The error rate
alpha (5%) is spent over the looks by the Pocock-type spending function of Lan and DeMets (K. K. G. Lan and
D. L. DeMets, "Discrete sequential boundaries for clinical trials", Biometrika 70(3), 1983, pp. 659-663, the
second of their two spending functions):

    alpha(t) = alpha * ln(1 + (e - 1) t),        alpha_k = alpha(t_k) - alpha(t_(k-1)),  alpha(t_0) = 0,

so alpha(1) = alpha: the shares sum to alpha. At look k the per-seed log ratios used (m of them) give the
mean d and the sample standard deviation s; the interval of the mean log ratio is

    d +- c_k s / sqrt(m),        c_k = t(1 - alpha_k / 2; m - 1)   (Student's t quantile, m - 1 degrees of freedom),

exponentiated for the ratio. Under identical entries (log ratios independent, normal, mean 0, any unknown
variance) ``|d| sqrt(m) / s`` follows Student's t with m - 1 degrees of freedom exactly at every look, so the
interval of look k excludes 1x with probability alpha_k, and by Bonferroni's inequality (the probability of a
union is at most the sum) the chance that *any* look excludes it is at most sum alpha_k = alpha, whatever rule
decides when to stop (settled, narrow enough, another entry's comparison, the most seeds). The
intervals of every look hold together with 95% coverage, so the one reported at the stop does too.

**Why this method.** The usual group-sequential boundaries (Lan and DeMets' own, computed by the recursive
integration of Armitage, McPherson and Rowe) take the look statistics as normal with known variance; with 3 to
10 seeds the variance is estimated from 2 to 9 degrees of freedom, and moving those boundaries onto the t scale
is an approximation with no guarantee at such small samples. The Bonferroni combination needs only each look's
own t distribution, which is exact; its price is that it ignores the correlation of the looks, so the error rate
is below alpha: 4.0% for looks at 3, 6, 9 and 10 normal seeds, 2.8% for Student-t(3) tails (400,000 simulated;
``tests/studies/test_sequential.py`` measures it on 2,000). An anytime-valid confidence
sequence for a mean of unknown variance (the scale-invariant mixture of Lai, 1976) is exact too and needs no plan,
but at n = 3 its interval is about 1.5 times as wide as this method's (critical value 10.1 against 6.8), and a
plan's first look is where a clear answer should stop. The Pocock-type function spends a fair share at the
first look (41.6% of alpha at t = 0.3) where an O'Brien–Fleming-type one spends almost none, for the same reason.

**Settled.** At a look the comparison is settled when its interval excludes 1x (a winner is named; when the
ratio is a bound, only in the direction the bound allows), or, with a ``width`` w, when the interval is
narrower than +-w around the ratio (``high / ratio <= 1 + w`` and ``ratio / low <= 1 + w``, exact ratios
only): then the entry and the baseline are level within about that. Otherwise it is settled only by the most
seeds. The guarantee is per comparison (entry against baseline), as for the fixed intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

ALPHA = 0.05
"""The error rate spent over the looks (1 - the intervals' coverage)."""

EXCLUDES = "settled: interval excludes 1x"
MOST = "most seeds"
NOT_YET = "not settled"


def narrower(width: float) -> str:
    """The reason of a comparison settled by its width."""
    return f"settled: narrower than ±{100 * width:g}%"


def spending(t: float, alpha: float = ALPHA) -> float:
    """Lan and DeMets' Pocock-type spending function: the error rate spent up to information fraction ``t``."""
    return alpha * math.log(1.0 + (math.e - 1.0) * min(max(t, 0.0), 1.0))


@dataclass(frozen=True)
class Looks:
    """A plan of looks: at ``first`` seeds, every ``step`` more, and last at ``most``; ``width``: the narrowness rule."""

    first: int
    most: int
    step: int
    width: float | None = None
    alpha: float = ALPHA

    def __post_init__(self) -> None:
        if not 2 <= self.first <= self.most or self.step < 1:
            raise ValueError(f"looks need 2 <= first <= most and step >= 1, got {self}")

    @property
    def sizes(self) -> list[int]:
        """The number of seeds at each look."""
        sizes = list(range(self.first, self.most, self.step))
        return [*sizes, self.most]

    def look_of(self, n: int) -> int:
        """The index of the look made with ``n`` seeds (the last planned look at or below ``n``; 0 below the first)."""
        return max(0, sum(1 for size in self.sizes if size <= n) - 1)

    def next_size(self, n: int) -> int | None:
        """The number of seeds of the look after one with ``n`` seeds (None at the most)."""
        return next((size for size in self.sizes if size > n), None)

    @property
    def spent(self) -> list[float]:
        """The error rate each look spends (they sum to ``alpha``)."""
        cumulative = [spending(size / self.most, self.alpha) for size in self.sizes]
        return [b - a for a, b in zip([0.0, *cumulative[:-1]], cumulative, strict=True)]

    def critical(self, look: int, paired: int) -> float:
        """c_k of look ``look`` with ``paired`` values: Student's t quantile at 1 - alpha_k / 2 (NaN below two)."""
        if paired < 2:
            return math.nan
        from scipy import special  # stdtrit: Student's t quantile (as comparison.t_half)

        return float(special.stdtrit(paired - 1, 1.0 - self.spent[look] / 2.0))


@dataclass(frozen=True)
class Decision:
    """What one look says of one comparison: its interval (of the log ratio) and whether, and why, it is settled."""

    mean: float
    low: float
    high: float
    reason: str
    """:data:`EXCLUDES`, :func:`narrower`, :data:`MOST` or :data:`NOT_YET`."""

    @property
    def settled(self) -> bool:
        return self.reason != NOT_YET

    @property
    def winner(self) -> bool:
        """Whether it names a winner (its interval excludes 1x)."""
        return self.reason == EXCLUDES


def interval(log_ratios: Sequence[float], looks: Looks, n: int) -> tuple[float, float, float]:
    """Mean log ratio and its sequential interval at the look made with ``n`` seeds (NaN bounds below two values)."""
    values = [v for v in log_ratios if not math.isnan(v)]
    m = len(values)
    if not m:
        return math.nan, math.nan, math.nan
    mean = math.fsum(values) / m
    if m < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (m - 1))
    half = looks.critical(looks.look_of(n), m) * sd / math.sqrt(m)
    return mean, mean - half, mean + half


def decide(log_ratios: Sequence[float], looks: Looks, n: int, bound: str = "") -> Decision:
    """The look made with ``n`` seeds on the paired ``log_ratios`` (entry over baseline); ``bound`` as the comparison's
    ``ratio_bound``: "" exact, "upper" (the ratio is at most this: only a faster entry can be named), "lower" (only a
    slower one), "mixed" (no ratio: never settled but by the most seeds)."""
    mean, low, high = interval(log_ratios, looks, n)
    last = n >= looks.most
    if bound == "mixed" or math.isnan(low):
        return Decision(mean, low, high, MOST if last else NOT_YET)
    if (high < 0.0 and bound in ("", "upper")) or (low > 0.0 and bound in ("", "lower")):
        return Decision(mean, low, high, EXCLUDES)
    if looks.width is not None and bound == "" and max(high - mean, mean - low) <= math.log1p(looks.width):
        return Decision(mean, low, high, narrower(looks.width))
    return Decision(mean, low, high, MOST if last else NOT_YET)
