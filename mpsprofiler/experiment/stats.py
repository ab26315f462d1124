"""The arithmetic of an A/B experiment: a speedup with an interval, and its verdict.

Each pair is one run as written (A) and one run with the change (B), back to back, so
both see the same machine load; the pair's speedup is A's steady median step time over
B's. The estimate is the geometric mean of the pair speedups (ratios average on a log
scale), and the interval is a percentile bootstrap over pairs: resampling whole pairs
keeps what each pair shares (the machine's load at that moment). Efron & Tibshirani,
"An Introduction to the Bootstrap", ch. 13 (percentile intervals).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

RESAMPLES = 4000
MIN_EFFECT = 0.05
"""Below 5% either way a change is called "no measurable difference" even when the
interval excludes 1: on a shared machine smaller shifts are within run-to-run drift."""


@dataclass
class Speedup:
    estimate: float
    low: float
    high: float
    pairs: int

    @property
    def verdict(self) -> str:
        """faster | slower | same."""
        if self.low > 1.0 and self.estimate >= 1.0 + MIN_EFFECT:
            return "faster"
        if self.high < 1.0 and self.estimate <= 1.0 / (1.0 + MIN_EFFECT):
            return "slower"
        return "same"


def geometric_mean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def speedup(pairs: list[tuple[float, float]], level: float = 0.95, seed: int = 0) -> Speedup | None:
    """``pairs`` of (A seconds, B seconds); None with fewer than two usable pairs."""
    ratios = [a / b for a, b in pairs if a and b and a > 0 and b > 0]
    if len(ratios) < 2:
        return None
    rng = random.Random(seed)
    n = len(ratios)
    logs = [math.log(r) for r in ratios]
    means = sorted(sum(rng.choice(logs) for _ in range(n)) / n for _ in range(RESAMPLES))
    tail = (1.0 - level) / 2.0
    low = math.exp(means[int(tail * (RESAMPLES - 1))])
    high = math.exp(means[int((1.0 - tail) * (RESAMPLES - 1))])
    return Speedup(estimate=geometric_mean(ratios), low=low, high=high, pairs=n)


def median(values: list[float]) -> float | None:
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2.0
