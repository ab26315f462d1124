"""The training framework that drove the loop, and the loader fix in its own terms.

The probe names the framework at the first optimizer step from the frames that called it
(``probe/frameworks.py``): ``lightning``, ``transformers Trainer`` or ``accelerate``. A
Trainer user never writes ``DataLoader(...)``: the Trainer builds it from
``TrainingArguments`` (``Trainer.get_train_dataloader``), and the script's
``data_collator`` is the loader's ``collate_fn``, so it runs in the workers too. A
Lightning user changes the loader that ``train_dataloader()`` (of the LightningModule or
the DataModule) returns. ``accelerator.prepare(loader)`` rebuilds the loader from the
arguments of the one it is given (``_PYTORCH_DATALOADER_KWARGS`` in accelerate's
data_loader.py), so that one is where they go.

``framework_loader_fix`` is a paragraph the loader stall rules append to their fix (empty
for a plain torch loop, so their text is unchanged there). The rule's own snippet is
already in the framework's terms: the probe names the script's ``DataLoader`` line, not
the framework's frame that rebuilt it (``probe/loader_sites.py``), and a Trainer's is its
``TrainingArguments`` call (``framework_place.py``); so the paragraph says why that is the
place, with a snippet of its own only where the script's line was not found. Its numbers
are those of the rule's own snippet, recomputed here because an analyzer sees the
session, not the other analyzers' facts.
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from .dataloader import dataloader_facts
from .registry import analyzer

FRAMEWORKS = ("lightning", "lightning fabric", "transformers Trainer", "accelerate")

FRAMEWORK_FACTS: tuple[str, ...] = ("framework", "framework_loader_fix")
"""Every fact the ``framework`` analyzer may return (declared: no other analyzer may provide one)."""

TRAINER_DOCS = "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments"
LIGHTNING_DOCS = "https://lightning.ai/docs/pytorch/stable/data/datamodule.html"
ACCELERATE_SOURCE = "https://github.com/huggingface/accelerate/blob/main/src/accelerate/data_loader.py"
FABRIC_DOCS = "https://lightning.ai/docs/fabric/stable/api/fabric_methods.html#setup-dataloaders"


@analyzer("framework", provides=FRAMEWORK_FACTS)
def framework_facts(session: Session) -> dict[str, Any]:
    name = session.framework
    framework = name if name in FRAMEWORKS else None
    facts: dict[str, Any] = {"framework": framework, "framework_loader_fix": ""}
    if framework is None or not session.dataloaders:
        return facts
    loader = dataloader_facts(session)
    workers = _int(loader.get("suggested_num_workers"))
    prefetch = _int(loader.get("suggested_prefetch_factor")) or 4
    if workers is None or loader.get("loader_change") == "none":
        return facts  # the loader has the settings already: no setting to say where to put
    # the script's own DataLoader line was found and rewritten above (Lightning's
    # train_dataloader(), the loader handed to accelerator.prepare): no second snippet
    rewritten = loader.get("loader_where") in ("rewrite", "option", "hparams")
    # an evaluation loader (built by the framework's evaluation hook, or read in a few steps
    # only): the dataloader analyzer's decision, which titles the stall too
    side = loader.get("stall_subject") == "evaluation"
    # on the line after the rule's own fix: a blank line first makes it a paragraph of its own
    # persistent workers where they start again (loader_place's own choice): not for a loader
    # read in one pass (loader_role.single_pass) nor one built anew for each pass
    persistent = bool(loader.get("persistent_workers")) or loader.get("loader_keeps") in ("once", "trainer_eval")
    facts["framework_loader_fix"] = "\n" + loader_fix(framework, workers, prefetch, session.device_kind,
                                                      _int(loader.get("batch_size")), rewritten, side,
                                                      persistent).rstrip("\n")
    return facts


def loader_fix(framework: str, workers: int, prefetch: int, device_kind: str | None, batch_size: int | None,
               rewritten: bool = False, side: bool = False, persistent: bool = True) -> str:
    """The paragraph for ``framework`` (see the module docstring); markdown. The Trainer's
    ``TrainingArguments`` are the rule's own snippet (framework_place.py); ``rewritten``:
    the rule's snippet is the script's own DataLoader line; ``side``: the loader is read in a
    few steps only, the evaluation one (Lightning's ``val_dataloader()``, the Trainer's
    ``get_eval_dataloader``); ``persistent``: the snippet keeps the workers between passes
    (``persistent_workers=True``), which a loader read in one pass has no use for."""
    if framework == "transformers Trainer":
        pin = device_kind == "cuda"
        pin_note = ("page-locked batches copy to the GPU asynchronously" if pin
                    else "pinning only speeds up copies to a CUDA GPU")
        built = "`Trainer.get_eval_dataloader`, for evaluation" if side else "`Trainer.get_train_dataloader`"
        return (
            f"The Trainer builds this DataLoader itself ({built}) from those "
            "`TrainingArguments`; your `data_collator` is the loader's `collate_fn` and runs in the "
            f"workers too. `dataloader_prefetch_factor={prefetch}` keeps more batches ready; "
            f"`dataloader_pin_memory={pin}`: {pin_note} (<{TRAINER_DOCS}>).\n"
        )
    if framework == "lightning":
        hook, given, data, shuffle = (("val_dataloader", "`val_dataloaders` given to `trainer.fit`", "self.val_set", "")
                                      if side else
                                      ("train_dataloader", "loader given to `trainer.fit`", "self.train_set",
                                       "shuffle=True, "))  # fmt: skip
        where = (f"Lightning iterates the DataLoader that `{hook}()` returns (of your "
                 f"LightningModule or LightningDataModule, or the {given})")
        if rewritten:
            return f"{where}: the line above builds it (<{LIGHTNING_DOCS}>).\n"
        batch = f"batch_size={batch_size}, " if batch_size else ""
        keep = "persistent_workers=True, " if persistent else ""
        return (
            f"{where}: change it there (<{LIGHTNING_DOCS}>):\n\n"
            "```python\n"
            f"def {hook}(self):\n"
            f"    return DataLoader({data}, {batch}{shuffle}num_workers={workers},\n"
            f"                      {keep}prefetch_factor={prefetch})\n"
            "```\n"
        )
    if framework == "lightning fabric":
        return _fabric_fix(rewritten)
    where = "that line, before `prepare`" if rewritten else "change that `DataLoader(...)`, before `prepare`"
    return (
        "`accelerator.prepare(loader)` builds its loader from the arguments of the DataLoader "
        "you hand it (num_workers, prefetch_factor, persistent_workers, pin_memory are kept): "
        f"{where}. accelerate's own one-batch look-ahead "
        f"(to know the last batch) does not load in the background (<{ACCELERATE_SOURCE}>).\n"
    )


def _fabric_fix(rewritten: bool) -> str:
    """Fabric has no Trainer hooks: the script's own loop iterates the loader it passed to
    ``fabric.setup_dataloaders``, which keeps that DataLoader's arguments (it may swap the
    sampler for a distributed one and moves the batches to the device)."""
    where = "that line, before `setup_dataloaders`" if rewritten else (
        "change that `DataLoader(...)`, before `setup_dataloaders`")
    return (
        "`fabric.setup_dataloaders(loader)` wraps the DataLoader you pass it and keeps its arguments "
        f"(num_workers, prefetch_factor, persistent_workers, pin_memory): {where} (<{FABRIC_DOCS}>).\n"
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
