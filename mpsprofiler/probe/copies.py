"""Batches a DataLoader yields in pageable memory while the model trains on CUDA.

A host-to-device copy from pageable memory goes through a staging buffer the driver pins
for it, and ``non_blocking=True`` cannot overlap it with compute; from pinned memory the
copy is a DMA the GPU runs on its own (https://pytorch.org/docs/stable/data.html#memory-pinning,
https://pytorch.org/docs/stable/notes/cuda.html#use-pinned-memory-buffers). So on CUDA the
first ``CHECKED`` batches of each loader are looked at: their CPU tensors' bytes and
``Tensor.is_pinned()`` (a lookup in the CUDA host allocator, about a microsecond per
tensor). Nothing is looked at on other devices (pinning does nothing on MPS), nor after
the first batches. One ``health`` event per loader says what was found, with the loader's
own ``pin_memory`` setting.

Bytes per batch are measured; the copies' time is not (timing a ``.to()`` would take a
hook on every tensor copy of the script): the rule says so.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .. import events

CHECKED = 16
"""Batches looked at per loader (after its first, fetched while workers start)."""
MAX_TENSORS = 64
"""Tensors looked at per batch (a dict of many fields: the first ones say enough)."""


class PinCheck:
    def __init__(self, emit: Callable[..., None], device_kind: Callable[[], str]) -> None:
        self._emit = emit
        self._kind = device_kind
        self._numbers: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._iters: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
        self._done: set[int] = set()
        self._stats: dict[int, dict[str, Any]] = {}
        self._broken = False

    def on_iter(self, it: Any, loader: Any, number: int) -> None:
        """An iterator of ``loader`` starts (``number``: the loader's creation order, 0 if seen before)."""
        try:
            if number:
                self._numbers[loader] = number
            number = self._numbers.get(loader, 0)
        except TypeError:
            return
        if number and number not in self._done:
            pin = getattr(loader, "pin_memory", None)
            self._iters[it] = {"n": number, "pin": pin if isinstance(pin, bool) else None}

    def on_batch(self, it: Any, batch: Any) -> None:
        """A batch came out of ``it``; a failure here switches this check off, nothing else."""
        if self._broken:
            return
        try:
            self._on_batch(it, batch)
        except Exception:
            self._broken = True

    def _on_batch(self, it: Any, batch: Any) -> None:
        if self._kind() != "cuda":
            return  # the device first: one attribute read per batch, no weak reference made
        entry = self._iters.get(it)
        if entry is None:
            return
        number = entry["n"]
        if number in self._done:
            return
        stats = self._stats.setdefault(number, {"batches": -1, "pageable": 0, "bytes": 0, "pinned_bytes": 0,
                                                "pin": entry["pin"]})
        stats["batches"] += 1
        if stats["batches"] == 0:
            return  # the first batch: workers starting (and a warm-up for the allocator)
        pageable, pinned = _pinned_bytes(batch)
        stats["bytes"] += pageable + pinned
        stats["pinned_bytes"] += pinned
        if pageable:
            stats["pageable"] += 1
        if stats["batches"] >= CHECKED:
            self._report(number)

    def _report(self, number: int) -> None:
        """One event per loader, with the loader's own ``pin_memory`` (left out where the
        loader has no boolean one), however many batches were looked at."""
        self._done.add(number)
        stats = self._stats.pop(number)
        n = max(1, stats["batches"])
        pin = {"pin_memory": stats["pin"]} if isinstance(stats["pin"], bool) else {}
        self._emit(events.KIND_HEALTH, what="copies", loader=number, batches=stats["batches"],
                   pageable_batches=stats["pageable"], bytes_per_batch=stats["bytes"] // n,
                   pinned_bytes_per_batch=stats["pinned_bytes"] // n, **pin)

    def close(self) -> None:
        """At exit: the loaders closed before ``CHECKED`` batches, with what was seen."""
        for number in list(self._stats):
            if self._stats[number]["batches"] > 0:
                self._report(number)


def _pinned_bytes(batch: Any) -> tuple[int, int]:
    """(pageable bytes, pinned bytes) of the CPU tensors in a batch (nested two deep)."""
    import torch

    pageable = pinned = 0
    seen = 0
    stack = [(batch, 0)]
    while stack and seen < MAX_TENSORS:
        item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            seen += 1
            if item.device.type != "cpu":
                continue
            size = item.numel() * item.element_size()
            if item.is_pinned():
                pinned += size
            else:
                pageable += size
        elif depth < 3 and isinstance(item, (list, tuple)):
            stack.extend((x, depth + 1) for x in item)
        elif depth < 3 and isinstance(item, dict):
            stack.extend((x, depth + 1) for x in item.values())
    return pageable, pinned
