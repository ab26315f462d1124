"""Training-health facts: the first non-finite loss and what preceded it.

From the probe's ``health`` events (see :mod:`mpsprofiler.probe.health`). The texts that
depend on what was measured (a gradient-norm jump, fp16 without a GradScaler, the
learning rate) are built here, so the rule's templates stay plain.
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
    "loss_checks", "loss_checked", "nonfinite_loss_step", "nonfinite_loss_value", "nonfinite_loss_checked",
    "last_finite_loss", "last_finite_loss_step", "nonfinite_lr", "nonfinite_lr_first", "grad_norm_before_nan",
    "grad_norm_median_before_nan", "grad_norm_jump", "fp16_without_scaler", "nonfinite_preceded",
    "nonfinite_fix_first",
)


def _f(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@analyzer("health", provides=HEALTH_FACTS)
def health_facts(session: Session) -> dict[str, Any]:
    h = session.health
    facts: dict[str, Any] = {"loss_checks": h.loss_checks, "loss_checked": h.loss_checked}
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
    jump = None
    if norm is not None and median and median > 0:
        jump = math.inf if not math.isfinite(norm) else norm / median
        facts["grad_norm_jump"] = rounded(jump, 2) if math.isfinite(jump) else None
    dtypes = [str(d) for d in bad.get("param_dtypes") or []]
    fp16 = bool(bad.get("fp16_autocast")) or "float16" in dtypes
    no_scaler = fp16 and not bad.get("grad_scaler")
    facts["fp16_without_scaler"] = no_scaler
    facts["nonfinite_preceded"] = _preceded(facts, last, last_step, lr, lr_first, norm, median, jump, no_scaler,
                                            dtypes, bool(bad.get("fp16_autocast")))
    # what to do first, as a code the rule file words (rules/nonfinite-loss.yaml phrases)
    if no_scaler:
        facts["nonfinite_fix_first"] = "scale_loss"
    elif jump is not None and jump >= GRAD_JUMP:
        facts["nonfinite_fix_first"] = "clip_gradients"
    else:
        facts["nonfinite_fix_first"] = "lower_lr"
    return facts


def _preceded(facts: dict[str, Any], last: float | None, last_step: Any, lr: float | None, lr_first: float | None,
              norm: float | None, median: float | None, jump: float | None, no_scaler: bool, dtypes: list[str],
              autocast: bool) -> str:
    parts = []
    if last is not None:
        parts.append(f"the last finite loss was {last:.4g} at step {last_step}")
    else:
        parts.append("no finite loss was read before it")
    if facts["nonfinite_loss_checked"] == "sampled steps" and isinstance(last_step, int):
        parts.append(f"losses are read on sampled steps only on this device, so it went non-finite "
                     f"between step {last_step + 1} and step {facts['nonfinite_loss_step']}")
    if lr is not None:
        if lr_first is not None and lr_first > 0 and abs(lr - lr_first) / lr_first > 0.01:
            parts.append(f"the learning rate was {lr:.3g} (it was {lr_first:.3g} at the first step)")
        else:
            parts.append(f"the learning rate was {lr:.3g}")
    if norm is not None:
        if jump is not None and not math.isfinite(jump):
            parts.append(f"the last gradient norm clip_grad_norm_ returned was {norm} (median before {median:.3g})")
        elif jump is not None and jump >= GRAD_JUMP:
            parts.append(f"the gradient norm jumped to {norm:.3g}, {jump:.0f} times its median of {median:.3g}")
        else:
            parts.append(f"the gradient norm was {norm:.3g} (no jump)")
    if no_scaler:
        what = "fp16 autocast" if autocast else "float16 parameters"
        parts.append(f"the run uses {what} and no GradScaler scaled a loss")
    elif autocast or "float16" in dtypes:
        parts.append("fp16 with a GradScaler")
    return "; ".join(parts) + "."
