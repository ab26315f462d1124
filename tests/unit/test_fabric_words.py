"""Lightning Fabric is no Lightning Trainer: its steps and its loader fix in its own terms."""

from __future__ import annotations

from mpsprofiler.diagnosis.analyzers.framework import loader_fix
from mpsprofiler.probe.frameworks import _framework_of
from mpsprofiler.session.steps import signal_words


def test_fabric_modules_are_fabric_and_the_trainers_stay_lightning() -> None:
    """Before: lightning.fabric was "lightning", told as "optimizer steps of a Lightning Trainer"."""
    assert _framework_of("lightning.fabric.fabric") == "lightning fabric"
    assert _framework_of("lightning_fabric.wrappers") == "lightning fabric"
    assert _framework_of("lightning.pytorch.loops.fit_loop") == "lightning"
    assert _framework_of("pytorch_lightning.trainer.trainer") == "lightning"


def test_fabric_steps_and_loader_fix_name_setup_dataloaders_not_the_trainer() -> None:
    assert signal_words("optimizer", "lightning fabric") == "optimizer steps through Lightning Fabric"
    assert signal_words("optimizer", "lightning") == "optimizer steps of a Lightning Trainer"
    fix = loader_fix("lightning fabric", 2, 4, "cpu", 32)
    assert "fabric.setup_dataloaders(loader)" in fix and "before `setup_dataloaders`" in fix
    assert "train_dataloader" not in fix and "trainer.fit" not in fix
