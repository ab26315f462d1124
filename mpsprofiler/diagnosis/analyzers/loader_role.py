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


BETWEEN_MIN_GAPS = 3
"""Gaps between a loader's batches seen before "no step between them" says anything (as
``side_consume``'s 3)."""


def between_steps(session: Session, loader: DataLoaderFields | None) -> bool:
    """Whether the script reads ``loader`` between its training steps: none of the gaps
    between its batches held a step boundary, over several gaps, while another loader's
    did (``consume_steps``: probe/loader_sites.py). An evaluation pass in the script's own
    loop (``for x, y in val_dl`` after each epoch) reads as many batches as training when
    the two sets are as long, so its batches per step cannot tell it apart; its wait was
    called "38% of the training time". False for a recording without the count."""
    if loader is None:
        return False
    gaps, stepped = loader.get("consumes"), loader.get("consume_steps")
    if not isinstance(gaps, int) or gaps < BETWEEN_MIN_GAPS or stepped != 0:
        return False
    return any(d is not loader and d.get("created") != loader.get("created")
               and isinstance(d.get("consume_steps"), int) and int(d.get("consume_steps") or 0) > 0
               for d in session.dataloaders.values())


def read_aside(session: Session, loader: DataLoaderFields | None) -> bool:
    """An evaluation loader by what the run saw: built by a framework's evaluation hook
    (:func:`eval_role`) or read between the training steps (:func:`between_steps`). The
    one answer for the loader's figures (its consumption) and its texts (its subject)."""
    return eval_role(loader) or between_steps(session, loader)


def trainer_keeps(session: Session, loader: DataLoaderFields) -> bool:
    """Whether the Trainer keeps this loader across ``evaluate()`` calls once
    ``dataloader_persistent_workers=True``: its evaluation loader (not ``predict()``'s test
    loader, which ``get_test_dataloader`` builds without a key to keep it under)."""
    return session.framework == TRAINER and loader.get("role") == "eval"


def restarts(session: Session, loader: DataLoaderFields) -> str:
    """How the loader's workers start, a code the rule file words (``loader_starts``,
    ``loader_keeps``): ``once`` (built once), ``single`` (built once and read in one pass,
    by a run that ended on its own: :func:`single_pass`), ``rebuilt`` (the script builds it anew every
    epoch: moved out of the loop, they start once), ``trainer_eval`` (the Trainer rebuilds
    it at each evaluation; its persistent workers setting keeps the first) or
    ``rebuilt_eval`` (a framework rebuilds it at each evaluation: they start each time)."""
    if rebuilt_count(loader) <= 1:
        return "single" if single_pass(session, loader) else "once"
    if trainer_keeps(session, loader):
        return "trainer_eval"
    return "rebuilt_eval" if eval_role(loader) else "rebuilt"


def single_pass(session: Session, loader: DataLoaderFields) -> bool:
    """The script read ``loader`` in one pass (one iterator started over it: ``iters``,
    probe/loader_sites.py) and the run ended on its own (not cut by ``--max-steps``, not
    stopped, not crashed): ``persistent_workers``, which keeps the workers from one pass to
    the next, has nothing to keep. One epoch over a map-style dataset, one stream through an
    ``IterableDataset``. A recording without the count (older ones) is not one."""
    iters = loader.get("iters")
    return (isinstance(iters, int) and not isinstance(iters, bool) and iters == 1
            and not loader.get("persistent_workers") and session.status == "finished")


def one_pass_kind(session: Session, loader: DataLoaderFields, side: bool) -> str:
    """What the one pass over a loader read in one pass was, a code the rule file words
    (``loader_one_pass``): ``evaluation`` (a side loader's: one evaluation), ``epoch`` (every
    batch of its ``len``), ``steps`` (the loop stopped before the end of the epoch: a ``break``
    at a step limit) or ``trainer_steps`` (the Trainer's: ``max_steps``, or a fractional
    ``num_train_epochs`` it turns into one, ended the training within the first epoch), or
    ``unknown`` (no ``len``: an ``IterableDataset``'s stream). "(one epoch)" said of a
    Trainer run of ``max_steps=50`` over 400 batches was not what ran."""
    if side:
        return "evaluation"
    length = loader.get("len")
    given = (loader.get("fetches") or 0) + (loader.get("first_fetches") or 0)
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0 or not given:
        return "unknown"
    if given >= length:
        return "epoch"
    return "trainer_steps" if session.framework == TRAINER else "steps"
