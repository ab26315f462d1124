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

Bytes per batch are measured here; the copies' time by :class:`CopyTimer`, on the op
sampler's steps only (its dispatch mode sees every ``.to("cuda")`` of those steps).
"""

from __future__ import annotations

import time
import weakref
from collections import deque
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
        self.open: set[int] = set()
        """Loaders (by number) with an iterator registered whose check is not done: while
        empty, the DataLoader hook skips :meth:`on_batch` (one attribute read per batch, not
        a call, once every loader's first batches were looked at)."""
        self._off = False

    def not_on_cuda(self) -> None:
        """The training's device is known (its first optimizer step) and is not CUDA: no
        batch will be looked at, so no loader is open either, and the DataLoader hook's
        test at every batch stops at the empty set instead of asking for the device (on
        MPS and CPU, every batch of the run)."""
        self._off = True
        self.open.clear()

    def on_iter(self, it: Any, loader: Any, number: int) -> None:
        """An iterator of ``loader`` starts (``number``: the loader's creation order, 0 if seen before)."""
        if self._off:
            return
        try:
            if number:
                self._numbers[loader] = number
            number = self._numbers.get(loader, 0)
        except TypeError:
            return
        if number and number not in self._done:
            pin = getattr(loader, "pin_memory", None)
            self._iters[it] = {"n": number, "pin": pin if isinstance(pin, bool) else None}
            self.open.add(number)

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
        self.open.discard(number)
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


MAX_TIMED = 64
"""Copies timed per sampled step (two events each); more are counted, not timed."""
MAX_STEPS = 8
"""Sampled steps whose copies wait to be read; an older one not landed yet is dropped."""
EXIT_WAIT_S = 0.5


class CopyTimer:
    """Host-to-device copy time on CUDA, on op-sampled steps, never a sync.

    The op sampler's mode (probe/ops_mode.py) hands each copy op of a sampled step here:
    :meth:`start` before it runs, :meth:`end` after. For a copy whose source is a CPU
    tensor and whose destination is CUDA, two ``torch.cuda.Event(enable_timing=True)``
    are recorded around it on the destination's current stream, the stream
    ``copy_kernel_cuda`` (aten/src/ATen/native/cuda/Copy.cu) queues its
    ``cudaMemcpyAsync`` on (a pageable source: staged through a buffer the driver pins,
    and ``memcpy_and_sync`` when blocking). The events are read with ``elapsed_time``
    only once ``query()`` says the second has completed (``CUDAEvent::elapsed_time``,
    aten/src/ATen/cuda/CUDAEvent.h, refuses incomplete events; ``query`` is
    ``cudaEventQuery``, no wait): at the next sampled step's first copy, or at exit
    (polled for ``EXIT_WAIT_S`` at most). One ``health`` event ``copy_time`` per sampled
    step with copies: their count, bytes, pinned bytes and total device milliseconds.

    MPS and CPU destinations are left alone (no event is made). Any exception switches
    the timer off for the run, silently."""

    def __init__(self, emit: Callable[..., None], step: Callable[[], int],
                 event: Callable[[], Any] | None = None, stream: Callable[[Any], Any] | None = None,
                 capturing: Callable[[], bool] | None = None) -> None:
        """``event``/``stream``/``capturing``: a timing event, the current stream of a
        device, whether a CUDA graph is being captured (torch's CUDA ones unless a test
        fakes them)."""
        self._emit = emit
        self._step = step
        self._event = event
        self._stream = stream
        self._capturing = capturing
        self.ops: frozenset[Any] = frozenset()
        """The copy ops (overloads) :meth:`start` is asked about."""
        self.off = False
        self._steps: deque[dict[str, Any]] = deque()
        try:
            import torch

            aten = torch.ops.aten
            self.ops = frozenset({aten._to_copy.default, aten.copy_.default, aten.to.device, aten.to.dtype_layout,
                                  aten.to.other})
            if self._event is None:
                self._event = lambda: torch.cuda.Event(enable_timing=True)
            if self._stream is None:
                self._stream = torch.cuda.current_stream
            if self._capturing is None:
                self._capturing = torch.cuda.is_current_stream_capturing
        except Exception:
            self.off = True

    def start(self, func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
        """Before a copy op of a sampled step: its mark (events recorded), or None."""
        if self.off:
            return None
        try:
            src, dst = _h2d(func, args, kwargs)
            if src is None or (self._capturing is not None and self._capturing()):
                return None  # not host-to-CUDA; or inside CUDA graph capture: no event there
            step = self._step()
            if self._steps and self._steps[0]["step"] != step:
                self._collect()
            entry = self._steps[-1] if self._steps and self._steps[-1]["step"] == step else None
            if entry is None:
                if len(self._steps) >= MAX_STEPS:
                    self._steps.popleft()  # never landed (a stream that never runs): dropped
                entry = {"step": step, "copies": [], "untimed": 0}
                self._steps.append(entry)
            if len(entry["copies"]) >= MAX_TIMED:
                entry["untimed"] += 1
                return None
            assert self._event is not None and self._stream is not None
            stream = self._stream(dst)
            e0, e1 = self._event(), self._event()
            e0.record(stream)
            mark = [src.numel() * src.element_size(), bool(src.is_pinned()), e0, e1, stream]
            entry["copies"].append(mark)
            return mark
        except Exception:
            self.off = True
            return None

    def end(self, mark: Any) -> None:
        """After the copy op ran: the second event, behind the copy."""
        try:
            mark[3].record(mark[4])
            mark[4] = None
        except Exception:
            self.off = True

    def _collect(self, final: bool = False) -> None:
        """Report the earlier sampled steps whose copies have all landed (step order)."""
        current = None if final else self._step()
        while self._steps and self._steps[0]["step"] != current:
            entry = self._steps[0]
            copies = entry["copies"]
            if any(c[4] is not None for c in copies):
                self._steps.popleft()  # a copy that raised before its end: nothing to say
                continue
            if not all(c[3].query() for c in copies):
                return
            self._steps.popleft()
            times = [float(c[2].elapsed_time(c[3])) for c in copies]
            ms = sum(times)
            pageable_ms = sum(t for t, c in zip(times, copies, strict=True) if not c[1])
            self._emit(events.KIND_HEALTH, what="copy_time", step=entry["step"], copies=len(copies),
                       untimed=entry["untimed"], bytes=sum(int(c[0]) for c in copies),
                       pinned_bytes=sum(int(c[0]) for c in copies if c[1]), ms=round(ms, 4),
                       pageable_ms=round(pageable_ms, 4))

    def close(self, wait_s: float = EXIT_WAIT_S, sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> None:
        """At exit: report what has landed, waiting (polling) ``wait_s`` at most."""
        if self.off:
            return
        deadline = clock() + wait_s
        try:
            while True:
                self._collect(final=True)
                if not self._steps or clock() >= deadline:
                    return
                sleep(0.002)
        except Exception:
            self.off = True


def _h2d(func: Any, args: Any, kwargs: dict[str, Any]) -> tuple[Any, Any]:
    """(CPU source tensor, CUDA destination device) of a host-to-device copy op, else
    (None, None). ``copy_(dst, src)``; ``_to_copy(src, device=...)``; the ``to``
    overloads (composite: they reach a dispatch mode only where they do not decompose)."""
    name = getattr(func, "__name__", "")
    if name.startswith("copy_"):
        if len(args) < 2:
            return None, None
        dst_t, src = args[0], args[1]
        device = getattr(dst_t, "device", None)
    else:
        src = args[0] if args else None
        device = kwargs.get("device")
        if device is None and len(args) > 1:
            other = args[1]
            device = getattr(other, "device", other)  # to.other(tensor), to.device(device)
    if isinstance(device, str) and device.startswith("cuda"):
        import torch

        device = torch.device(device)
    if getattr(device, "type", None) != "cuda" or getattr(getattr(src, "device", None), "type", None) != "cpu":
        return None, None
    return src, device


def install_copy_timer(emit: Callable[..., None], step: Callable[[], int]) -> tuple[CopyTimer, Callable[[], None]]:
    """A copy timer handed to the op sampler's mode (``OpMode.copy_timer``), and its removal."""
    from .ops_mode import OpMode

    timer = CopyTimer(emit, step)
    OpMode.copy_timer = timer

    def uninstall() -> None:
        OpMode.copy_timer = None

    return timer, uninstall
