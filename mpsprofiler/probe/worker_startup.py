"""The CPU time each forked DataLoader worker spends before its first batch: its start-up.

The sampler (sampler.py) sums the workers' CPU time, and the diagnosis divides it by the
batches they built. Workers that are not persistent start again at every epoch; when each
serves only a few batches per start, that start-up (touching the copied memory of the
training process, seeding, building the fetcher, ``worker_init_fn``) was read as the
batches' own work: a loader of 16 x (2 ms sleep + 0.5 ms CPU) per batch, 8 workers restarted
for 2 batches each per epoch on a busy machine, read "73.3 ms of CPU work a batch" and was
told it "needs more CPU than this machine has" and to use fewer workers, which made it slower.

So the fetcher's construction in a worker is timed: ``_DatasetKind.create_fetcher`` runs
once in each worker right before its loop takes the first index
(torch/utils/data/_utils/worker.py, ``_worker_loop``), and ``time.process_time()`` there is
the worker's CPU since it was forked. Each worker writes (pid, parent pid, seconds) into a
slot of a shared anonymous memory map made before any fork; the sampler reads and clears the
slots. The parent says whose reaped-children CPU time holds the worker's once it has exited
(the sampler's, probe/sampler.py: a worker of 2 batches may start and end between two samples).
Spawned workers (macOS, Windows) do not inherit the map and write nothing: their start-up is
judged from the epochs' first batches instead (diagnosis/analyzers/dataloader.py).

Only the construction is wrapped, never a batch: nothing runs per batch.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from collections.abc import Callable
from typing import Any

SLOTS = 512
"""Worker start-ups held between two samples (0.5-2 s apart): far more than a loader starts."""
_SLOT = struct.Struct("=qqd")  # pid (0: free), parent pid, start-up CPU seconds


class StartupTable:
    """Slots in memory shared with forked children: a worker writes its start-up, the
    sampler in the training process takes them. A slot's CPU is written before its pid,
    and the sampler frees a slot after reading both, so a half-written slot is never read."""

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, SLOTS * _SLOT.size)  # MAP_SHARED | MAP_ANONYMOUS: fork shares it

    def record(self, pid: int, ppid: int, cpu_s: float) -> None:
        start = pid % SLOTS
        for k in range(SLOTS):
            at = ((start + k) % SLOTS) * _SLOT.size
            if struct.unpack_from("=q", self._map, at)[0] == 0:
                struct.pack_into("=qd", self._map, at + 8, ppid, cpu_s)
                struct.pack_into("=q", self._map, at, pid)
                return

    def take(self) -> dict[int, tuple[int, float]]:
        """The start-ups written since the last call, pid: (parent pid, CPU seconds); their
        slots are freed."""
        out: dict[int, tuple[int, float]] = {}
        for n in range(SLOTS):
            at = n * _SLOT.size
            pid, ppid, cpu = _SLOT.unpack_from(self._map, at)
            if pid:
                out[pid] = (ppid, cpu)
                struct.pack_into("=q", self._map, at, 0)
        return out


def install(table: StartupTable) -> Callable[[], None]:
    """Wrap ``torch.utils.data._DatasetKind.create_fetcher`` (a staticmethod; torch looks it
    up at each call) so that a worker process records its CPU time so far; returns the
    uninstaller. In the training process (num_workers=0) the wrapper only asks
    ``get_worker_info()``, once per iterator."""
    from torch.utils import data
    from torch.utils.data import get_worker_info

    kind = data._DatasetKind
    orig = kind.__dict__["create_fetcher"]
    create = orig.__func__
    done = {"pid": 0}

    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        try:
            pid = os.getpid()
            if done["pid"] != pid and get_worker_info() is not None:
                done["pid"] = pid  # an IterableDataset's worker may build its fetcher again
                table.record(pid, os.getppid(), time.process_time())
        except Exception:  # pragma: no cover - in a worker, a missing note: never its failure
            pass
        return create(*args, **kwargs)

    kind.create_fetcher = staticmethod(create_fetcher)  # type: ignore[method-assign]

    def uninstall() -> None:
        kind.create_fetcher = orig  # type: ignore[method-assign]

    return uninstall
