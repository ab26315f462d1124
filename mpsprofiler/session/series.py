"""A bounded time series: old points are thinned, never the recent ones dropped.

When full, every other point is discarded and only every 2nd (then 4th, ...) new point
is kept. A million-step run thus keeps at most ``capacity`` evenly spread points with
memory fixed up front, and charts still span the whole run.

With ``keep`` the point kept from each group is the one it chooses (the slowest step, for
the step series) rather than the group's last, so a pause among thousands of fast steps
stays on the chart; every kept point is still a real one, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Series(Generic[T]):
    def __init__(self, capacity: int = 2048, keep: Callable[[T, T], T] | None = None) -> None:
        if capacity < 4:
            raise ValueError("capacity must be at least 4")
        self.capacity = capacity
        self.keep = keep
        self._points: list[T] = []
        self._stride = 1
        self._skipped = 0
        self._best: T | None = None
        self.total = 0
        self.last: T | None = None

    def append(self, point: T) -> None:
        self.total += 1
        self.last = point
        keep = self.keep
        if keep is not None and self._best is not None:
            point = keep(self._best, point)
        if self._skipped + 1 < self._stride:
            self._skipped += 1
            self._best = point
            return
        self._skipped = 0
        self._best = None
        self._points.append(point)
        if len(self._points) >= self.capacity:
            pts = self._points
            if keep is None:
                self._points = pts[::2]
            else:
                self._points = [keep(a, b) for a, b in zip(pts[::2], pts[1::2], strict=False)]
                if len(pts) % 2:
                    self._points.append(pts[-1])
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
