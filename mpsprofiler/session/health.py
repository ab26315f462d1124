"""The session's fold of ``health`` events: training health and device busy time.

The probe sends few of them (see :mod:`mpsprofiler.probe.health` and
:mod:`mpsprofiler.probe.device_time`):

* ``what: "loss"``, once, at the first step whose loss was NaN or infinite, with what
  preceded it (the last finite loss, the learning rate, gradient norms if the script
  clipped them, fp16 autocast and GradScaler use);
* ``what: "loss_checks"`` at exit: how many losses were read and on which steps (every
  step on the CPU, and on CUDA and MPS through the probe's ring of losses where it held
  them all; sampled steps otherwise, and one step in ``every`` from ``sampled_from`` on
  once the loop was steady), out of the run's ``steps``, so a clean run says it was checked;
* ``what: "device_time"``, one per timed step: the device's busy time for the step's work
  (queued behind a hold, see device_time), the host's time for the same window;
* ``what: "copy_time"``, one per op-sampled step with host-to-device copies on CUDA: their
  bytes and device time (probe/copies.py ``CopyTimer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_COPY_SAMPLES = 256
"""Sampled steps' copy times kept (they ride on the op sampler's schedule: a few dozen)."""
MAX_DEVICE_SAMPLES = 512
"""Timed steps kept (a few dozen in a long run: they ride on the op sampler's schedule)."""


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass
class DeviceTimeSample:
    step: int
    busy_s: float
    """Device time of the step's work, queued back to back (no host gaps)."""
    host_s: float
    """Host time over the same window (from the hold to the step's end)."""


@dataclass
class CopyTimeSample:
    """One op-sampled step's host-to-device copies (CUDA)."""

    step: int
    bytes: int
    pinned_bytes: int
    ms: float
    """Device time of the copies, summed (events around each, probe/copies.py)."""
    pageable_ms: float


@dataclass
class HealthStats:
    nonfinite: dict[str, Any] | None = None
    """The first non-finite loss (the probe's ``health`` event, as sent)."""
    loss_checks: int = 0
    loss_checked: str | None = None
    """'every step' (CPU; CUDA and MPS read from a ring of losses, probe/loss_ring.py) or
    'sampled steps' (some losses were never read: no extra sync is added to read them, or
    the loop was steady and one step in ``loss_every`` was checked, probe/backward_sampling.py)."""
    loss_steps: int | None = None
    """The run's steps when the checks were counted (older recordings: None)."""
    loss_sampled_from: int | None = None
    """From this step on one step in ``loss_every`` was checked (None: every step was)."""
    loss_every: int | None = None
    device: list[DeviceTimeSample] = field(default_factory=list)
    device_invalid: int = 0
    """Timed steps whose hold ran out before the step's work was queued (a sync in the step)."""
    device_timing: str | None = None
    """Why device time is not measured, when the probe said so (no timing events, ...)."""
    device_cost_s: float | None = None
    """What device timing said it cost the run (holds, their launches, MPS reads)."""
    device_cost_share: float | None = None
    copies: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Per DataLoader (creation order): its batches in pageable memory on CUDA (probe/copies.py)."""
    copy_time: list[CopyTimeSample] = field(default_factory=list)
    """Op-sampled steps' host-to-device copies on CUDA, with their device time."""

    def feed(self, data: dict[str, Any]) -> None:
        what = data.get("what")
        if what == "loss" and self.nonfinite is None:
            self.nonfinite = {k: v for k, v in data.items() if k not in ("k", "ts", "r")}
        elif what == "loss_checks":
            self.loss_checks = int(_num(data.get("n")) or 0)
            checked = data.get("checked")
            self.loss_checked = checked if isinstance(checked, str) else None
            steps, start, every = _num(data.get("steps")), _num(data.get("sampled_from")), _num(data.get("every"))
            self.loss_steps = int(steps) if steps is not None else None
            self.loss_sampled_from = int(start) if start is not None else None
            self.loss_every = int(every) if every is not None else None
        elif what == "device_time":
            busy, host, step = _num(data.get("busy_s")), _num(data.get("host_s")), _num(data.get("step"))
            if data.get("valid") is False:
                self.device_invalid += 1
            elif busy is not None and host is not None and step is not None and len(self.device) < MAX_DEVICE_SAMPLES:
                self.device.append(DeviceTimeSample(int(step), max(0.0, busy), max(0.0, host)))
        elif what == "device_timing_cost":
            cost, run = _num(data.get("cost_s")), _num(data.get("run_s"))
            self.device_cost_s = max(0.0, cost) if cost is not None else None
            self.device_cost_share = cost / run if cost is not None and run else None
        elif what == "device_timing_off":
            reason = data.get("reason")
            self.device_timing = reason if isinstance(reason, str) else "off"
        elif what == "copy_time":
            step, size, ms = _num(data.get("step")), _num(data.get("bytes")), _num(data.get("ms"))
            if step is not None and size is not None and ms is not None and len(self.copy_time) < MAX_COPY_SAMPLES:
                pinned, pageable_ms = _num(data.get("pinned_bytes")), _num(data.get("pageable_ms"))
                self.copy_time.append(CopyTimeSample(
                    int(step), max(0, int(size)), max(0, int(pinned or 0)), max(0.0, ms), max(0.0, pageable_ms or 0.0)))
        elif what == "copies":
            number = _num(data.get("loader"))
            if number is not None and len(self.copies) < 64:
                self.copies[int(number)] = {k: v for k, v in data.items() if k not in ("k", "ts", "r")}

    def busy_ms(self) -> float | None:
        """The median device busy time of the timed steps, in ms."""
        if not self.device:
            return None
        values = sorted(s.busy_s for s in self.device)
        return values[len(values) // 2] * 1000.0

    def busy_share(self, step_s: float | None) -> float | None:
        """Device busy time over a step of ``step_s`` (the median step), 0..1; None unmeasured."""
        busy = self.busy_ms()
        if busy is None or not step_s or step_s <= 0:
            return None
        return min(1.0, busy / 1000.0 / step_s)
