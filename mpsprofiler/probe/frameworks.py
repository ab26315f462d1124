"""Which training framework drives the loop: read once, at the first optimizer step.

The optimizer step hook receives the torch optimizer itself (accelerate's
``AcceleratedOptimizer`` and Lightning's ``LightningOptimizer`` wrap it and call its
``step``), so its class says nothing; the frames that called it do. A script that only
imports ``transformers`` for a model and writes its own loop has no Trainer frame on
that stack, so it is not called a Trainer. The walk costs a few µs, once per run.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from types import FrameType, TracebackType
from typing import Any

FRAMEWORKS = ("lightning", "lightning fabric", "transformers Trainer", "accelerate")
"""The names the ``framework`` fact takes (rules match on them)."""

MAX_FRAMES = 200


def _framework_of(module: str) -> str | None:
    if module.startswith(("lightning.pytorch", "pytorch_lightning")):
        return "lightning"
    if module.startswith(("lightning.fabric", "lightning_fabric")):  # no Trainer: the script's own loop
        return "lightning fabric"
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
    found = {kind for _, kind in _framework_frames(frame if frame is not None else sys._getframe(1))}
    for kind in FRAMEWORKS:
        if kind in found:
            return kind
    return None


def planned_steps(frame: FrameType | None = None) -> int | None:
    """The optimizer steps the framework on the stack says this run will make, or None.

    Read once, at the first optimizer step, so that op accounting can plan within the
    budget of the whole run (``ops_schedule.SampleSchedule.plan``): a Hugging Face
    ``Trainer``'s ``state.max_steps`` (set before its loop from ``max_steps`` or the epochs),
    a Lightning ``Trainer``'s ``estimated_stepping_batches`` (its epochs, batches per epoch,
    accumulation and ``max_steps``; read only once its training loader is set up, since
    the property would otherwise set it up itself) or its ``max_steps``. Plain loops and
    accelerate loops say nothing here: the script's own loop decides."""
    if not any(name in sys.modules for name in ("lightning", "pytorch_lightning", "transformers")):
        return None
    for f, kind in _framework_frames(frame if frame is not None else sys._getframe(1)):
        if kind not in ("lightning", "transformers Trainer"):
            continue
        try:  # the framework's own objects, read as they are; any surprise: nothing said
            owner = f.f_locals.get("self")
            planned = _hf_planned(owner) if kind == "transformers Trainer" else _lightning_planned(owner)
        except Exception:
            planned = None
        if planned is not None:
            return planned
    return None


TRAINING_ENTRIES = {
    "transformers.trainer": ("train", "_inner_training_loop"),
    "lightning.pytorch.trainer.trainer": ("fit", "_fit_impl"),
    "pytorch_lightning.trainer.trainer": ("fit", "_fit_impl"),
}
"""The functions (by module) that run a framework's training: ``Trainer.train`` of
transformers/trainer.py, ``Trainer.fit`` of Lightning's trainer/trainer.py (its sanity check
included). Not their ``evaluate``/``predict``/``validate``/``test``: those loops do not train."""


def in_training(tb: TracebackType | None) -> bool:
    """Whether the traceback ``tb`` passes through a framework's training entry (see
    ``TRAINING_ENTRIES``): an exception raised there ended a training run, so the batches
    fetched before its first optimizer step were fetched for a step that never finished
    (the Trainer's accumulation window and look-ahead, Lightning's sanity check), not
    steps of a loop without training."""
    for _ in range(MAX_FRAMES):
        if tb is None:
            return False
        name = tb.tb_frame.f_globals.get("__name__")
        entries = TRAINING_ENTRIES.get(name) if isinstance(name, str) else None
        if entries is not None and tb.tb_frame.f_code.co_name in entries:
            return True
        tb = tb.tb_next
    return False


def _framework_frames(frame: FrameType | None) -> Iterator[tuple[FrameType, str]]:
    """Each of the innermost ``MAX_FRAMES`` frames from ``frame`` out that runs a framework's
    module, with that framework's name."""
    f = frame
    for _ in range(MAX_FRAMES):
        if f is None:
            return
        name = f.f_globals.get("__name__")
        kind = _framework_of(name) if isinstance(name, str) else None
        if kind is not None:
            yield f, kind
        f = f.f_back


def _positive(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e12:
        return None  # inf (an endless loader), -1 (not set), or not a number
    return int(value)


def _hf_planned(owner: object) -> int | None:
    # a Trainer, or a subclass of it in the script (a custom compute_loss): its MRO says
    if not any(c.__module__.startswith("transformers.trainer") for c in type(owner).__mro__):
        return None
    return _positive(getattr(getattr(owner, "state", None), "max_steps", None))


def _lightning_planned(owner: object) -> int | None:
    trainer: Any = owner if _is_lightning_trainer(owner) else getattr(owner, "trainer", None)
    if not _is_lightning_trainer(trainer):
        return None
    if getattr(trainer, "train_dataloader", None) is not None:
        planned = _positive(trainer.estimated_stepping_batches)
        if planned is not None:
            return planned
    return _positive(getattr(trainer, "max_steps", None))


def _is_lightning_trainer(obj: object) -> bool:
    return type(obj).__name__ == "Trainer" and type(obj).__module__.startswith(
        ("lightning.pytorch.trainer", "pytorch_lightning.trainer"))
