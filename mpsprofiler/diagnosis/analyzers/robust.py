"""Robust trend of a noisy series: Theil–Sen slope plus a Mann–Kendall significance.

Memory figures jump around (allocator caches, garbage collection, a sample that lands
mid-step), so a least-squares slope would call one spike a leak. The Theil–Sen slope is
the median of all pairwise slopes: up to ~29% of wild points do not move it. The
Mann–Kendall test asks a separate question, "does the series rise consistently?", and
answers with a probability-like ``significance`` (0.5 = no trend, near 1 = rising),
so a rule can require both a large growth *and* a consistent one. Series are thinned
to at most ``MAX_POINTS`` evenly spaced points first: both are O(n²).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import TypeVar

MAX_POINTS = 128
"""128 points: ~8,000 pairs, a few ms in pure Python, so live re-evaluation stays cheap."""

T = TypeVar("T")


@dataclass(frozen=True)
class Trend:
    slope: float
    """Units of y per unit of x (Theil–Sen)."""
    significance: float
    """Mann–Kendall: P(rising) as the normal CDF of the test's z score (0..1)."""
    n: int
    x_span: float
    first: float
    """Level at the start of the span, on the fitted line (robust to a first outlier)."""

    @property
    def growth(self) -> float:
        """Growth over the whole span according to the slope."""
        return self.slope * self.x_span


def thin(items: Sequence[T], limit: int = MAX_POINTS) -> list[T]:
    """At most ``limit`` evenly spaced items, always keeping the first and the last."""
    n = len(items)
    if n <= limit:
        return list(items)
    step = (n - 1) / (limit - 1)
    return [items[round(k * step)] for k in range(limit)]


def theil_sen(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the pairwise slopes (pairs with equal x are skipped)."""
    slopes = []
    n = len(xs)
    for a in range(n):
        xa, ya = xs[a], ys[a]
        for b in range(a + 1, n):
            dx = xs[b] - xa
            if dx != 0:
                slopes.append((ys[b] - ya) / dx)
    return median(slopes) if slopes else 0.0


def mann_kendall(ys: Sequence[float]) -> float:
    """One-sided significance of an upward trend, with the tie correction.

    A flat series (all ties) has no variance and gets 0.0: it is certainly not rising.
    """
    n = len(ys)
    if n < 3:
        return 0.0
    s = 0
    for a in range(n):
        ya = ys[a]
        for b in range(a + 1, n):
            d = ys[b] - ya
            s += (d > 0) - (d < 0)
    counts: dict[float, int] = {}
    for y in ys:
        counts[y] = counts.get(y, 0) + 1
    ties = sum(t * (t - 1) * (2 * t + 5) for t in counts.values() if t > 1)
    var = (n * (n - 1) * (2 * n + 5) - ties) / 18.0
    if var <= 0:
        return 0.0
    if s > 0:
        z = (s - 1) / math.sqrt(var)
    elif s < 0:
        z = (s + 1) / math.sqrt(var)
    else:
        z = 0.0
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))


def trend(xs: Sequence[float], ys: Sequence[float], limit: int = MAX_POINTS) -> Trend | None:
    """Trend of y over x (x increasing), or None with fewer than 3 points or no x span."""
    pairs = thin([(float(x), float(y)) for x, y in zip(xs, ys, strict=False)], limit)
    if len(pairs) < 3:
        return None
    px = [p[0] for p in pairs]
    py = [p[1] for p in pairs]
    span = px[-1] - px[0]
    if span <= 0:
        return None
    slope = theil_sen(px, py)
    first = median(y - slope * (x - px[0]) for x, y in pairs)
    return Trend(slope=slope, significance=mann_kendall(py), n=len(pairs), x_span=span, first=first)
