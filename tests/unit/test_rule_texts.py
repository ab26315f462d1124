"""No text with a hole in it (issue 27): every shipped rule's title, evidence and fix,
rendered with all its facts and then with each of them missing, shows no ``?``, ``None``,
``nan`` or empty placeholder: the sentence that needs the missing number is left out."""

from __future__ import annotations

import re

import pytest

from mpsprofiler.diagnosis.rules import load_builtin_and_user
from mpsprofiler.diagnosis.template import compile_template

HOLE = re.compile(r"(?:^|[\s=(])\?(?=$|[\s,.;:)])|\bNone\b|\bnan\b", re.M)
RULES = load_builtin_and_user([]).rules
SAMPLE = {"int": 3, "float": 2.5, "str": "x", "list": ["a", "b"]}


def _value(name: str, spec: str) -> object:
    if spec.endswith("%"):
        return 0.25
    if spec.endswith("d"):
        return 3
    if spec:
        return 2.5
    if name.endswith(("_words", "_list", "names", "targets", "methods")):
        return "a, b"
    return 3


def _texts(rule) -> list:
    return [rule.title_template, rule.evidence_template, rule.fix_template]


def _holes(text: str, template=None) -> list[str]:
    """Hole marks in ``text`` beyond those the template writes itself (``is not None`` in
    a code snippet is the rule's text, not a missing fact)."""
    found = [m.group(0).strip() for m in HOLE.finditer(text)]
    if template is not None:
        for own in _holes("".join(p for p in template.pieces if isinstance(p, str))):
            if own in found:
                found.remove(own)
    return found


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_rule_renders_without_holes_whatever_fact_is_missing(rule) -> None:
    facts: dict[str, object] = {}
    for template in _texts(rule):
        for piece in template.pieces:
            if not isinstance(piece, str):
                facts.setdefault(piece.name, _value(piece.name, piece.spec))
    for template in _texts(rule):
        text = template.render(facts)
        assert not _holes(text, template), (rule.id, text)
    for name in facts:
        for missing in (None, float("nan"), ""):
            rendered = [t.render({**facts, name: missing}) for t in _texts(rule)]
            for template, text in zip(_texts(rule), rendered, strict=True):
                assert not _holes(text, template), (rule.id, name, missing, text)
            assert rendered[0].strip(), (rule.id, name)  # a title is never empty


def test_a_missing_number_drops_its_sentence_only() -> None:
    t = compile_template("Use batch_size={bs} now. It holds {per:.1f} MiB per sample. Done.")
    assert t.render({"bs": 8, "per": None}) == "Use batch_size=8 now. Done."
    assert t.render({}) == "Done."
    assert compile_template("{n} slow steps").render({}) == "(not measured) slow steps"


SEEDED = "A seeded run prints other numbers from the second epoch on"


def test_fixes_that_turn_persistent_workers_on_say_a_seeded_run_changes() -> None:
    """Sweep s52 a01/a14: the stall fix's `persistent_workers=True` changed a seeded script's
    printed losses from the second epoch (2.3191 -> 2.3252) with no word of it. Every text
    that turns it on says so, and the claim is torch's own behaviour (checked below)."""
    from mpsprofiler.diagnosis.rules import builtin_rules_dir

    stall = (builtin_rules_dir() / "dataloader-stall.yaml").read_text()
    respawn = (builtin_rules_dir() / "worker-respawn.yaml").read_text()
    # worker-respawn's two fixes and worker-respawn-mac's two that set it
    assert stall.count(SEEDED) == 2 and respawn.count(SEEDED) == 4


def test_persistent_workers_draw_from_the_global_generator_once() -> None:
    """What the sentence says, read from torch: a new iterator per pass draws one number from
    the global generator for its workers' seed; persistent workers reuse the first one's."""
    import torch
    from torch.utils.data import DataLoader

    def after_two_passes(persistent: bool) -> float:
        torch.manual_seed(0)
        loader = DataLoader(list(range(4)), batch_size=2, num_workers=1, persistent_workers=persistent)
        for _ in range(2):
            for _batch in loader:
                pass
        return float(torch.rand(1))

    assert after_two_passes(True) != after_two_passes(False)
