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
for a plain torch loop, so their text is unchanged there); its numbers are those of the rule's own snippet, recomputed here because
an analyzer sees the session, not the other analyzers' facts.
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from .dataloader import dataloader_facts
from .registry import analyzer

FRAMEWORKS = ("lightning", "transformers Trainer", "accelerate")

FRAMEWORK_FACTS: tuple[str, ...] = ("framework", "framework_loader_fix")
"""Every fact the ``framework`` analyzer may return (declared: no other analyzer may provide one)."""

TRAINER_DOCS = "https://huggingface.co/docs/transformers/main_classes/trainer#transformers.TrainingArguments"
LIGHTNING_DOCS = "https://lightning.ai/docs/pytorch/stable/data/datamodule.html"
ACCELERATE_SOURCE = "https://github.com/huggingface/accelerate/blob/main/src/accelerate/data_loader.py"


@analyzer("framework", provides=FRAMEWORK_FACTS)
def framework_facts(session: Session) -> dict[str, Any]:
    name = session.model.get("framework")
    framework = name if name in FRAMEWORKS else None
    facts: dict[str, Any] = {"framework": framework, "framework_loader_fix": ""}
    if framework is None or not session.dataloaders:
        return facts
    loader = dataloader_facts(session)
    workers = _int(loader.get("suggested_num_workers"))
    prefetch = _int(loader.get("suggested_prefetch_factor")) or 4
    if workers is None:
        return facts
    # on the line after the rule's own fix: a blank line first makes it a paragraph of its own
    facts["framework_loader_fix"] = "\n" + loader_fix(framework, workers, prefetch, session.device_kind,
                                                      _int(loader.get("batch_size"))).rstrip("\n")
    return facts


def loader_fix(framework: str, workers: int, prefetch: int, device_kind: str | None, batch_size: int | None) -> str:
    """The paragraph for ``framework`` (see the module docstring); markdown."""
    if framework == "transformers Trainer":
        pin = device_kind == "cuda"
        pin_note = "page-locked batches copy to the GPU asynchronously" if pin else "pinning only speeds up copies to a CUDA GPU"
        return (
            "The Trainer builds this DataLoader itself (`Trainer.get_train_dataloader`): set the "
            "same numbers on its `TrainingArguments`; your `data_collator` is the loader's "
            "`collate_fn` and runs in the workers too "
            f"(<{TRAINER_DOCS}>):\n\n"
            "```python\n"
            "args = TrainingArguments(\n"
            "    ...,\n"
            f"    dataloader_num_workers={workers},\n"
            "    dataloader_persistent_workers=True,\n"
            f"    dataloader_prefetch_factor={prefetch},\n"
            f"    dataloader_pin_memory={pin},   # {pin_note}\n"
            ")\n"
            "```\n"
        )
    if framework == "lightning":
        batch = f"batch_size={batch_size}, " if batch_size else ""
        return (
            "Lightning iterates the DataLoader that `train_dataloader()` returns (of your "
            "LightningModule or LightningDataModule, or the loader given to `trainer.fit`): "
            f"change it there (<{LIGHTNING_DOCS}>):\n\n"
            "```python\n"
            "def train_dataloader(self):\n"
            f"    return DataLoader(self.train_set, {batch}shuffle=True, num_workers={workers},\n"
            f"                      persistent_workers=True, prefetch_factor={prefetch})\n"
            "```\n"
        )
    return (
        "`accelerator.prepare(loader)` builds its loader from the arguments of the DataLoader "
        "you hand it (num_workers, prefetch_factor, persistent_workers, pin_memory are kept): "
        "change that `DataLoader(...)`, before `prepare`. accelerate's own one-batch look-ahead "
        f"(to know the last batch) does not load in the background (<{ACCELERATE_SOURCE}>).\n"
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
