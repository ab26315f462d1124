"""Device busy time of a step, on CUDA and MPS, from the backends' own timing events.

Two events around a step measure its *span* on the device, idle gaps included: while
Python launches tiny kernels one by one the device waits between them, and the span is
the host's time again. To measure only the time the device works, the step's work is
queued behind a *hold* (``backend.hold``: CUDA's ``torch.cuda._sleep`` spin kernel, on
MPS a few matrix products on a buffer of the probe's own) recorded between two events,
``h0`` and ``s``; ``b`` is recorded right after ``s`` and ``e`` at the step's end. If ``s``
has not completed when the host records ``e``, the device was still in the hold when the
host had queued the whole step: the step's work then ran back to back and ``b -> e`` is
its busy time, exactly. If ``s`` had completed, a sync in the step (``loss.item()``) or a
hold too short let the device drain: that reading is dropped (``valid: false``), and the
next hold is longer. (Each event is used in one ``elapsed_time`` call only, as start or
as end: torch's MPS ``MPSEventPool::elapsedTime`` waits for the end event's completion
callback, ``MPSEvent::waitForCpuSync``, which a second wait on the same event would not
get again.)

A ``loss.item()`` right after ``optimizer.step()`` belongs to the next step and drains
its hold at once; so when the step's first DataLoader fetch ends and the hold is gone,
it is re-armed there (the forward pass starts after the fetch).

Which steps: from step 3 on, any step the op sampler does not sample (its decision, see
:func:`.health.sampling_step`: a sampled step's dispatch mode slows the host), as soon
as the run has paid for the last readings (the budget below): the readings spread over
the run at the rate the budget allows, and keep coming after op accounting has converged
and samples nearly stopped (a 300-step run of 9 ms launch-bound steps on an H200 got one
reading when timing followed the op samples only, too few for the host-bound finding).

When the readings are read, and what that costs:

* CUDA: never a sync. ``torch.cuda.Event.elapsed_time`` (aten/src/ATen/cuda/CUDAEvent.h,
  ``CUDAEvent::elapsed_time``) only reads two completed events (it refuses incomplete
  ones), so completed readings are found by ``query()`` at later step boundaries.
* MPS: ``torch.mps.Event.elapsed_time`` *synchronises*: ``MPSEventPool::elapsedTime``
  (pytorch/pytorch aten/src/ATen/mps/MPSEvent.mm) first runs
  ``m_default_stream->synchronize(SyncType::COMMIT_AND_WAIT)``, i.e. waits until every
  kernel queued so far has run. So on MPS the readings are read only at the opening
  boundary of the next op-sampled step (where the loss check, probe/health.py, reads the
  loss, a sync of that step anyway) and once at exit, never on another step; the wait
  is measured and counted in the budget below. (``query()`` is free on MPS:
  ``MPSEvent::query`` compares the shared event's signalled value.) MPS event times are
  taken by a CPU listener when the GPU signals the event (``MPSEvent::recordLocked``'s
  ``notifyLocked`` block calls ``getTime()``), so they carry that listener's latency.

The budget: what timing costs the run is measured and held within ``COST_SHARE`` of the
training time so far (all steps' time, timed or not): the host time spent queuing each
hold (on MPS up to ``HOLD_MAX_PRODUCTS`` launches), the time a hold delayed the device's
work (its whole length on a busy device or when a sync waited for it; on an idle
device only what the hold and the step's work ran past the host's own time), and on MPS
the wait of reading the events. Timing pauses while that cost is over the share and
resumes once the run has paid for it; readings in flight (at most two) are counted at
the hold's length until read. Besides, timing stops after ``BUSY_ENOUGH`` readings of a
busy device, and after ``MAX_SAMPLES`` in all.

Timing events: ``torch.cuda.Event(enable_timing=True)``; ``torch.mps.Event(
enable_timing=True)`` where the installed torch has it (``devices.mps.timing_supported``,
read at run time: torch.mps.Event came in torch 2.1).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import events
from ..devices import DeviceBackend

FIRST_STEP = 3
"""Steps 0-2 are warm-up (kernel compilation, autotuning, allocator growth)."""
HOLD_STEPS = 1.5
"""The first hold is 1.5 median steps long; later ones 1.3 times the host time the last
timed step took to queue its work (the host must finish queuing inside the hold)."""
HOLD_HOST = 1.3
MIN_HOLD_S = 0.002
MAX_HOLD_S = 0.25
MAX_HOLD_FACTOR = 16.0
"""Each reading a sync drained doubles the next hold, up to this factor (and
``MAX_HOLD_S``); the budget pays for it like any hold."""
MAX_SAMPLES = 32
"""Valid readings per run: enough for a median; later ones would only cost holds."""
BUSY_ENOUGH = 3
"""Readings that found the device busy through the step (busy >= ``BUSY_SHARE`` of the
median step): the run is device-bound, and each further hold would delay it by its
length; timing stops there. (On an idle device a hold costs nothing: it fills idle time.)"""
BUSY_SHARE = 0.8
MAX_INVALID = 3
"""Readings in a row that a sync drained: the loop syncs inside every step; stop trying."""
LAUNCH_PACED = 1.2
"""A drained hold whose device time was at most this times the host time of queuing it
ran as fast as the host launched it: it never was ahead of the host (no sync needed)."""
COST_SHARE = 0.005
"""What device timing may cost: 0.5% of the training time so far, counted apart from op
accounting's budget. A hold costs its length only on a busy device, where timing stops
after ``BUSY_ENOUGH`` readings (a GPU-bound loop pays ~3 holds of 1.5 steps once); on an
idle device (a host-bound loop) it fills idle time."""


class DeviceTimer:
    def __init__(self, emit: Callable[..., None], backend: Callable[[], DeviceBackend],
                 ops_step: Callable[[], int | None], clock: Callable[[], float]) -> None:
        self._emit = emit
        self._backend = backend
        self._ops_step = ops_step
        self._clock = clock
        self._prev_ops: int | None = None
        self._durations: deque[float] = deque(maxlen=32)
        self._armed: dict[str, Any] | None = None
        self._pending: list[dict[str, Any]] = []
        self._hold_factor = 1.0
        self._last_host: float | None = None
        self._busy_readings = 0
        self.samples = 0
        self._invalid_run = 0
        self.off: str | None = None
        self.run_s = 0.0
        """Seconds of all steps so far (the training time the budget is a share of)."""
        self.cost_s = 0.0
        """Measured seconds timing cost the run so far (see the module docstring)."""
        self.paused = 0
        """Timed steps left out because the cost was over ``COST_SHARE`` of ``run_s``."""
        self.reads_synced = 0
        """Times reading events synchronised the device (MPS only)."""
        self._backlog = 0.0
        """Seconds of hold an idle device still had to work off when the reading came in,
        not charged yet: charged as the following steps measurably run long (see _drain)."""
        self._backlog_steps = 0

    # -- the step tracker's calls ---------------------------------------------------
    def on_boundary(self, next_step: int, last: float | None) -> None:
        """At every step boundary (after the op sampler's listener): a few reads, unless
        a timed step ends or begins."""
        if self.off is not None or not self._backend().asynchronous:
            return  # the CPU: nothing to time (two attribute reads per step)
        if last is not None:
            self.run_s += last
            if self._backlog_steps:
                self._drain(last, sampled=self._prev_ops == next_step - 1)
            if self._armed is None and self._prev_ops != next_step - 1 and next_step > 1:
                self._durations.append(last)  # not step 0, not timed (a hold), not op-sampled (slow host)
        if self._armed is not None:
            self._end(self._armed)
            self._armed = None
        ops = self._ops_step()
        if self._pending:
            self._collect(sampled=ops == next_step)
        self._prev_ops = ops
        if ops == next_step or self.off is not None:
            return
        if next_step >= FIRST_STEP and len(self._pending) < 2:
            if self._spent() > COST_SHARE * self.run_s:
                self.paused += 1  # the run has not paid for the last holds yet
            else:
                self._arm(next_step)

    def on_fetch_end(self) -> None:
        """A DataLoader batch arrived in a timed step: if a sync drained the hold since the
        step began, hold again here."""
        armed = self._armed
        if armed is None or armed.get("rearmed") or not armed["s"].query():
            return
        armed["rearmed"] = True
        self._hold(armed)

    # -- timing ---------------------------------------------------------------------
    def _spent(self) -> float:
        """Measured cost, and for readings not read yet their hold's length and queuing time,
        and a backlog still draining at its whole length."""
        return self.cost_s + self._backlog + sum(float(p["asked"]) + float(p["launch_s"]) for p in self._pending)

    def _median(self) -> float | None:
        """The median of the recent plain steps (neither timed nor op-sampled), or None."""
        return sorted(self._durations)[len(self._durations) // 2] if self._durations else None

    def _drain(self, last: float, sampled: bool) -> None:
        """A step while a hold's backlog drains: what it ran past the median step is what
        the backlog cost (the host waited for it at a sync); once the idle device has had
        the time to work the backlog off, the rest cost nothing. An op-sampled step runs
        long for its own reason (its dispatch mode; op accounting counts that): it drains
        the backlog and is charged nothing here."""
        median = self._median()
        median = last if median is None else median
        charge = 0.0 if sampled else min(self._backlog, max(0.0, last - median))
        self.cost_s += charge
        self._backlog -= charge
        self._backlog_steps -= 1
        if not self._backlog_steps:
            self._backlog = 0.0

    def _arm(self, step: int) -> None:
        backend = self._backend()
        if not backend.asynchronous or not self._durations:
            return
        probe = backend.timing_event()
        if probe is None:
            self._switch_off("the installed torch has no timing events for this device")
            return
        armed: dict[str, Any] = {"step": step, "backend": backend, "launch_s": 0.0, "asked": 0.0}
        if not self._hold(armed):
            self._switch_off("this device cannot queue a hold (no sleep kernel)")
            return
        self._armed = armed

    def _hold(self, armed: dict[str, Any]) -> bool:
        backend = armed["backend"]
        median = self._median() or 0.0  # _arm arms only with durations, so never None here
        base = HOLD_HOST * self._last_host if self._last_host else HOLD_STEPS * median
        want = min(MAX_HOLD_S, max(MIN_HOLD_S, base * self._hold_factor))
        t = self._clock()
        h0 = backend.timing_event()
        h0.record()
        asked = backend.hold(want)
        if asked is None:
            return False
        s = backend.timing_event()
        s.record()
        b = backend.timing_event()
        b.record()
        now = self._clock()
        armed["launch_s"] += now - t  # queuing the hold (up to HOLD_MAX_PRODUCTS launches on MPS)
        armed["asked"] += asked
        armed.update(h0=h0, s=s, b=b, held=asked, t0=now)
        return True

    def _end(self, armed: dict[str, Any]) -> None:
        e = armed["backend"].timing_event()
        e.record()
        armed["host_s"] = self._clock() - armed["t0"]
        armed["valid"] = not armed["s"].query()
        armed["e"] = e
        self._pending.append(armed)

    def _collect(self, sampled: bool, at_exit: bool = False) -> None:
        """Read the pending readings where that costs no sync of its own (module docstring)."""
        if self._pending and getattr(self._pending[0]["backend"], "elapsed_time_syncs", False):
            if not (sampled or at_exit):
                return  # MPS: only on an op-sampled step, or at exit
            done = [p for p in self._pending if p["e"].query()] if at_exit else list(self._pending)
            synced = bool(done)
        else:
            done = [p for p in self._pending if p["e"].query()]
            synced = False
        if synced:
            self.reads_synced += 1
        for item in done:
            self._pending.remove(item)
            self._report(item)

    def _report(self, item: dict[str, Any]) -> None:
        t = self._clock()
        hold_s = item["h0"].elapsed_time(item["s"]) / 1000.0  # on MPS: the sync (waits for the queue)
        busy_s = item["b"].elapsed_time(item["e"]) / 1000.0
        read_s = self._clock() - t
        item["backend"].held(item["held"], hold_s)
        valid = bool(item["valid"])
        host_s = item["host_s"]
        paced = False
        if valid:
            self.samples += 1
            self._invalid_run = 0
            self._last_host = host_s
            median = self._median()
            if median and busy_s >= BUSY_SHARE * median:
                self._busy_readings += 1
            # what the hold and the step's work ran past the host's time for a step (a
            # host slowed down in the timed step, by a full launch queue, counts as the
            # usual step: then the whole hold is counted)
            host = min(host_s, median) if median else host_s
            delay = min(hold_s, max(0.0, hold_s + busy_s - host))
            idle = median - busy_s if median else 0.0
            if delay > 0 and median and idle > 0 and busy_s < BUSY_SHARE * median \
                    and not getattr(item["backend"], "elapsed_time_syncs", False):
                # CUDA, a device idle most of the step: it works the hold's backlog off in
                # its idle time within a few steps; only a sync in those steps makes the host
                # wait for it, which shows as those steps' excess over the median (_drain)
                self._backlog += delay
                self._backlog_steps = max(self._backlog_steps, math.ceil(self._backlog / idle) + 1)
                delay = 0.0
        else:
            self._invalid_run += 1
            self._hold_factor = min(self._hold_factor * 2.0, MAX_HOLD_FACTOR)
            delay = hold_s  # a sync in the step waited for the hold
            paced = hold_s <= LAUNCH_PACED * item["launch_s"]  # the device ran it as fast as it came
        self.cost_s += item["launch_s"] + delay + read_s
        self._emit(events.KIND_HEALTH, what="device_time", step=item["step"], busy_s=round(busy_s, 7),
                   host_s=round(host_s, 7), hold_s=round(hold_s, 7), valid=valid,
                   rearmed=bool(item.get("rearmed")))
        if self._invalid_run >= MAX_INVALID:
            self._switch_off("the hold could not get ahead of the host (launching its work took as long as "
                             "running it)" if not valid and paced else
                             "a sync inside every timed step drained the hold (the step waits for the device)")
        elif self._busy_readings >= BUSY_ENOUGH or self.samples >= MAX_SAMPLES:
            self.off = "enough readings"  # quietly: the readings sent say it all

    def _switch_off(self, reason: str) -> None:
        if self.off is None:
            self.off = reason
            self._emit(events.KIND_HEALTH, what="device_timing_off", reason=reason)

    def close(self) -> None:
        """At exit: report the readings whose events completed; never read one that has
        not. (On MPS that read is one sync, after the training's last step: it waits for
        whatever work the script left queued.)"""
        if self._armed is not None:
            self._armed = None  # the loop ended inside a timed step: nothing to say
        if self._pending:
            self._collect(sampled=False, at_exit=True)
        if self.run_s > 0:
            self._emit(events.KIND_HEALTH, what="device_timing_cost", cost_s=round(self.cost_s, 6),
                       run_s=round(self.run_s, 6), paused=self.paused, readings=self.samples)
