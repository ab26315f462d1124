"""A bounded time series: old points are thinned, never the recent ones dropped.

When full, every other point is discarded and only every 2nd (then 4th, ...) new point
is kept. A million-step run thus keeps at most ``capacity`` evenly spread points with
memory fixed up front, and charts still span the whole run.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Series(Generic[T]):
    def __init__(self, capacity: int = 2048) -> None:
        if capacity < 4:
            raise ValueError("capacity must be at least 4")
        self.capacity = capacity
        self._points: list[T] = []
        self._stride = 1
        self._skipped = 0
        self.total = 0
        self.last: T | None = None

    def append(self, point: T) -> None:
        self.total += 1
        self.last = point
        if self._skipped + 1 < self._stride:
            self._skipped += 1
            return
        self._skipped = 0
        self._points.append(point)
        if len(self._points) >= self.capacity:
            self._points = self._points[::2]
            self._stride *= 2

    def points(self, include_last: bool = True) -> list[T]:
        """The kept points, plus the newest one even when thinning skipped it."""
        pts = list(self._points)
        if include_last and self.last is not None and (not pts or pts[-1] is not self.last):
            pts.append(self.last)
        return pts

    def __len__(self) -> int:
        return len(self._points)

    def __iter__(self) -> Iterator[T]:
        return iter(self.points())
