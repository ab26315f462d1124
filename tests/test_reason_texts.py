"""``num_workers_reason``, ``stall_advice`` and ``loader_figures`` are codes; their sentences
live in the rule file.

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

from mpsprofiler.diagnosis.analyzers.common import compute_cores
from mpsprofiler.diagnosis.analyzers.loader_advice import (
    CORE_KINDS,
    FIGURES_CODES,
    REASON_CODES,
    STALL_ADVICE_CODES,
    advise,
)
from mpsprofiler.diagnosis.analyzers.loader_profile import LoaderFigures
from mpsprofiler.diagnosis.engine import evaluate, phrase_for
from mpsprofiler.diagnosis.rules import builtin_rules_dir, load_rules

STALL_FILE = builtin_rules_dir() / "dataloader-stall.yaml"
RULE_OF_BOUND = {"waiting": "dataloader-stall", "cpu": "dataloader-stall", "unknown": "dataloader-stall",
                 "ipc": "dataloader-batch-indexing", "handoff": "dataloader-handoff",
                 "contention": "dataloader-cpu-contention"}


def phrased(facts: Mapping[str, Any], name: str, path: Path = STALL_FILE, bound: str | None = None) -> str:
    """Fact ``name`` as the user reads it: the words of the rule that covers the loader's
    kind (``bound``, else the ``loader_bound`` fact), from the rule file at ``path``."""
    rules = {r.id: r for r in load_rules([path])}
    rule = rules[RULE_OF_BOUND[bound or str(facts.get("loader_bound") or "unknown")]]
    return phrase_for(rule.phrases, facts, name, ()) or ""


def reason_text(facts: Mapping[str, Any], path: Path = STALL_FILE, bound: str | None = None) -> str:
    """``num_workers_reason`` as the user reads it (see :func:`phrased`)."""
    return phrased(facts, "num_workers_reason", path, bound)


def figures_text(facts: Mapping[str, Any], path: Path = STALL_FILE, bound: str | None = None) -> str:
    """``loader_figures``, the evidence's sentence of measured figures, as the user reads it."""
    return phrased(facts, "loader_figures", path, bound)


def advice_text(facts: Mapping[str, Any], path: Path = STALL_FILE) -> str:
    """``stall_advice``, the end of a stall finding's title, as the user reads it (only the
    stall rules' titles quote it: the other loader rules have their own titles)."""
    return phrased(facts, "stall_advice", path, "waiting")


def _fig(wait_ms: float, step_ms: float, cpu_ms: float | None = None, n: int = 40, **extra: Any) -> LoaderFigures:
    return LoaderFigures(steps=n, batches=n, dur=step_ms * n / 1e3, wait=wait_ms * n / 1e3,
                         wait_cpu=cpu_ms * n / 1e3 if cpu_ms is not None else None, **extra)


def _advise(bound: str, fig: LoaderFigures, workers: int = 0, train_s: float = 0.01, cores: int | None = 4,
            available: int | None = 64 * 2**30, per_start: int | None = 1000,
            spread: tuple[float, float, float] | None = None, logical: int = 8) -> dict[str, Any]:
    facts = advise(fig, bound, workers, train_s, 1, cores, "physical", 32, available, None, logical, per_start,
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
    old = "Waiting\n      workers do not need a core each, so the number of cores does not limit them."
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
    start = text.index("    rounded: >-")
    end = text.index("    span: >-")
    edited = tmp_path / "no-rounded.yaml"
    edited.write_text(text[:start] + text[end:])
    said = reason_text(facts, edited)
    assert "power of two" not in said and "rounded" not in said
    assert said == reason_text(facts).split(" That rounds up")[0]


# -- stall_advice, loader_figures and the kinds of core -----------------------------------
ADVICE: dict[str, tuple[dict[str, Any], str]] = {
    "try_workers": (_advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2), "try num_workers=4"),
    "needs_cpu": (_advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=1, cores=2, per_start=1),
                  "building batches needs more CPU than this machine has"),
    "index_batches": (_advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0)), "index whole batches instead of single samples"),
    "handoff": (_advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)), "workers would not shorten it"),
    "busy_cpus": (_advise("contention", _fig(3.0, 20.0, cpu_ms=1.0, machine_busy=0.97)), "the machine's CPUs are busy"),
}
"""stall_advice code -> (facts that hold it, its words in the shipped rule file, whole)."""


@pytest.mark.parametrize("code", STALL_ADVICE_CODES)
def test_each_stall_advice_reads_as_its_words_from_the_rule_file(code: str) -> None:
    assert set(ADVICE) == set(STALL_ADVICE_CODES)
    facts, words = ADVICE[code]
    assert facts["stall_advice"] == code
    assert advice_text(facts) == words


FIGURES: list[tuple[dict[str, Any], str]] = [
    (_advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0, wait_runq=0.08), cores=2),
     "Loading one batch of 32 samples takes 30.0 ms in the training process, 1.0 ms of it CPU work and 2.0 ms "
     "waiting for a free CPU core. The loading is mostly waiting (I/O, sleep)."),
    (_advise("cpu", _fig(30.0, 40.0, cpu_ms=25.0, machine_busy=0.95), cores=4),
     "Loading one batch of 32 samples takes 30.0 ms in the training process, 25.0 ms of it CPU work; the "
     "machine's CPUs were 95% busy. The loading is CPU work."),
    (_advise("unknown", _fig(30.0, 40.0), cores=2),
     "Loading one batch of 32 samples takes 30.0 ms in the training process."),
    (_advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0), workers=2),
     "Each of the 2 workers takes about 40.0 ms per batch. The workers keep up: the wait is taking their batches in."),
    (_advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)),
     "Loading one batch of 32 samples takes 3.0 ms in the training process, 3.0 ms of it CPU work. The loading is "
     "about as cheap in the training process as taking the batch in from a worker."),
    (_advise("contention", _fig(3.0, 20.0, cpu_ms=1.0, machine_busy=0.5)),
     "Loading one batch of 32 samples takes 3.0 ms in the training process, 1.0 ms of it CPU work. The loading is "
     "waiting for a busy CPU."),
]
"""Facts -> the evidence's sentence of figures, whole, as the shipped rule file words it."""


@pytest.mark.parametrize("case", range(len(FIGURES)))
def test_loader_figures_read_as_their_sentence_from_the_rule_file(case: int) -> None:
    facts, words = FIGURES[case]
    assert facts["loader_figures"] in FIGURES_CODES
    assert figures_text(facts) == words


def test_loader_figures_without_a_load_time_leave_the_sentence_out() -> None:
    facts = {**FIGURES[0][0], "loader_figures": None}
    assert figures_text(facts) == ""
    unknown_batch = {**FIGURES[0][0], "figures_batch_size": "unknown"}
    assert figures_text(unknown_batch).startswith("Loading one batch takes 30.0 ms")


def test_compute_cores_names_a_kind_the_rule_file_words() -> None:
    env: Any = {"cores_performance": 6, "cores_physical": 10, "cores_logical": 10}
    assert compute_cores(env) == (6, "performance")
    assert compute_cores({**env, "cores_performance": None}) == (10, "physical")
    assert compute_cores({"cores_logical": 4}) == (4, "logical")  # type: ignore[typeddict-item]
    assert compute_cores({}) == (None, "unknown")  # type: ignore[typeddict-item]
    words = {"performance": "6 performance cores", "physical": "6 physical cores", "logical": "6 logical cores",
             "unknown": "6 cores"}
    assert set(words) == set(CORE_KINDS)
    for kind, said in words.items():
        facts = advise(_fig(30.0, 40.0, cpu_ms=30.0), "cpu", 0, 0.01, 1, 6, kind, 32, 64 * 2**30, None, 8, 1000)
        facts["loader_bound"] = "cpu"
        assert f"this machine has {said} and the training uses" in reason_text(facts) or \
            f"of its {said} free" in reason_text(facts), (kind, reason_text(facts))


def test_edited_rule_texts_change_the_title_and_the_evidence(tmp_path: Path) -> None:
    """stall_advice and loader_figures are worded by the rule file too."""
    facts = ADVICE["try_workers"][0]
    text = STALL_FILE.read_text()
    edited = tmp_path / "dataloader-stall.yaml"
    old_advice = 'try_workers: "try num_workers={suggested_num_workers}"'
    old_cpu = 'other: ", {figures_cpu_ms:.1f} ms of it CPU work"'
    assert text.count(old_advice) == 1 and old_cpu in text  # the file's shared phrases: one place
    edited.write_text(text.replace(old_advice, 'try_workers: "set num_workers to {suggested_num_workers} (edited)"')
                      .replace(old_cpu, 'other: " (CPU: {figures_cpu_ms:.2f} ms)"'))
    assert advice_text(facts, edited) == "set num_workers to 4 (edited)"
    assert figures_text(facts, edited).startswith(
        "Loading one batch of 32 samples takes 30.0 ms in the training process (CPU: 1.00 ms). The loading")
    full = {**facts, "loading_wait_share": 0.4, "loading_wait_share_low": 0.3, "steady_steps": 40,
            "data_wait_ms": 30.0, "device_idle_share_while_waiting": None}
    (finding,) = evaluate(load_rules([edited]), full, "cpu")
    assert finding.title.endswith(": set num_workers to 4 (edited)")
    assert "in the training process (CPU: 1.00 ms). The loading is mostly waiting" in finding.evidence
    assert finding.facts["stall_advice"] == "try_workers" and finding.facts["loader_figures"] == "in_process"


def test_an_empty_phrase_reads_as_no_words_and_keeps_its_sentence(tmp_path: Path) -> None:
    """The engine's part of the optional clauses above: a phrase written ``""`` says
    nothing but is not missing (its sentence stays), a value with no phrase at all is
    missing (its sentence is left out), and a quoted phrase keeps its leading space."""
    rule = tmp_path / "r.yaml"
    rule.write_text('rules:\n  - id: clause-test\n    title: "t"\n    severity: info\n    when: "x > 0"\n'
                    '    evidence: "It took {x} ms{cpu}. Then it ended."\n    fix: "f"\n'
                    '    phrases:\n      cpu: {unknown: "", other: " ({cpu} ms of CPU)"}\n')
    (finding,) = evaluate(load_rules([rule]), {"x": 3, "cpu": "unknown"}, None)
    assert finding.evidence == "It took 3 ms. Then it ended."
    (finding,) = evaluate(load_rules([rule]), {"x": 3, "cpu": 2}, None)
    assert finding.evidence == "It took 3 ms (2 ms of CPU). Then it ended."
    rule.write_text(rule.read_text().replace('{unknown: "", other: " ({cpu} ms of CPU)"}', '{measured: "yes"}'))
    (finding,) = evaluate(load_rules([rule]), {"x": 3, "cpu": 2}, None)
    assert finding.evidence == "Then it ended."


NONFINITE_FILE = builtin_rules_dir() / "nonfinite-loss.yaml"
FIX_FIRST = {
    "scale_loss": "Scale the loss: fp16 gradients overflow and underflow without a `torch.amp.GradScaler` (or train "
                  "in bfloat16, which needs none).",
    "clip_gradients": "Clip the gradients and lower the learning rate: the gradient norm jumped before the loss "
                      "diverged.",
    "lower_lr": "Lower the learning rate (or warm it up), and look for a log, a division or a sqrt of zero or of a "
                "negative number in the loss.",
}
"""nonfinite_fix_first code -> its words (as the analyzer wrote them before they moved to the rule file)."""


@pytest.mark.parametrize("code", sorted(FIX_FIRST))
def test_nonfinite_fix_first_reads_from_the_rule_file(code: str, tmp_path: Path) -> None:
    (rule,) = load_rules([NONFINITE_FILE])
    facts = {"nonfinite_fix_first": code}
    assert phrase_for(rule.phrases, facts, "nonfinite_fix_first", ()) == FIX_FIRST[code]
    edited = tmp_path / "nonfinite-loss.yaml"
    edited.write_text(NONFINITE_FILE.read_text().replace(FIX_FIRST[code].split(":")[0].split(" (")[0],
                                                         "EDITED", 1))
    (rule,) = load_rules([edited])
    assert (phrase_for(rule.phrases, facts, "nonfinite_fix_first", ()) or "").startswith("EDITED")


def test_a_files_phrases_are_every_rules_unless_a_rule_has_its_own(tmp_path: Path) -> None:
    """Top-level ``phrases:`` in a rule file: one table for the rules that share a fact's
    words (the loader rules' figures), replaced for a fact by a rule's own table."""
    rule = tmp_path / "r.yaml"
    rule.write_text('phrases:\n  kind: {cpu: "CPU work", io: "waiting"}\n'
                    'rules:\n'
                    '  - id: shared\n    title: "t"\n    severity: info\n    when: "x > 0"\n'
                    '    evidence: "It ran. It is {kind}."\n    fix: "f"\n'
                    '  - id: own\n    title: "t"\n    severity: info\n    when: "x > 0"\n'
                    '    evidence: "It ran. It is {kind}."\n    fix: "f"\n'
                    '    phrases:\n      kind: {cpu: "busy"}\n')
    rules = load_rules([rule])
    assert [str(e) for e in rules.errors] == []
    found = {f.rule: f.evidence for f in evaluate(rules, {"x": 1, "kind": "cpu"}, None)}
    assert found == {"shared": "It ran. It is CPU work.", "own": "It ran. It is busy."}
    found = {f.rule: f.evidence for f in evaluate(rules, {"x": 1, "kind": "io"}, None)}
    assert found == {"shared": "It ran. It is waiting.", "own": "It ran."}  # its own table has no "io"
    rule.write_text(rule.read_text().replace('phrases:\n  kind: {cpu: "CPU work", io: "waiting"}\n', 'phrases: [1]\n'))
    assert any("'phrases' must map fact names" in str(e) for e in load_rules([rule]).errors)
