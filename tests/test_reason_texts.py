"""``num_workers_reason`` is a list of codes; its sentences live in the rule file.

The analyzer says *why* (``waiting``, then the clauses that apply: ``memory``, ``rounded``,
``span`` ...) and the figures (``reason_*`` facts, unrounded); ``rules/dataloader-stall.yaml``
words each code in its ``phrases:``. So a rule author changes the advice without Python:
these tests render every code from the shipped rule file, and show that an edited rule
file changes the text the user reads.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.loader_advice import REASON_CODES, advise
from mpsprofiler.diagnosis.analyzers.loader_profile import LoaderFigures
from mpsprofiler.diagnosis.engine import evaluate, phrase_for
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

STALL_FILE = builtin_rules_dir() / "dataloader-stall.yaml"
RULE_OF_BOUND = {"waiting": "dataloader-stall", "cpu": "dataloader-stall", "unknown": "dataloader-stall",
                 "ipc": "dataloader-batch-indexing", "handoff": "dataloader-handoff",
                 "contention": "dataloader-cpu-contention"}


def reason_text(facts: Mapping[str, Any], path: Path = STALL_FILE, bound: str | None = None) -> str:
    """``num_workers_reason`` as the user reads it: the words of the rule that covers the
    loader's kind (``bound``, else the ``loader_bound`` fact), from the rule file at ``path``."""
    rules = {r.id: r for r in load_rules([path])}
    rule = rules[RULE_OF_BOUND[bound or str(facts.get("loader_bound") or "unknown")]]
    return phrase_for(rule.phrases, facts, "num_workers_reason", ()) or ""


def _fig(wait_ms: float, step_ms: float, cpu_ms: float | None = None, n: int = 40, **extra: Any) -> LoaderFigures:
    return LoaderFigures(steps=n, batches=n, dur=step_ms * n / 1e3, wait=wait_ms * n / 1e3,
                         wait_cpu=cpu_ms * n / 1e3 if cpu_ms is not None else None, **extra)


def _advise(bound: str, fig: LoaderFigures, workers: int = 0, train_s: float = 0.01, cores: int | None = 4,
            available: int | None = 64 * 2**30, per_start: int | None = 1000,
            spread: tuple[float, float, float] | None = None, logical: int = 8) -> dict[str, Any]:
    facts = advise(fig, bound, workers, train_s, 1, cores, "physical cores", 32, available, None, logical, per_start,
                   "fork", spread)
    facts["loader_bound"] = bound
    return facts


CASES: dict[str, tuple[dict[str, Any], str]] = {}
"""code -> (facts that hold it, a sentence of its phrase in the shipped rule file)."""


def _case(code: str, facts: dict[str, Any], words: str) -> None:
    assert code in facts["num_workers_reason"], (code, facts["num_workers_reason"])
    CASES[code] = (facts, words)


_case("waiting", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2),
      "the rest is waiting (disk, network, sleep or decoding that releases the GIL)")
_case("rounded", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=1, cores=2), "(a power of two)")
_case("unmeasured", _advise("unknown", _fig(30.0, 40.0), cores=2), "mpsprof could not tell which")
_case("max_workers", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=12, cores=2),
      "Beyond 8 worker processes the gain rarely pays")
_case("memory", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, available=2**30),
      "a quarter of the 1.0 GiB free at the start allows")
_case("startup", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, per_start=1),
      "Starting a worker costs about 50 ms (fork)")
_case("worker_cpu", _advise("waiting", _fig(90.0, 100.0, cpu_ms=60.0), cores=2),
      "Each worker still computes 60.0 ms of every 90.0 ms")
_case("span", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, spread=(3.0, 1.0, 6.0)),
      "workers is the range to try")
_case("enough", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=1, cores=2, per_start=1),
      "already, more would not pay")
_case("over_cpus", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, logical=2),
      "PyTorch warns when num_workers exceeds the CPUs")
_case("cpu_fits", _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=2), "with 25% to spare); this machine has")
_case("cpu_short", _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=None), "Workers beyond the free cores")
_case("ipc", _advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0)), "µs per sample")
_case("ipc_workers", _advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0), workers=2), "taking the batch in from a worker")
_case("handoff", _advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)), "each tensor's shared memory is handed over")
_case("contention", _advise("contention", _fig(3.0, 20.0, cpu_ms=1.0, machine_busy=0.97)),
      "ready to run but waiting for a free CPU core")


def test_every_code_has_a_case() -> None:
    assert set(CASES) == set(REASON_CODES)


@pytest.mark.parametrize("code", REASON_CODES)
def test_each_code_reads_as_its_sentence_from_the_rule_file(code: str) -> None:
    facts, words = CASES[code]
    said = reason_text(facts)
    assert words in said, (code, said)
    assert "{" not in said and "?" not in said and "None" not in said, said
    assert all(name not in said for name in REASON_CODES if "_" in name), said  # never a raw code


def test_plurals_and_kinds_of_core_come_from_the_rule_file() -> None:
    one = _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=8)
    assert "so 1 worker keeps up" in reason_text(one) and "of its 8 physical cores free" in reason_text(one)
    many = _advise("cpu", _fig(30.0, 40.0, cpu_ms=30.0), cores=8)
    assert f"so {many['num_workers_needed']} workers keep up" in reason_text(many)
    single = _advise("unknown", _fig(30.0, 40.0), cores=2)
    assert "no more than the 1 physical core free." in reason_text(single)


def test_a_changed_rule_file_changes_the_advice(tmp_path: Path) -> None:
    """The words are the rule file's: edit a phrase and the finding's fix says the new words."""
    facts = _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2)
    edited = tmp_path / "dataloader-stall.yaml"
    text = STALL_FILE.read_text()
    old = "Waiting\n          workers do not need a core each, so the number of cores does not limit them."
    assert old in text
    edited.write_text(text.replace(old, "Waiting workers need no core of their own (edited)."))
    before, after = reason_text(facts), reason_text(facts, edited)
    assert "does not limit them" in before and "does not limit them" not in after
    assert after.startswith(before.split(" Waiting workers")[0])
    assert "Waiting workers need no core of their own (edited)." in after
    # and through the engine: the finding's fix is rendered from the edited file
    shutil.copy(edited, tmp_path / "edited.yaml")
    edited.unlink()
    full = {**facts, "loading_wait_share": 0.4, "loading_wait_share_low": 0.3, "steady_steps": 40,
            "data_wait_ms": 30.0, "device_idle_share_while_waiting": None}
    rules = load_rules([tmp_path / "edited.yaml"])
    (finding,) = evaluate(rules, full, "cpu")
    assert "Waiting workers need no core of their own (edited)." in finding.fix
    assert "num_workers_reason" not in finding.facts  # a fix-only code: not one of the finding's facts


def test_a_code_without_a_phrase_leaves_its_sentence_out(tmp_path: Path) -> None:
    """A rule file that drops a clause's phrase drops that clause, never prints the code."""
    facts = _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=1, cores=2)
    assert "rounded" in facts["num_workers_reason"]
    text = STALL_FILE.read_text()
    start = text.index("        rounded: >-")
    end = text.index("        span: >-")
    edited = tmp_path / "no-rounded.yaml"
    edited.write_text(text[:start] + text[end:])
    said = reason_text(facts, edited)
    assert "power of two" not in said and "rounded" not in said
    assert said == reason_text(facts).split(" That rounds up")[0]
