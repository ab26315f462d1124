"""The printed loss ``mpsprof try`` compares: HF Trainer log lines, old and new."""

from __future__ import annotations

import pytest

from mpsprofiler.experiment.trial import parse_losses

TRANSFORMERS_4 = "{'loss': 0.6927, 'grad_norm': 0.2676, 'learning_rate': 3.833e-05, 'epoch': 0.12}"
TRANSFORMERS_5 = "{'loss': '0.6927', 'grad_norm': '0.2676', 'learning_rate': '3.833e-05', 'epoch': '0.12'}"


@pytest.mark.parametrize("line", [TRANSFORMERS_4, TRANSFORMERS_5, '{"loss": "0.6927"}', "loss='0.6927'"])
def test_hf_trainer_loss_read_bare_or_quoted(line: str) -> None:
    """Before: transformers 5's quoted value (``'loss': '0.6927'``) gave no loss, and every
    ``mpsprof try`` of an HF Trainer said the loss was not compared."""
    assert parse_losses(line) == [pytest.approx(0.6927)]


@pytest.mark.parametrize("line", ["{'loss': '3rd run'}", "{'loss': '0.5\"}", "{'loss_type': '2', 'lossy': '1'}"])
def test_quoted_text_that_is_not_a_number_is_no_loss(line: str) -> None:
    assert parse_losses(line) == []


def test_quoted_losses_read_in_order() -> None:
    log = "\n".join(TRANSFORMERS_5.replace("0.6927", v) for v in ("0.69", "0.6907", "0.5"))
    assert parse_losses(log) == [0.69, 0.6907, 0.5]
