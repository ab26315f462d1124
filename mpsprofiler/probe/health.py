"""Training health: the first step whose loss is NaN or infinite, and what preceded it.

The loss is the tensor a backward pass starts from (``loss.backward()`` hands it to the
autograd engine's entry, wrapped in :mod:`.backward`): a scalar floating tensor. Reading
its value is free on the CPU (the op already ran) and a device sync on CUDA or MPS
(``Tensor.item`` waits for the queued work). So:

* a loss on the CPU is read at every backward pass (about a microsecond);
* a loss on CUDA or MPS (a plain tensor) is copied into a ring of losses on its device
  at every backward pass (one tiny copy kernel, see :mod:`.loss_ring`): on CUDA the ring
  is read by non-blocking copies polled with ``Event.query()``, on MPS where the probe
  waits anyway (the sampled steps below). The first non-finite loss is then named at its
  own step (``checked: "every step"``), a few steps after it ran; an MPS ring that
  overflowed between two sampled steps names the window instead (``"sampled steps"``).
  Any failure of the ring switches it off, silently, and the next way takes over;
* otherwise (a tensor subclass, no ring) a loss on an accelerator is read only on the
  steps the op sampler samples (see :func:`sampling_step`), which pay for their
  bookkeeping anyway, or without op accounting on a sparse schedule of its own
  (:func:`fallback_sampled`); other steps are never synchronised. A NaN there is seen at
  the next sampled step, and the event says so (``checked: "sampled steps"``, with the
  last step read finite).

What preceded it, gathered once, when the first non-finite loss is seen:

* the learning rate now and at the first step (``param_groups[0]["lr"]``, which
  schedulers update in place) of the last optimizer that stepped;
* the gradient norms the script computed with ``torch.nn.utils.clip_grad_norm_`` (its
  return value, read every call on the CPU, on sampled steps elsewhere), up to the step
  of the non-finite loss;
* whether fp16 autocast was entered (``torch.autocast(dtype=torch.float16)``) and
  whether a ``GradScaler`` ever scaled a loss: fp16 gradients underflow and overflow
  without one (https://pytorch.org/docs/stable/amp.html#gradient-scaling);
* the parameters' dtypes (a model cast with ``.half()``).

Values are read with Python dispatch modes disabled, so the op sampler never counts the
probe's own read as a sync of the script's line.
"""

from __future__ import annotations

import functools
import math
import sys
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

from .. import events
from .loss_ring import LossRing, Reading, for_loss

GRAD_NORMS_KEPT = 16
_isfinite = math.isfinite


NO_OPS_EVERY = 256
"""Without op accounting (``--no-ops``) the steps that count as sampled: 2, 4, 8, ...,
``NO_OPS_EVERY``, then every ``NO_OPS_EVERY``-th (one loss read, a sync, per 256 steps
in a long run; the device timer times the two steps after each)."""


def fallback_sampled(step: int) -> bool:
    """Whether ``step`` counts as sampled when no op sampler decides (``--no-ops``)."""
    if step < 2:
        return False
    if step <= NO_OPS_EVERY:
        return step & (step - 1) == 0
    return step % NO_OPS_EVERY == 0


def next_fallback_sampled(step: int) -> int:
    """The first step at or after ``step`` that :func:`fallback_sampled` picks (the backward
    wrapper is swapped in for it: probe/backward_sampling.py, one comparison a step)."""
    if step <= 2:
        return 2
    if step <= NO_OPS_EVERY:
        return 1 << (step - 1).bit_length()
    return -(-step // NO_OPS_EVERY) * NO_OPS_EVERY


def sampling_step(ops: Any, step: int | None = None) -> int | None:
    """The step the op sampler is sampling now, or None: the one sampled-step decision of
    the probe (``OpAccountant.sampling_step``). Without op accounting (``ops`` None) and
    given the step in progress, ``step`` where :func:`fallback_sampled` picks it."""
    if ops is None:
        return step if step is not None and fallback_sampled(step) else None
    value = getattr(ops, "sampling_step", None)
    return value if isinstance(value, int) else None


def _number(value: Any) -> Any:
    """A float as the event carries it: a non-finite one as its word ("nan", "inf", "-inf"),
    as the loss value is, since JSON has no such numbers (the channel would send null, and a
    NaN gradient norm or learning rate would read as unknown)."""
    if isinstance(value, float) and not _isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _first_bad(norms: list[tuple[int, float]]) -> int | None:
    """The step whose ``clip_grad_norm_`` first returned a non-finite norm, where the norm of
    the step just before it was kept and finite (the norms are read at every step, also where
    the loss is read on sampled steps only: this narrows when the training diverged); else None."""
    for (prev_step, prev), (step, norm) in zip(norms, norms[1:], strict=False):
        if not _isfinite(norm):
            return step if _isfinite(prev) and prev_step == step - 1 else None
    return None


def _read(tensor: Any) -> float:
    """The value of a one-element tensor, unseen by dispatch modes (op sampler)."""
    import torch

    guard = getattr(torch._C, "_DisableTorchDispatch", None)
    if guard is None:
        return float(tensor.detach().item())
    with guard():
        return float(tensor.detach().item())


def _scalar_loss(outputs: Any) -> Any:
    """The loss among a backward pass's outputs: one floating tensor of one element."""
    items = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    if len(items) != 1:
        return None
    t = items[0]
    try:
        if t.numel() != 1 or not t.is_floating_point() or t.device.type == "meta":
            return None
    except Exception:
        return None
    return t


class LossWatch:
    """Reads losses and gradient norms where it is free (see the module docstring)."""

    def __init__(self, emit: Callable[..., None], step: Callable[[], int],
                 sampled: Callable[[], bool],
                 ring: Callable[[Any, Callable[[], int] | None], LossRing | None] = for_loss) -> None:
        """``ring``: makes the ring of losses for a first accelerator loss (None: no ring)."""
        self._emit = emit
        self._step = step
        self._sampled = sampled
        self.checks = 0
        self.checked_on: set[str] = set()
        self.done = False
        self.last_finite: tuple[int, float] | None = None
        self.grad_norms: deque[tuple[int, float]] = deque(maxlen=GRAD_NORMS_KEPT)
        self.fp16_autocast = False
        self.grad_scaler = False
        self._optimizer: Any = None
        self.lr_first: float | None = None
        torch = sys.modules.get("torch")
        self._tensor: Any = getattr(torch, "Tensor", None)
        """``torch.Tensor``: a plain CPU loss takes the fast path of :meth:`on_backward`."""
        self._modes: Callable[[], int] | None = getattr(getattr(torch, "_C", None), "_len_torch_dispatch_stack", None)
        self._floats = frozenset(d for d in vars(torch).values() if getattr(d, "is_floating_point", None) is True) \
            if torch is not None else frozenset()
        """The installed torch's floating dtypes (``torch.dtype.is_floating_point``): a loss's
        ``dtype`` looked up here is ``Tensor.is_floating_point()`` without its call."""
        self._cpu_tensor: Any = self._tensor if self._modes is not None else None
        """``torch.Tensor`` where the fast path can tell whether a dispatch mode is on the
        stack (``_len_torch_dispatch_stack``), else None (every loss takes the other path)."""
        self._make_ring = ring
        self.ring: LossRing | None = None
        self.ring_off = False
        """The ring failed (or cannot take these losses): sampled-step reads from here on."""
        self.sampled_from: int | None = None
        """From this step on the backward wrapper, and so this check, runs on sampled steps
        only (probe/backward_sampling.py, once the loop is steady); None: every step."""

    # -- readings ---------------------------------------------------------------
    def _readable(self, tensor: Any) -> str | None:
        """'every step' where reading is free, 'sampled steps' on a sampled step, else None."""
        if tensor.device.type == "cpu":
            return "every step"
        return "sampled steps" if self._sampled() else None

    def on_backward(self, outputs: Any) -> None:
        """Before a backward pass: check its loss where that costs no sync.

        A plain CPU tensor (most CPU losses) is read at once: with no dispatch mode on the
        stack (every step but the op sampler's) nothing can see the read, so the guard of
        :func:`_read` is skipped. This runs at every step, so that case is one straight
        line of C calls (``type``, ``is_cpu``, ``numel``, ``dtype``, ``item``); every other
        loss goes to :meth:`_check_other`."""
        if self.done:
            return
        if type(outputs) is not tuple:  # (``Tensor.backward()`` hands the engine a tuple)
            outputs = tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)
        if len(outputs) != 1:
            return
        t = outputs[0]
        if type(t) is self._cpu_tensor and t.is_cpu:
            if t.numel() != 1 or t.dtype not in self._floats:
                return
            value: float = t.item() if not self._modes() else _read(t)  # type: ignore[misc]  # (set with _cpu_tensor)
            how = "every step"
        else:
            other = self._check_other(t)
            if other is None:
                return
            value, how = other
        self.checks += 1
        if how not in self.checked_on:
            self.checked_on.add(how)
        step = self._step()
        if _isfinite(value):
            self.last_finite = (step, value)
            return
        self.done = True
        self._report(step, value, how)

    def _check_other(self, t: Any) -> tuple[float, str] | None:
        """:meth:`on_backward` for any other loss (on an accelerator, a tensor subclass):
        its value and how it was read, or None where it is not read on this step (or went
        through the ring, whose readings are taken here)."""
        loss = _scalar_loss((t,))
        if loss is None:
            return None
        if not self.ring_off and loss.device.type != "cpu":
            readings = self._ring_write(loss)
            if readings is not None:
                self._take(readings)
                return None
        how = self._readable(loss)
        if how is None:
            return None
        return _read(loss), how

    def _ring_write(self, loss: Any) -> list[Reading] | None:
        """Copy ``loss`` into the ring and read what is due (see :mod:`.loss_ring`); the
        readings, or None where the ring did not take the loss (then it is off for good)."""
        try:
            ring = self.ring
            if ring is None:
                ring = self.ring = self._make_ring(loss, self._modes)
                if ring is None:
                    self.ring_off = True
                    return None
            if not ring.write(loss, self._step()):
                self.ring_off = True
                return None
            if ring.synchronous:
                return ring.read_now() if self._sampled() else []
            readings = ring.poll() if ring.pending() else []
            if ring.due():
                ring.start_read()
            return readings
        except Exception:
            self.ring_off = True  # never a finding, never the training's concern
            return None

    def _take(self, readings: list[Reading]) -> None:
        """Losses read from the ring, in the order written: the first non-finite one is
        reported at its step, exactly where the loss before it was read too."""
        for step, value, exact in readings:
            self.checks += 1
            how = "every step" if exact else "sampled steps"
            self.checked_on.add(how)
            if math.isfinite(value):
                self.last_finite = (step, value)
                continue
            self.done = True
            self._report(step, value, how)
            return

    def close(self) -> None:
        """At exit: read what the ring still holds (:meth:`.LossRing.flush`)."""
        ring = self.ring
        if self.done or ring is None or self.ring_off:
            return
        try:
            readings = ring.flush()
        except Exception:
            self.ring_off = True
            return
        self._take(readings)

    def on_grad_norm(self, norm: Any) -> None:
        """``clip_grad_norm_`` returned ``norm`` (a tensor): keep it where reading is free."""
        if self.done:
            return
        try:
            if not hasattr(norm, "device") or self._readable(norm) is None:
                return
            value = _read(norm)
        except Exception:
            return
        self.grad_norms.append((self._step(), value))

    def on_optimizer(self, optimizer: Any) -> None:
        """An optimizer stepped: remember it (weakly) for its learning rate."""
        current = self._optimizer() if self._optimizer is not None else None
        if current is optimizer:
            return
        try:
            self._optimizer = weakref.ref(optimizer)
        except TypeError:
            return
        if self.lr_first is None:
            self.lr_first = _lr(optimizer)

    # -- the report ---------------------------------------------------------------
    def _report(self, step: int, value: float, how: str) -> None:
        if how == "every step" and not self._exact(step):
            how = "sampled steps"  # the steps between the last finite reading and this one went unread
        optimizer = self._optimizer() if self._optimizer is not None else None
        before = [(s, n) for s, n in self.grad_norms if s <= step]  # a ring reads losses some steps late
        norms = [n for _, n in before]
        finite = [n for n in norms if math.isfinite(n)]
        fields: dict[str, Any] = {
            "what": "loss",
            "step": step,
            "value": _number(value),  # (non-finite here: its word)
            "checked": how,
            "last_finite_step": self.last_finite[0] if self.last_finite else None,
            "last_finite_loss": self.last_finite[1] if self.last_finite else None,
            "lr": _number(_lr(optimizer)) if optimizer is not None else None,
            "lr_first": self.lr_first,
            "optimizer": type(optimizer).__name__ if optimizer is not None else None,
            "grad_norm_last": _number(norms[-1]) if norms else None,
            "grad_norm_last_step": before[-1][0] if before else None,
            "grad_norm_first_bad_step": _first_bad(before),
            "grad_norm_median": sorted(finite[:-1])[len(finite[:-1]) // 2] if len(finite) > 1 else None,
            "fp16_autocast": self.fp16_autocast,
            "grad_scaler": self.grad_scaler,
            "param_dtypes": _param_dtypes(optimizer),
        }
        self._emit(events.KIND_HEALTH, **fields)

    def _exact(self, step: int) -> bool:
        """Whether a first non-finite loss read at ``step`` is the first non-finite one: every
        step before it was read, or the one before it was read finite (a pass of a step the
        backward wrapper did not see, once steady, was never read)."""
        start = self.sampled_from
        if start is None or step <= start:
            return True
        return self.last_finite is not None and self.last_finite[0] >= step - 1

    def summary(self) -> dict[str, Any]:
        """How the losses were checked: ``n`` read; ``checked`` "every step" where none was
        skipped; ``steps`` the run's steps and ``sampled_from``/``every`` the step from
        which one in ``every`` was read (probe/backward_sampling.py)."""
        from .backward_sampling import EVERY

        checked = "every step" if self.checked_on == {"every step"} and self.sampled_from is None else (
            "sampled steps" if self.checked_on else None)
        out: dict[str, Any] = {"what": "loss_checks", "n": self.checks, "checked": checked, "steps": self._step()}
        if self.sampled_from is not None:
            out["sampled_from"], out["every"] = self.sampled_from, EVERY
        return out


def _lr(optimizer: Any) -> float | None:
    try:
        lr = optimizer.param_groups[0]["lr"]
        return float(lr.item() if hasattr(lr, "item") else lr)
    except Exception:
        return None


def _param_dtypes(optimizer: Any) -> list[str]:
    try:
        return sorted({str(p.dtype).replace("torch.", "") for g in optimizer.param_groups for p in g["params"]})
    except Exception:
        return []


def _restore(owner: Any, name: str, value: Any) -> Callable[[], None]:
    def undo() -> None:
        setattr(owner, name, value)

    return undo


def install(watch: LossWatch, on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    """Wrap ``clip_grad_norm_``, ``autocast.__enter__`` and ``GradScaler.scale`` (each a
    few attribute writes per call); returns the uninstaller. Each wrapper calls the
    original first or whatever happens. The optimizer that stepped comes from the step
    tracker's optimizer hook (``step_hooks.install_optimizer_hooks`` calls
    :meth:`LossWatch.on_optimizer`): one global hook a step, not two."""
    import torch
    import torch.nn.utils as nn_utils
    import torch.nn.utils.clip_grad as clip_grad
    from torch.amp import autocast_mode, grad_scaler

    from .compiling import fast_is_compiling

    is_compiling = fast_is_compiling()

    undo: list[Callable[[], None]] = []
    original_clip = clip_grad.clip_grad_norm_

    def clip_grad_norm_(*args: Any, **kwargs: Any) -> Any:
        norm = original_clip(*args, **kwargs)
        if not is_compiling():
            try:
                watch.on_grad_norm(norm)
            except Exception as exc:
                on_error(exc)
        return norm

    functools.update_wrapper(clip_grad_norm_, original_clip)  # name, doc, signature (__wrapped__)
    for module in (clip_grad, nn_utils):
        if getattr(module, "clip_grad_norm_", None) is original_clip:
            module.clip_grad_norm_ = clip_grad_norm_  # type: ignore[attr-defined]
            undo.append(_restore(module, "clip_grad_norm_", original_clip))

    autocast = autocast_mode.autocast
    original_enter: Callable[[Any], Any] = autocast.__enter__

    def __enter__(self: Any) -> Any:
        try:
            if getattr(self, "fast_dtype", None) is torch.float16 and getattr(self, "_enabled", False):
                watch.fp16_autocast = True
        except Exception:
            pass
        return original_enter(self)

    autocast.__enter__ = __enter__  # type: ignore[method-assign]
    undo.append(_restore(autocast, "__enter__", original_enter))

    scaler = grad_scaler.GradScaler
    original_scale = scaler.scale

    def scale(self: Any, outputs: Any) -> Any:
        watch.grad_scaler = True
        return original_scale(self, outputs)

    scaler.scale = scale  # type: ignore[method-assign]
    undo.append(_restore(scaler, "scale", original_scale))

    def uninstall() -> None:
        for fn in reversed(undo):
            try:
                fn()
            except Exception:
                pass

    return uninstall
