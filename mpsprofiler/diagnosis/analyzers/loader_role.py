"""A loader a framework builds for evaluation: named, sized and advised as that.

The probe marks the loaders built under a framework's evaluation hook (``role``:
``probe/loader_sites.py``, ``ROLE_HOOKS``): the Trainer's ``get_eval_dataloader`` and
``get_test_dataloader``, Lightning's ``val_dataloader()`` and ``test_dataloader()``. Their
batch counts alone do not say so: a Trainer evaluating every 10 steps over 10 batches reads
as many evaluation batches as training ones, and its stall was called "the Trainer's
training DataLoader", its evaluation time per batch the "time to train", and its
rebuilding at every ``evaluate()`` an epoch loop to move the loader out of.

The Trainer builds its evaluation loader anew at each ``evaluate()``, by design: the user
cannot "build it once". With ``dataloader_persistent_workers=True`` it keeps the first
one it prepared, workers alive, and hands it out again (``Trainer.get_eval_dataloader``
returns ``self._eval_dataloaders[key]``, stored by ``Trainer._get_dataloader``, in
transformers/trainer.py): the fix's ``TrainingArguments`` get that setting, and its
workers start once for all the evaluations.
"""

from __future__ import annotations

from ...events.payloads import DataLoaderFields
from ...session.loaders import rebuilt_count
from ...session.session import Session

EVAL_ROLES = frozenset({"eval", "test"})
TRAINER = "transformers Trainer"
TRAINER_SOURCE = "https://github.com/huggingface/transformers/blob/main/src/transformers/trainer.py"
"""Where ``Trainer.get_eval_dataloader`` keeps the prepared loader (``_eval_dataloaders``)."""


def eval_role(loader: DataLoaderFields | None) -> bool:
    """Whether a framework's evaluation hook built ``loader`` (the probe's ``role``)."""
    return loader is not None and loader.get("role") in EVAL_ROLES


def trainer_keeps(session: Session, loader: DataLoaderFields) -> bool:
    """Whether the Trainer keeps this loader across ``evaluate()`` calls once
    ``dataloader_persistent_workers=True``: its evaluation loader (not ``predict()``'s test
    loader, which ``get_test_dataloader`` builds without a key to keep it under)."""
    return session.model.get("framework") == TRAINER and loader.get("role") == "eval"


def restarts(session: Session, loader: DataLoaderFields) -> str:
    """How the loader's workers start, a code the rule file words (``loader_starts``,
    ``loader_keeps``): ``once`` (built once), ``rebuilt`` (the script builds it anew every
    epoch: moved out of the loop, they start once), ``trainer_eval`` (the Trainer rebuilds
    it at each evaluation; its persistent workers setting keeps the first) or
    ``rebuilt_eval`` (a framework rebuilds it at each evaluation: they start each time)."""
    if rebuilt_count(loader) <= 1:
        return "once"
    if trainer_keeps(session, loader):
        return "trainer_eval"
    return "rebuilt_eval" if eval_role(loader) else "rebuilt"
