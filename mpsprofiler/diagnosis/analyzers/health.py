"""Training-health facts: the first non-finite loss and what preceded it.

From the probe's ``health`` events (see :mod:`mpsprofiler.probe.health`). The texts that
depend on what was measured (a gradient-norm jump, fp16 without a GradScaler, the
learning rate) are codes and numbers here, worded by ``rules/nonfinite-loss.yaml``.
"""

from __future__ import annotations

import math
from typing import Any

from ...session.session import Session
from .common import rounded
from .registry import analyzer

GRAD_JUMP = 10.0
"""A gradient norm ten times its median before the NaN is called a jump (a divergence
grows the norm by orders of magnitude within a few steps; steady training varies it by
less than 2x)."""

HEALTH_FACTS: tuple[str, ...] = (
    "loss_checks", "loss_checked", "loss_check_steps", "loss_check_every", "loss_check_sampled_from",
    "nonfinite_loss_step", "nonfinite_loss_value", "nonfinite_loss_checked",
    "last_finite_loss", "last_finite_loss_step", "nonfinite_lr", "nonfinite_lr_first", "grad_norm_before_nan",
    "grad_norm_median_before_nan", "grad_norm_jump", "fp16_without_scaler", "nonfinite_preceded",
    "nonfinite_preceded_loss", "nonfinite_preceded_window", "nonfinite_window_from", "nonfinite_preceded_lr",
    "nonfinite_preceded_grad", "nonfinite_preceded_jump", "nonfinite_preceded_fp16", "nonfinite_fix_first", "nonfinite_when",
    "grad_norm_first_bad_step", "nonfinite_norm_first",
)


NONFINITE_WORDS = ("nan", "inf", "-inf")
"""How the probe sends a non-finite figure (probe/health.py ``_number``: JSON has no NaN)."""


def _f(value: Any) -> float | None:
    if isinstance(value, str) and value in NONFINITE_WORDS:
        return float(value)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@analyzer("health", provides=HEALTH_FACTS)
def health_facts(session: Session) -> dict[str, Any]:
    h = session.health
    facts: dict[str, Any] = {"loss_checks": h.loss_checks, "loss_checked": h.loss_checked,
                             "loss_check_steps": h.loss_steps, "loss_check_every": h.loss_every,
                             "loss_check_sampled_from": h.loss_sampled_from}
    bad = h.nonfinite
    if bad is None:
        return facts
    step = bad.get("step")
    if not isinstance(step, int):
        return facts
    facts["nonfinite_loss_step"] = step
    facts["nonfinite_loss_value"] = str(bad.get("value") or "nan")
    facts["nonfinite_loss_checked"] = str(bad.get("checked") or "?")
    last, last_step = _f(bad.get("last_finite_loss")), bad.get("last_finite_step")
    facts["last_finite_loss"] = rounded(last, 6) if last is not None else None
    facts["last_finite_loss_step"] = last_step if isinstance(last_step, int) else None
    lr, lr_first = _f(bad.get("lr")), _f(bad.get("lr_first"))
    facts["nonfinite_lr"], facts["nonfinite_lr_first"] = lr, lr_first
    norm, median = _f(bad.get("grad_norm_last")), _f(bad.get("grad_norm_median"))
    facts["grad_norm_before_nan"], facts["grad_norm_median_before_nan"] = norm, median
    first_bad = bad.get("grad_norm_first_bad_step")
    facts["grad_norm_first_bad_step"] = first_bad if isinstance(first_bad, int) else None
    jump = None
    if norm is not None and median and median > 0:
        jump = math.inf if not math.isfinite(norm) else norm / median
        facts["grad_norm_jump"] = rounded(jump, 2) if math.isfinite(jump) else None
    dtypes = [str(d) for d in bad.get("param_dtypes") or []]
    fp16 = bool(bad.get("fp16_autocast")) or "float16" in dtypes
    no_scaler = fp16 and not bad.get("grad_scaler")
    facts["fp16_without_scaler"] = no_scaler
    # what preceded it, as codes and numbers the rule file words (rules/nonfinite-loss.yaml phrases)
    facts.update(_preceded(facts, last, last_step, lr, lr_first, norm, jump, no_scaler, dtypes,
                           bool(bad.get("fp16_autocast"))))
    # where the loss was read on sampled steps only, the gradient norms (read at every step)
    # say which step went bad first
    sampled = facts["nonfinite_when"] == "window" and isinstance(first_bad, int)
    facts["nonfinite_norm_first"] = "at_step" if sampled else "unknown"
    # what to do first, as a code the rule file words (rules/nonfinite-loss.yaml phrases)
    if no_scaler:
        facts["nonfinite_fix_first"] = "scale_loss"
    elif _exploded(norm, jump):
        facts["nonfinite_fix_first"] = "clip_gradients"
    else:
        facts["nonfinite_fix_first"] = "lower_lr"
    return facts


def _exploded(norm: float | None, jump: float | None) -> bool:
    """Whether the gradients blew up before the loss: a norm ``GRAD_JUMP`` times its median,
    or an infinite one. A NaN norm is no jump: it is the NaN itself (a log of a negative
    number makes the loss and its gradients NaN in the same step), and clipping cures
    nothing there."""
    if norm is not None and math.isnan(norm):
        return False
    return jump is not None and jump >= GRAD_JUMP


def _preceded(facts: dict[str, Any], last: float | None, last_step: Any, lr: float | None, lr_first: float | None,
              norm: float | None, jump: float | None, no_scaler: bool, dtypes: list[str],
              autocast: bool) -> dict[str, Any]:
    """What preceded the first non-finite loss, as codes and numbers: each ``nonfinite_preceded*``
    code is a clause that ``rules/nonfinite-loss.yaml`` words (a NaN figure has codes of its
    own: a NaN fact would leave its clause out)."""
    out: dict[str, Any] = {"nonfinite_preceded": "finite_loss" if last is not None else "no_finite_loss",
                           "nonfinite_preceded_loss": last}
    sampled = facts["nonfinite_loss_checked"] == "sampled steps" and isinstance(last_step, int)
    out["nonfinite_preceded_window"] = "sampled" if sampled else "every_step"
    out["nonfinite_window_from"] = last_step + 1 if sampled else None
    # the title names the step only where the step before it was read finite: a sampled
    # reading names the window the loss went non-finite in, not a first step it may not be
    out["nonfinite_when"] = "window" if sampled and last_step + 1 < facts["nonfinite_loss_step"] else "step"
    if lr is None:
        out["nonfinite_preceded_lr"] = "unknown"
    elif lr_first is not None and lr_first > 0 and abs(lr - lr_first) / lr_first > 0.01:
        out["nonfinite_preceded_lr"] = "changed"
    else:
        out["nonfinite_preceded_lr"] = "nan" if math.isnan(lr) else "same"
    nan = norm is not None and math.isnan(norm)
    if norm is None:
        out["nonfinite_preceded_grad"] = "unknown"
    elif jump is not None and not math.isfinite(jump):
        out["nonfinite_preceded_grad"] = "not_finite_nan" if nan else "not_finite"
    elif jump is not None and jump >= GRAD_JUMP:
        out["nonfinite_preceded_grad"] = "jump"
    else:
        out["nonfinite_preceded_grad"] = "no_jump_nan" if nan else "no_jump"
    out["nonfinite_preceded_jump"] = jump if jump is not None and math.isfinite(jump) else None
    if no_scaler:
        out["nonfinite_preceded_fp16"] = "autocast_no_scaler" if autocast else "params_no_scaler"
    else:
        out["nonfinite_preceded_fp16"] = "with_scaler" if autocast or "float16" in dtypes else "none"
    return out
