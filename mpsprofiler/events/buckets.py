"""Log buckets of step durations, shared by the probe, the wire format's step aggregates and
the session (re-exported by :mod:`mpsprofiler.events`)."""

from __future__ import annotations

import math

BUCKETS_PER_DECADE = 64
"""Log buckets for step durations: 64 per decade is ~3.7% wide, enough for p50/p90."""


def bucket_of(seconds: float) -> int:
    """Log bucket index of a duration (shared by the probe and the session)."""
    if seconds <= 1e-7:
        return -7 * BUCKETS_PER_DECADE
    return int(math.floor(math.log10(seconds) * BUCKETS_PER_DECADE))


def bucket_value(index: int) -> float:
    """Representative duration (geometric middle) of a log bucket."""
    return 10 ** ((index + 0.5) / BUCKETS_PER_DECADE)
