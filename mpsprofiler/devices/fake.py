"""A fake MPS backend fed with recorded numbers, for testing MPS logic on any machine."""

from __future__ import annotations

from collections.abc import Iterable

from .mps import MpsBackend


class FakeEvent:
    """An event whose completion is scripted: ``done`` says what ``query`` answers."""

    def __init__(self, done: bool = True) -> None:
        self.done = done

    def record(self) -> None:
        return None

    def query(self) -> bool:
        return self.done


class FakeMpsBackend(MpsBackend):
    """Replays recorded ``(current_allocated, driver_allocated)`` pairs, one per reading.

    The last pair repeats once the recording is used up, like a training that has settled.
    """

    def __init__(
        self,
        samples: Iterable[tuple[int, int]],
        recommended_max: int = 21 * 1024**3,
        idle: bool = True,
        chip: str = "M2 Pro",
    ) -> None:
        self._samples = list(samples) or [(0, 0)]
        self._pos = 0
        self._recommended = recommended_max
        self._idle = idle
        self._chip = chip

    def _advance(self) -> tuple[int, int]:
        sample = self._samples[min(self._pos, len(self._samples) - 1)]
        self._pos += 1
        return sample

    def _current_allocated(self) -> int:
        return self._advance()[0]

    def _driver_allocated(self) -> int:
        return self._samples[min(max(self._pos - 1, 0), len(self._samples) - 1)][1]

    def _recommended_max(self) -> int:
        return self._recommended

    def _event(self) -> FakeEvent:
        return FakeEvent(self._idle)

    def name(self) -> str:
        return f"Apple {self._chip} GPU (MPS)"

    def synchronize(self) -> None:
        return None

    def empty_cache(self) -> None:
        return None
