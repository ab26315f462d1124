"""Every accelerator loss checked, with no sync of its own: a ring of losses on the device.

Reading a CUDA or MPS loss with ``.item()`` waits for the queued work. Instead each
backward pass copies its (detached) loss into the next slot of a small ring allocated on
the loss's device: one tiny device-to-device copy kernel, queued behind the work that
computes the loss, nothing waited for. The ring is read where that costs nothing:

* CUDA: every ``READ_EVERY`` losses the whole ring is copied into a pinned CPU buffer
  with ``non_blocking=True`` and an event is recorded behind the copy. For a CPU
  destination ``copy_kernel_cuda`` (aten/src/ATen/native/cuda/Copy.cu) then issues a
  ``cudaMemcpyAsync`` on the current stream and tells the caching host allocator about
  the pinned block (``record_event``), never ``memcpy_and_sync``; the event's
  ``query()`` (``CUDAEvent::query``, aten/src/ATen/cuda/CUDAEvent.h: ``cudaEventQuery``)
  says, without waiting, when the copy has landed. Later backward passes poll the oldest
  read in flight (one ``query()``) and take its values once it has.
* MPS: only where the probe already waits, on the op-sampled steps whose loss the
  check read anyway (probe/health.py): the ring comes over with one blocking copy, in
  place of that ``.item()``. ``torch.mps.Event.query`` (torch/mps/event.py,
  ``MPSEvent::query`` in aten/src/ATen/mps/MPSEvent.mm) is free, but a non-blocking
  MPS-to-CPU copy is not one path across releases: ``copy_from_mps_``
  (aten/src/ATen/native/mps/operations/Copy.mm) blits into the CPU tensor's own shared
  buffer only for memory pinned by torch's MPS pinned allocator (recent releases), and
  otherwise wraps the host pages in a ``newBufferWithBytesNoCopy`` kept alive by the blit;
  non-blocking MPS copies have silently returned wrong values before (pytorch/pytorch
  issues 139550, 189690). So no read of an MPS ring rests on them: the MPS ring is
  ``RING_MPS`` long, enough for the op sampler's early intervals; where more losses than
  that went by between two sampled steps, the oldest were never read and the report says
  the loss went non-finite inside a window (``exact`` false below).

What a read gives is, per loss written, ``(step, value, exact)`` in the order written:
``exact`` says the loss written just before it was read too (or none was written), so a
first non-finite value there names its step exactly. A ring whose reads fell behind (a
host far ahead of the device, or an MPS interval longer than the ring) loses its oldest
unread losses, never a later one: the first value after such a gap is not exact.

Everything here is done with Python dispatch modes disabled (``_DisableTorchDispatch``,
as probe/health.py reads a loss), so the op sampler never counts the probe's copies.
Any exception is the caller's signal to switch the ring off (probe/health.py).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple

RING_CUDA = 256
"""Slots of a CUDA ring: 16 reads' worth, so a read may wait long behind a busy device."""
READ_EVERY = 16
"""CUDA: losses written between two reads of the ring (a copy of 1 KiB and an event)."""
MAX_READS = 4
"""CUDA: reads in flight at once, each into a pinned buffer of its own."""
RING_MPS = 1024
"""Slots of an MPS ring (4 KiB): read on op-sampled steps only, whose intervals grow
long once op accounting has converged (the report then names a window)."""
EXIT_WAIT_S = 1.0
"""At exit, how long the last CUDA reads may take to land (polled, never a sync)."""


class Reading(NamedTuple):
    step: int
    value: float
    exact: bool
    """The loss written before this one was read too: a first NaN here is at ``step``."""


class _Read:
    __slots__ = ("buffer", "event", "first", "end", "steps")

    def __init__(self, buffer: Any, event: Any, first: int, end: int, steps: list[int]) -> None:
        self.buffer, self.event, self.first, self.end, self.steps = buffer, event, first, end, steps


class LossRing:
    """A ring of losses on one device; see the module docstring.

    ``event``: makes a device event (CUDA); None for a ring read only by :meth:`read_now`
    (MPS). ``buffers``: the host buffers reads land in (pinned on CUDA). ``stream_ok``:
    whether reads are queued on the stream the losses were written on (else the read is
    refused: the caller switches the ring off). ``capturing``: a CUDA graph is being
    captured now (then nothing is written). ``tensor``: the one type of loss taken (a
    tensor subclass may not copy into a plain slot); ``device``: the device of the losses
    taken (the ring's own, unless a test says otherwise)."""

    def __init__(self, ring: Any, tensor: type, *, event: Callable[[], Any] | None = None,
                 buffers: tuple[Any, ...] = (), stream_ok: Callable[[], bool] | None = None,
                 capturing: Callable[[], bool] | None = None, modes: Callable[[], int] | None = None,
                 guard: Callable[[], AbstractContextManager[Any]] | None = None, device: Any = None,
                 read_every: int = READ_EVERY, stream: Any = None) -> None:
        self.size = int(ring.numel())
        self.device = ring.device if device is None else device
        self.read_every = max(1, min(int(read_every), self.size))
        self.dtype = ring.dtype
        self._tensor: Any = tensor
        self._guard = guard or nullcontext
        self._modes = modes
        with self._guard():
            self._slots = list(ring.unbind(0))  # views made once: a write is one copy_ call
        self._ring = ring
        self._steps = [0] * self.size
        self._event = event
        self._free = list(buffers)
        self._stream_ok = stream_ok
        self._stream = stream
        """The stream events are recorded on (the ring device's; None: the current one)."""
        self._capturing = capturing
        self.written = 0
        """Losses written so far."""
        self.covered = 0
        """Losses written before the last read was started (read or lost)."""
        self._ended = 0
        """Where the last read taken ended."""
        self._reads: deque[_Read] = deque()

    @property
    def synchronous(self) -> bool:
        """Read only by :meth:`read_now` (a wait): MPS."""
        return self._event is None

    def write(self, loss: Any, step: int) -> bool:
        """Queue the copy of ``loss`` into the next slot; False: this loss does not fit the
        ring (another type, device or a wider dtype), the caller switches the ring off."""
        if type(loss) is not self._tensor or loss.device != self.device:
            return False
        if loss.dtype != self.dtype and loss.element_size() > self._ring.element_size():
            return False  # a float64 loss would overflow a float32 slot: a false "inf"
        capturing = self._capturing
        if capturing is not None and capturing():
            return True  # inside CUDA graph capture: the copy would be captured, not run
        n = self.written
        slot = n % self.size
        modes = self._modes
        if modes is not None and not modes():
            self._slots[slot].copy_(loss.detach())
        else:
            with self._guard():
                self._slots[slot].copy_(loss.detach())
        self._steps[slot] = step
        self.written = n + 1
        return True

    # -- CUDA: reads that land on their own ----------------------------------------------
    def due(self) -> bool:
        """Enough losses unread for a read, and a buffer free for it."""
        return self.written - self.covered >= self.read_every and bool(self._free)

    def start_read(self) -> bool:
        """Copy the ring into a free host buffer, non-blocking, and record an event behind
        it; False where no read was started (nothing unread, no buffer free)."""
        if self._event is None or not self._free or self.written == self.covered:
            return False
        if self._stream_ok is not None and not self._stream_ok():
            raise RuntimeError("the losses are written on another stream than the ring's")
        buffer = self._free.pop()
        end = self.written
        first = max(self.covered, end - self.size)
        size = self.size
        with self._guard():
            buffer.copy_(self._ring, non_blocking=True)
            event = self._event()
            if self._stream is not None:
                event.record(self._stream)
            else:
                event.record()
        self._reads.append(_Read(buffer, event, first, end, [self._steps[n % size] for n in range(first, end)]))
        self.covered = end
        return True

    def poll(self) -> list[Reading]:
        """The values of the reads that have landed, oldest first; never waits."""
        out: list[Reading] = []
        reads = self._reads
        while reads and reads[0].event.query():
            out.extend(self._take(reads.popleft()))
        return out

    def pending(self) -> int:
        return len(self._reads)

    def _take(self, read: _Read) -> list[Reading]:
        with self._guard():
            values = read.buffer.tolist()
        self._free.append(read.buffer)
        return self._readings(values, read.first, read.end, read.steps)

    def _readings(self, values: list[float], first: int, end: int, steps: list[int]) -> list[Reading]:
        """Reads are taken in the order they were started: a read that starts where the
        last one ended missed nothing; one that starts later lost the losses between."""
        size = self.size
        out = [Reading(step, float(values[n % size]), True) for n, step in zip(range(first, end), steps, strict=True)]
        if out and first != self._ended:
            out[0] = out[0]._replace(exact=False)
        self._ended = end
        return out

    # -- MPS, and the exit -----------------------------------------------------------------
    def read_now(self) -> list[Reading]:
        """Every loss not read yet, with a blocking copy of the ring (a wait for the device:
        MPS, on a step where the probe waits anyway)."""
        end = self.written
        first = max(self.covered, end - self.size)
        if end == first:
            return []
        size = self.size
        steps = [self._steps[n % size] for n in range(first, end)]
        with self._guard():
            values = self._ring.tolist()
        self.covered = end
        return self._readings(values, first, end, steps)

    def flush(self, wait_s: float = EXIT_WAIT_S, sleep: Callable[[float], None] = time.sleep,
              clock: Callable[[], float] = time.monotonic) -> list[Reading]:
        """At exit: what is left unread. MPS: :meth:`read_now` (one wait, after the last
        step). CUDA: a last read, then the reads in flight as they land, polled for at most
        ``wait_s`` (a device that never finishes leaves them unread)."""
        if self._event is None:
            return self.read_now()
        out = self.poll()
        deadline = clock() + wait_s
        while self.written > self.covered:
            if not self._free:
                if clock() >= deadline:
                    return out
                sleep(0.001)
                out.extend(self.poll())
                continue
            self.start_read()
        while self._reads and clock() < deadline:
            out.extend(self.poll())
            if self._reads:
                sleep(0.001)
        out.extend(self.poll())
        return out


def for_loss(loss: Any, modes: Callable[[], int] | None = None) -> LossRing | None:
    """A ring for losses like ``loss`` (a plain tensor on CUDA or MPS), or None."""
    import torch

    if type(loss) is not torch.Tensor:
        return None
    device = loss.device
    guard = getattr(torch._C, "_DisableTorchDispatch", None) or nullcontext
    dtype = torch.float64 if loss.dtype == torch.float64 and device.type == "cuda" else torch.float32
    if device.type == "cuda":
        with guard():
            ring = torch.zeros(RING_CUDA, dtype=dtype, device=device)
            buffers = tuple(torch.empty(RING_CUDA, dtype=dtype, pin_memory=True) for _ in range(MAX_READS))
        stream = torch.cuda.current_stream(device)

        def stream_ok() -> bool:
            return torch.cuda.current_stream(device) == stream

        def event() -> Any:
            return torch.cuda.Event()  # no timing: query() only

        return LossRing(ring, torch.Tensor, event=event, buffers=buffers, stream_ok=stream_ok,
                        capturing=torch.cuda.is_current_stream_capturing, modes=modes, guard=guard, stream=stream)
    if device.type == "mps":
        with guard():
            ring = torch.zeros(RING_MPS, dtype=torch.float32, device=device)
        return LossRing(ring, torch.Tensor, modes=modes, guard=guard)
    return None
