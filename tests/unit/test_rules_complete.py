"""No shipped rule without a test: a new rule file, or a new rule in a file, fails here
until a test answers for it.

Every rule id in ``rules/*.yaml`` must be named, as a quoted string, by some other test
module (the one that triggers it, and proves a clean run stays quiet); every rule file
must be answered for, either by ``tests/e2e/test_rules_shipped.py`` (its ``RULE_FILES``) or by
the modules :data:`ANSWERED_ELSEWHERE` names, which must name every rule of the file.
Quick: it reads files, runs nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mpsprofiler.diagnosis.rules import load_rules
from tests.e2e.test_rules_shipped import RULE_FILES

TESTS = Path(__file__).resolve().parent.parent
RULES = TESTS.parent / "rules"

ANSWERED_ELSEWHERE: dict[str, tuple[str, ...]] = {
    "autograd-crash.yaml": ("test_autograd_crash.py",),
    "collate-crash.yaml": ("test_collate_crash.py",),
    "device-missing-crash.yaml": ("test_device_missing.py",),
    # straggler-rank: the torchrun straggler run; straggler-rank-work: a rank's own loop;
    # data-loading-imbalance and rank-near-memory-limit: tests/e2e/test_rank_rules.py
    "distributed.yaml": ("test_distributed.py", "test_loops.py", "test_rank_rules.py"),
    "host-bound.yaml": ("test_host_bound.py",),
    "nonfinite-loss.yaml": ("test_health.py",),
    "ops.yaml": ("test_ops_facts.py",),
    "pageable-copies.yaml": ("test_copies.py",),
    "step-signal.yaml": ("test_loops.py",),
}
"""Rule files outside ``RULE_FILES``, and the test modules that answer for them."""


def _rule_files() -> list[Path]:
    return sorted([*RULES.glob("*.yaml"), *RULES.glob("*.yml")])


def _ids(path: Path) -> list[str]:
    """The file's rule ids (a file that does not load would hide its rules: it fails here)."""
    ruleset = load_rules([path])
    assert [str(e) for e in ruleset.errors if e.level == "error"] == [], path.name
    ids = [rule.id for rule in ruleset]
    assert ids, f"{path.name} holds no rules"
    return ids


def _names(text: str, rule_id: str) -> bool:
    return re.search(rf"""(["']){re.escape(rule_id)}\1""", text) is not None


def _test_texts() -> dict[str, str]:
    me = Path(__file__).name
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(TESTS.rglob("test_*.py")) if p.name != me}


def test_every_rule_file_is_answered_for() -> None:
    files = {p.name for p in _rule_files()}
    assert files, "no rule files found"
    unanswered = sorted(files - set(RULE_FILES) - set(ANSWERED_ELSEWHERE))
    assert unanswered == [], (f"rule files no test answers for: {unanswered}; add them to RULE_FILES in "
                              "tests/e2e/test_rules_shipped.py or to ANSWERED_ELSEWHERE here, with their tests")
    stale = sorted((set(RULE_FILES) | set(ANSWERED_ELSEWHERE)) - files)
    assert stale == [], f"rule files named by the tests but not shipped: {stale}"
    assert not set(RULE_FILES) & set(ANSWERED_ELSEWHERE), "a file answered for twice"


@pytest.mark.parametrize("rule_file", sorted(ANSWERED_ELSEWHERE))
def test_the_answering_modules_name_every_rule_of_their_file(rule_file: str) -> None:
    modules = ANSWERED_ELSEWHERE[rule_file]
    paths = {p.name: p for p in TESTS.rglob("test_*.py")}
    missing_modules = [m for m in modules if m not in paths]
    assert missing_modules == [], f"{rule_file}: no such test module {missing_modules}"
    texts = [paths[m].read_text(encoding="utf-8") for m in modules]
    silent = [rule_id for rule_id in _ids(RULES / rule_file) if not any(_names(t, rule_id) for t in texts)]
    assert silent == [], f"{rule_file}: rules none of {list(modules)} names: {silent}"
    for module, text in zip(modules, texts, strict=True):  # each module answers for something
        assert any(_names(text, rule_id) for rule_id in _ids(RULES / rule_file)), f"{module} names no rule of {rule_file}"


def test_every_shipped_rule_is_named_by_a_test() -> None:
    texts = _test_texts()
    untested = {path.name: [rule_id for rule_id in _ids(path) if not any(_names(t, rule_id) for t in texts.values())]
                for path in _rule_files()}  # fmt: skip
    untested = {name: ids for name, ids in untested.items() if ids}
    assert untested == {}, f"rules no test module names (as a quoted string): {untested}"


def test_the_check_sees_a_rule_without_a_test(tmp_path: Path) -> None:
    """The check itself: a rule id no test names is caught, a quoted one is not."""
    text = 'assert found["straggler-rank"]\nsee = "straggler-rank-workX"\n'
    assert _names(text, "straggler-rank")
    assert not _names(text, "straggler-rank-work")  # a longer id is not its prefix
    assert not _names("straggler-rank in a comment", "straggler-rank")
    assert not _names("'straggler-rank\"", "straggler-rank")  # mismatched quotes
