"""Which training framework drives the loop: read once, at the first optimizer step.

The optimizer step hook receives the torch optimizer itself (accelerate's
``AcceleratedOptimizer`` and Lightning's ``LightningOptimizer`` wrap it and call its
``step``), so its class says nothing; the frames that called it do. A script that only
imports ``transformers`` for a model and writes its own loop has no Trainer frame on
that stack, so it is not called a Trainer. The walk costs a few µs, once per run.
"""

from __future__ import annotations

import sys
from types import FrameType

FRAMEWORKS = ("lightning", "transformers Trainer", "accelerate")
"""The names the ``framework`` fact takes (rules match on them)."""

MAX_FRAMES = 200


def _framework_of(module: str) -> str | None:
    if module.startswith(("lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric")):
        return "lightning"
    if module.startswith("transformers.trainer"):
        return "transformers Trainer"
    if module == "accelerate" or module.startswith("accelerate."):
        return "accelerate"
    return None


def detect(frame: FrameType | None = None) -> str | None:
    """The framework whose code is on the stack (a Trainer or Lightning over accelerate,
    which both use it underneath), or None for a plain torch loop."""
    if not any(name in sys.modules for name in ("lightning", "pytorch_lightning", "transformers", "accelerate")):
        return None
    found: set[str] = set()
    f: FrameType | None = frame if frame is not None else sys._getframe(1)
    for _ in range(MAX_FRAMES):
        if f is None:
            break
        name = f.f_globals.get("__name__")
        if isinstance(name, str):
            kind = _framework_of(name)
            if kind is not None:
                found.add(kind)
        f = f.f_back
    for kind in FRAMEWORKS:
        if kind in found:
            return kind
    return None
