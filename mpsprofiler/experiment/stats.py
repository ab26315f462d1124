"""The arithmetic of an A/B experiment: a speedup with an interval, and its verdict.

Each pair is one run as written (A) and one run with the change (B), back to back, so
both see the same machine load; the pair's speedup is A's steady median step time over
B's. The estimate is the geometric mean of the pair speedups (ratios average on a log
scale), and the interval is Student's t interval of the mean log ratio, pairs being the
units (what each pair shares, the machine's load at that moment, stays inside it).

Not a percentile bootstrap: with the 3 to 5 pairs a ``try`` affords, its interval is about
the smallest to the largest pair ratio, so three pairs that merely all lean one way (1.005,
1.12, 1.55 in a quiet CI run of a compute-bound script) were "proven"; the t interval
widens with few pairs as it should (t = 4.30 for 3 pairs). Student (1908), "The probable
error of a mean", Biometrika 6(1).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

MIN_EFFECT = 0.05
"""Below 5% either way a change is called "no measurable difference" even when the
interval excludes 1: on a shared machine smaller shifts are within run-to-run drift."""
SAME_BAND = 0.10
""""No measurable difference" needs the whole interval within 10% of 1 either way: a wide
interval that straddles 1 says too few pairs, not no difference."""


@dataclass
class Speedup:
    estimate: float
    low: float
    high: float
    pairs: int

    sd: float = 0.0
    """Standard deviation of the pairs' log ratios (for :meth:`pairs_to_settle`)."""

    @property
    def verdict(self) -> str:
        """faster | slower (proven) | same (interval narrow, inside the noise band) | unproven.

        Three pairs at 1.4x, 3.8x and 3.7x have an interval of 0.64-11x: that is not "no
        difference", it is too few pairs to tell."""
        if self.low > 1.0 and self.estimate >= 1.0 + MIN_EFFECT:
            return "faster"
        if self.high < 1.0 and self.estimate <= 1.0 / (1.0 + MIN_EFFECT):
            return "slower"
        if self.low >= 1.0 / (1.0 + SAME_BAND) and self.high <= 1.0 + SAME_BAND:
            return "same"
        return "unproven"

    def pairs_to_settle(self, limit: int = 60) -> int | None:
        """Pairs in all that would likely settle the question at this spread and estimate."""
        mean = abs(math.log(self.estimate))
        room = mean - math.log(1.0 + MIN_EFFECT) if mean > math.log(1.0 + MIN_EFFECT) else (
            math.log(1.0 + SAME_BAND) - mean)
        if room <= 0 or self.sd <= 0:
            return None
        for n in range(max(2, self.pairs + 1), limit + 1):
            if t_quantile(n - 1) * self.sd / math.sqrt(n) <= room:
                return n
        return None


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)
"""Student's t, 97.5th percentile, for 1..30 degrees of freedom (the two-sided 95% interval)."""


def t_quantile(df: int, level: float = 0.95) -> float:
    """The two-sided ``level`` quantile of Student's t: the table at 95%, else (and past 30
    degrees of freedom) the Cornish-Fisher expansion around the normal quantile."""
    if level == 0.95 and df <= len(_T975):
        return _T975[df - 1]
    z = statistics.NormalDist().inv_cdf(0.5 + level / 2.0)
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def speedup(pairs: list[tuple[float, float]], level: float = 0.95) -> Speedup | None:
    """``pairs`` of (A seconds, B seconds); None with fewer than two usable pairs."""
    ratios = [a / b for a, b in pairs if a and b and a > 0 and b > 0]
    if len(ratios) < 2:
        return None
    n = len(ratios)
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / n
    sd = statistics.stdev(logs)
    margin = t_quantile(n - 1, level) * sd / math.sqrt(n)
    return Speedup(estimate=math.exp(mean), low=math.exp(mean - margin), high=math.exp(mean + margin), pairs=n,
                   sd=sd)


def median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0
