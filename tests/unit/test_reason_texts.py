"""``num_workers_reason``, ``stall_advice`` and ``loader_figures`` are codes; their sentences
live in the rule file.

The analyzer says *why* (``waiting``, then the clauses that apply: ``memory``, ``rounded``,
``span`` ...) and the figures (``reason_*`` facts, unrounded); ``rules/dataloader-stall.yaml``
words each code in its ``phrases:``. So a rule author changes the advice without Python:
these tests render every code from the shipped rule file, and show that an edited rule
file changes the text the user reads. The other analyzers' codes (what preceded a NaN, the
line that keeps a leak, which DataLoader, where float64 comes from, where to set torch's
threads, the straggler's figures) are held the same way at the end of this file.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.common import compute_cores
from mpsprofiler.diagnosis.analyzers.dataloader import STARTUP_ADVICE
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
                 "sampler": "dataloader-stall",
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
            spread: tuple[float, float, float] | None = None, logical: int = 8,
            average: float | None = None, sampler: tuple[float, str, str] | None = None,
            others: float | None = None) -> dict[str, Any]:
    facts = advise(fig, bound, workers, train_s, 1, cores, "physical", 32, available, None, logical, per_start,
                   "fork", spread, average, sampler=sampler, others=others)
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
_case("unmeasured_try", _advise("unknown", _fig(30.0, 40.0), workers=2, cores=2),
      "`mpsprof try --set dataloader.num_workers=8`")
_case("over_cpus", _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, logical=2),
      "PyTorch warns when num_workers exceeds the CPUs")
_case("cpu_fits", _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=2), "with 25% to spare); this machine has")
_case("cpu_short", _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=None), "more workers than reach that only take turns")
_case("ipc", _advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0)), "µs per sample")
_case("ipc_workers", _advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0), workers=2), "With 2 workers the training waited")
_case("handoff", _advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)), "each tensor's shared memory is handed over")
_case("contention", _advise("contention", _fig(3.0, 20.0, cpu_ms=0.5, machine_busy=0.97, wait_runq=2.0 * 40 / 1e3)),
      "ready to run but waiting for a free CPU core")


# a shard every few batches: the median step loads 0.4x its training, the average 18x
_case("bursts", _advise("waiting", _fig(12.8, 13.5, cpu_ms=0.3), cores=2, spread=(0.4, 0.1, 1.0), average=18.0),
      "The loading comes in bursts: the median step loads only 0.4 times as long as it trains")
_case("sampler", _advise("sampler", _fig(21.0, 23.0, cpu_ms=0.5), sampler=(0.0202, "BucketBatchSampler",
                                                                          "batch_sampler")),
      "went to drawing its indices from the batch sampler `BucketBatchSampler`")
_case("iterable", {**_advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2),
                   "num_workers_reason": ["waiting", "iterable"]},
      "with 4 workers every sample comes 4 times unless `__iter__` gives each worker its share")

# set by the dataloader analyzer (dataloader.py: STARTUP_ADVICE), over advise()'s own codes,
# where spawn workers restarted at every epoch are the wait
RESTARTS = {**_advise("cpu", _fig(30.0, 40.0, cpu_ms=30.0), workers=2, cores=2), **STARTUP_ADVICE,
            "num_workers": 2, "worker_start_method": "spawn", "respawn_wait_ms": 4389.2, "respawn_cost_s": 27.0,
            "epochs_seen": 6, "respawn_basis": "whole"}
_case("restarts", RESTARTS,
      "with `persistent_workers=False` the 2 workers are started again (with spawn, a new Python that imports "
      "torch and the script) at every pass over the loader, and each epoch's first batch waited 4,389 ms longer "
      "than the others, 27.00 s over 6 epochs")


def test_bursts_size_the_workers_from_the_average_and_the_median_stays_for_the_rest() -> None:
    bursty = _advise("waiting", _fig(12.8, 13.5, cpu_ms=0.3), cores=2, spread=(0.4, 0.1, 1.0), average=18.0)
    assert bursty["num_workers_needed"] == 23 and bursty["suggested_num_workers"] == 8  # 18 x 1.25; the bound
    assert "span" not in bursty["num_workers_reason"]  # the quartiles' range would say 1-2
    assert "(12.8 / 0.7 with 25% to spare)" in reason_text(bursty)
    even = _advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, spread=(3.0, 2.5, 3.5), average=3.4)
    assert "bursts" not in even["num_workers_reason"] and even["num_workers_needed"] == 4  # the median's 3 x 1.25


def test_the_median_steps_ratio_and_figures_agree_with_the_worker_count() -> None:
    """A Fabric run's fix read "It trains in 9.6 ms, so 33 workers keep up (the median step
    loads 26.0 times as long as it trains": 9.6 ms was the average step's training, 26.0 the
    median step's ratio, so 9.6 x 26 was no load time of the run. With the median step's own
    figures the sentence says which is which, and its arithmetic holds: the ratio printed
    is its load over its training, and the count is that ratio with 25% to spare."""
    import math
    import re
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_advice import HEADROOM, median_step, step_loads, step_ratios

    # 10 steps: trains 8 to 12 ms, waits 150 to 330 ms (the median step by ratio: 5th)
    points = [SimpleNamespace(wait=w, dur=w + c, batches=1) for w, c in
              [(0.25, 0.0096), (0.20, 0.008), (0.33, 0.012), (0.15, 0.010), (0.26, 0.0104),
               (0.30, 0.009), (0.18, 0.011), (0.22, 0.0086), (0.28, 0.0099), (0.24, 0.0101)]]
    loads = step_loads(points, 0)
    middle = median_step(loads)
    spread = step_ratios(loads)
    assert middle is not None and spread is not None
    ratios = sorted(load / c for load, c in loads)
    assert middle[0] / middle[1] == ratios[4]  # the lower of the middle two: one step's own figures
    facts = advise(_fig(240.0, 250.0, cpu_ms=1.0), "waiting", 0, 0.0098, 1, 2, "physical", 32, 64 * 2**30, None, 8,
                   1000, "fork", spread, sum(ratios) / len(ratios), middle=middle)
    facts["loader_bound"] = "waiting"
    text = reason_text(facts)
    assert "It trains in 10.0 ms on average" in text  # the steps' average, said so
    m = re.search(r"so (\d+) workers keep up \(sized from the median step, which took ([\d.]+) ms to load a batch "
                  r"and ([\d.]+) ms to train on it: ([\d.]+) times as long, with 25% to spare\)", text)
    assert m is not None, text
    needed, load_ms, train_ms, ratio = int(m[1]), float(m[2]), float(m[3]), float(m[4])
    assert load_ms / train_ms == pytest.approx(ratio, abs=0.06)
    assert needed == math.ceil(middle[0] / middle[1] * HEADROOM) == facts["num_workers_needed"]
    # 2 micro-batches a step (a Trainer's gradient_accumulation_steps=2): the median step's
    # figures are a batch's, as "It trains in" is (it read 76.1 ms beside "36.7 ms on average")
    two = LoaderFigures(steps=20, batches=40, dur=0.250 * 20, wait=0.240 * 20, wait_cpu=0.001 * 40)
    facts = advise(two, "waiting", 0, 0.0098, 1, 2, "physical", 32, 64 * 2**30, None, 8, 1000, "fork", spread,
                   sum(ratios) / len(ratios), middle=middle)
    facts["loader_bound"] = "waiting"
    assert f"which took {middle[0] / 2 * 1000:.1f} ms to load a batch and {middle[1] / 2 * 1000:.1f} ms" in (
        reason_text(facts)), reason_text(facts)
    assert "It trains in 5.0 ms on average" in reason_text(facts)
    # without the median step's figures (an older caller) the sentence still names its statistic
    facts = advise(_fig(240.0, 250.0, cpu_ms=1.0), "waiting", 0, 0.0098, 1, 2, "physical", 32, 64 * 2**30, None, 8,
                   1000, "fork", spread, sum(ratios) / len(ratios))
    facts["loader_bound"] = "waiting"
    assert "on average, so" in reason_text(facts) and "(the median step loads" in reason_text(facts)


def test_a_loader_with_enough_workers_and_no_cpu_reading_is_not_bounded_by_cores() -> None:
    """8 workers already, their CPU not measured (a short run): the reason says more would
    not pay, without "so no more than the 1 core free", which bounded a number it no longer
    suggests."""
    facts = _advise("unknown", _fig(30.0, 40.0), workers=8, cores=2)
    said = reason_text(facts)
    assert facts["num_workers_reason"][0] == "unmeasured" and "enough" in facts["num_workers_reason"]
    assert "mpsprof could not tell which" in said and "With 8 workers already, more would not pay" in said
    assert "no more than the" not in said, said


def test_a_loader_with_few_workers_and_no_cpu_reading_is_told_to_measure_not_that_more_would_not_pay() -> None:
    """2 workers, their CPU not measured (a Lightning run of 60 steps, 2 s: under two readings),
    1 core free: only that core held the count back, and it bounds a loader that computes, not
    one that waits. A sleeping collate_fn was told "With 2 workers already, more would not
    pay" where 8 workers ran it 3x faster; it is told how to measure more instead, and no
    snippet (whether they help is not known)."""
    facts = _advise("unknown", _fig(30.0, 40.0), workers=2, cores=2)
    said = reason_text(facts)
    assert facts["num_workers_reason"][0] == "unmeasured" and "unmeasured_try" in facts["num_workers_reason"]
    assert "more would not pay" not in said and "no more than the" not in said, said
    assert "With 2 workers already, more pay only if the loading waits" in said, said
    assert f"--set dataloader.num_workers={facts['reason_try_workers']}" in said
    assert 2 < facts["reason_try_workers"] <= 8  # the other limits (8 at most) still bound it
    assert facts["num_workers_helps"] is False and facts["suggested_num_workers"] == 2


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
    assert "no more than the 1 physical core free beside the training." in reason_text(single)


def test_cores_other_programs_kept_busy_are_not_called_free() -> None:
    """2 cores, the training on 1, other programs on 1.4: "this machine has 1 of its 2
    physical cores free beside the training" was said of a core the run never saw free."""
    busy = _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, others=1.4)
    assert busy["cores_free_for_workers"] == 0 and busy["suggested_num_workers"] == 1
    assert ("this machine has" not in reason_text(busy) and "no core of this machine's 2 physical cores was free beside "
            "the training during the run (other programs kept about 1.4 busy during the run), so the workers take turns "
            "on busy cores.") in reason_text(busy), reason_text(busy)
    quiet = _advise("cpu", _fig(30.0, 40.0, cpu_ms=1.0), cores=2, others=0.1)  # the launcher's sampling, say
    assert "this machine has 1 of its 2 physical cores free beside the training." in reason_text(quiet)
    computes = _advise("waiting", _fig(90.0, 100.0, cpu_ms=60.0), cores=2, others=1.4)
    assert "fill busy cores, taking turns with what runs there: none was free" in reason_text(computes), \
        reason_text(computes)


def test_one_worker_is_one_worker_in_the_evidence_and_the_reason() -> None:
    """Before: "Each of the 1 workers takes ..." and "With 1 worker workers the training waited"."""
    one = _advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0), workers=1)
    assert reason_text(one).startswith("With 1 worker the training waited"), reason_text(one)
    assert figures_text(one).startswith("The one worker takes about"), figures_text(one)


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
    full = {**facts, "loading_wait_share": 0.4, "loading_wait_share_low": 0.3, "steady_steps": 40, "steady_batches": 40,
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
    "needs_cpu": (_advise("cpu", _fig(30.0, 40.0, cpu_ms=30.0), workers=2, cores=2),
                  "building batches needs more CPU than this machine has"),
    # a loader that waits, or one whose workers' CPU was not measured, is never told it
    # needs CPU where more workers would not pay (here: their start-up cost)
    "load_faster": (_advise("waiting", _fig(30.0, 40.0, cpu_ms=1.0), workers=1, cores=2, per_start=1),
                    "each batch takes longer to load than the workers can hide"),
    "index_batches": (_advise("ipc", _fig(3.0, 20.0, cpu_ms=3.0)), "index whole batches instead of single samples"),
    "handoff": (_advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)), "workers would not shorten it"),
    "busy_cpus": (_advise("contention", _fig(3.0, 20.0, cpu_ms=1.0, machine_busy=0.97)), "the machine's CPUs are busy"),
    "restarts": (RESTARTS, "its workers start again at every epoch (persistent_workers=True keeps them)"),
    "sampler": (_advise("sampler", _fig(21.0, 23.0, cpu_ms=0.5), workers=2, sampler=(0.0202, "SlowOrder", "sampler")),
                "its sampler SlowOrder takes 20.2 ms per batch in the training process, which workers cannot take "
                "over"),
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
    # one worker is no "Each of the 1 workers" (seen on an HF Trainer with dataloader_num_workers=1)
    (_advise("waiting", _fig(60.0, 40.0, cpu_ms=2.0), workers=1),
     "The one worker takes about 40.0 ms per batch. The loading is mostly waiting (I/O, sleep)."),
    (_advise("handoff", _fig(3.0, 20.0, cpu_ms=3.0)),
     "Loading one batch of 32 samples takes 3.0 ms in the training process, 3.0 ms of it CPU work. The loading is "
     "about as cheap in the training process as taking the batch in from a worker."),
    (_advise("sampler", _fig(21.0, 23.0, cpu_ms=0.5), sampler=(0.0202, "BucketBatchSampler", "batch_sampler")),
     "Loading one batch of 32 samples takes 21.0 ms in the training process, 0.5 ms of it CPU work. Most of it is "
     "drawing the batch's indices from the batch sampler `BucketBatchSampler`, 20.2 ms a batch."),
    (_advise("contention", _fig(3.0, 20.0, cpu_ms=0.5, machine_busy=0.5, wait_runq=2.0 * 40 / 1e3)),
     "Loading one batch of 32 samples takes 3.0 ms in the training process, 0.5 ms of it CPU work and 2.0 ms "
     "waiting for a free CPU core. The loading is waiting for a busy CPU."),
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
        assert f"this machine has {said} and the training keeps" in reason_text(facts) or \
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
    full = {**facts, "loading_wait_share": 0.4, "loading_wait_share_low": 0.3, "steady_steps": 40, "steady_batches": 40,
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
                  "in bfloat16, which needs none, where the device has it: on CUDA `torch.cuda.is_bf16_supported()`, "
                  "on MPS bfloat16 autocast from torch 2.6 on macOS 14).",
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


# -- the other analyzers' sentences: codes and figures, worded by their rule files ---------
# (issue 32: what preceded a NaN, the line that keeps a leak, which DataLoader and where to
# change it, where float64 comes from, where to set torch's threads, the workers beside
# them, what makes a rank the straggler). The words are the ones the analyzers wrote before.
RULES_DIR = builtin_rules_dir()
NAN, INF = float("nan"), float("inf")


def _health(**event: Any) -> dict[str, Any]:
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.health import health_facts

    bad = {"step": 9, "checked": "every step", **event}
    return health_facts(SimpleNamespace(health=SimpleNamespace(loss_checks=9, loss_checked="every step", loss_steps=10,
                                                               loss_every=None, loss_sampled_from=None,
                                                               nonfinite=bad)))  # type: ignore[arg-type]


def _leak(between: list[Any] | None = None, **site: Any) -> dict[str, Any]:
    """``between``: lists grown outside the sampled steps (session.leaks.KeptBetween)."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.leaks import leak_facts

    fields = {"file": "/w/train.py", "line": 12, "code": "outs.append(out)", "op": "aten::mm", "module": "", "alive": 6,
              "alive_one": None, "steps": [5, 10], "bytes": 4096, "holder": "", "holder_file": "", "holder_line": 0,
              "holder_code": "", "grad": True, "holder_step": 0, "holder_step0": 0, "holder_size": 0, "holder_size0": 0}
    fields.update(site)
    from mpsprofiler.session.leaks import LeakSite

    leaks = SimpleNamespace(carries=[], sites=[LeakSite(**fields)] if site.get("alive", 6) else [], lag=5, between=between or [])
    from mpsprofiler.session.session import Session

    session = Session()  # no steps, no memory samples: nothing says the memory stayed flat
    session.leaks = leaks  # type: ignore[assignment]
    return leak_facts(session)


def _between(tmp: Path, line: str) -> Any:
    """A list grown between the steps, appended to at line 2 of a script in ``tmp``."""
    from mpsprofiler.session.leaks import KeptBetween

    script = tmp / "eval.py"
    script.write_text(f"val_preds = []\n{line}\n")
    return KeptBetween("val_preds", str(script), 2, line, 2, 15, 48, 244, 5, 2**20)


def _loader(tmp: Path, script: str | None, count: int = 1, created: int = 1, trainer: bool = False,
            side: bool = False) -> dict[str, Any]:
    loader: dict[str, Any] = {"file": str(tmp / script) if script else None, "line": 2 if script else None,
                              "created": created}
    # the others built before it (and after, up to `count`), each at a line of its own
    others = [{**loader, "line": 100 + k if script else None, "created": k}
              for k in [*range(1, created), *range(created + 1, count + 1)]]
    return _place(tmp, [*others, loader], loader, trainer, side)


def _place(tmp: Path, loaders: list[dict[str, Any]], loader: dict[str, Any], trainer: bool = False,
           side: bool = False) -> dict[str, Any]:
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_place import place_facts

    framework = "transformers Trainer" if trainer else None
    session = SimpleNamespace(dataloaders=dict(enumerate(loaders)), run={"cwd": str(tmp)},
                              model={"framework": framework}, framework=framework)
    return place_facts(session, loader, 2, 0, "8", None, side)  # type: ignore[arg-type]


def _hooked(tmp: Path) -> dict[str, Any]:
    """A LightningModule's loaders: ``val_dataloader()``'s built first, then ``train_dataloader()``'s."""
    val = {"file": str(tmp / "train.py"), "line": 9, "created": 1, "role": "eval", "hook": "val_dataloader"}
    train = {"file": str(tmp / "train.py"), "line": 2, "created": 2, "hook": "train_dataloader"}
    return _place(tmp, [val, train], train)


def _hf_cli(tmp: Path) -> dict[str, Any]:
    """A Trainer whose TrainingArguments come from the command line (HfArgumentParser)."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_place import place_facts

    script = tmp / "hfcli.py"
    script.write_text("from transformers import HfArgumentParser\nHfArgumentParser(()).parse_args_into_dataclasses()\n")
    loader = {"file": str(script), "line": 2, "created": 1}
    session = SimpleNamespace(dataloaders={0: loader}, run={"cwd": str(tmp), "argv": [str(script), "--output_dir", "o"]},
                              model={"framework": "transformers Trainer"}, framework="transformers Trainer")
    return place_facts(session, loader, 2, 0, "8", None)  # type: ignore[arg-type]


def _copies(tmp: Path) -> dict[str, Any]:
    """accelerate's prepare: a training loader (line 24) and an evaluation loader (line 26),
    then a copy of each, built by the probe's count 3rd and 4th at the same lines."""
    at = {"file": str(tmp / "train.py")}
    loaders = [{**at, "line": line, "created": n} for n, line in ((1, 24), (2, 26), (3, 24), (4, 26))]
    return _place(tmp, loaders, loaders[3])


def _rebuilt(tmp: Path) -> dict[str, Any]:
    """A loader built anew every epoch at one line: one DataLoader to the user."""
    loaders = [{"file": str(tmp / "train.py"), "line": 2, "created": n} for n in (1, 2, 3)]
    return _place(tmp, loaders, loaders[2])


def _shared_loaders(tmp: Path) -> dict[str, Any]:
    """Two loaders built at one line of a helper, the 2nd made at line 6."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_place import place_facts

    script = tmp / "train.py"
    script.write_text("from torch.utils.data import DataLoader\ndef make_loader(ds):\n    return DataLoader(ds)\n"
                      "def main():\n    a = make_loader([1])\n    b = make_loader([2])\n")
    first = {"file": str(script), "line": 2, "created": 1, "call_file": str(script), "call_line": 5, "call_func": "make_loader"}
    second = {**first, "created": 2, "call_line": 6}
    session = SimpleNamespace(dataloaders={1: first, 2: second}, run={"cwd": str(tmp)}, model={"framework": None},
                              framework=None)
    return place_facts(session, second, 2, 0, "8", None)  # type: ignore[arg-type]


def _loop_loaders(tmp: Path, literal: bool) -> dict[str, Any]:
    """Two loaders built at one line in a loop (``loaders[split] = DataLoader(...)``), the
    2nd the slow one: over a literal tuple the pass that built it is known, over a name not."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_place import place_facts

    script = tmp / ("loop.py" if literal else "loopvar.py")
    head = 'for split in ("val", "train"):\n' if literal else "for split in splits:\n"
    script.write_text("from torch.utils.data import DataLoader\nsplits = ['val', 'train']\nloaders = {}\n" + head
                      + "    loaders[split] = DataLoader(data[split], batch_size=8)\n")
    first = {"file": str(script), "line": 5, "created": 1, "dataset": "A", "len": 4}
    second = {**first, "created": 2, "dataset": "B", "len": 40}
    session = SimpleNamespace(dataloaders={1: first, 2: second}, run={"cwd": str(tmp)}, model={"framework": None},
                              framework=None)
    return place_facts(session, second, 2, 0, "8", None)  # type: ignore[arg-type]


def _threads(tmp: Path, monkeypatch: pytest.MonkeyPatch, workers: int = 0, busy: float = 0.0, measured: bool = True,
             calls: list[dict[str, Any]] | None = None, target: str | None = None, torch_threads: int = 8,
             others: float | None = None) -> dict[str, Any]:
    """``busy``: the workers' cores; ``others``: other programs' (measured over 4 s), None: not measured."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers import threads

    monkeypatch.setattr(threads, "_workers", lambda s: workers)
    monkeypatch.setattr(threads, "_workers_busy", lambda s, w: (busy, measured))
    monkeypatch.setattr(threads, "others_busy", lambda s: None if others is None else (others, 4.0))
    monkeypatch.setattr(threads, "others_named", lambda s: {})
    session = SimpleNamespace(env={"cores_physical": 4, "torch_threads": torch_threads}, model={"threads_set": calls or []},
                              run={"cwd": str(tmp), "target": str(tmp / target) if target else None}, others={})
    return threads.thread_facts(session)  # type: ignore[arg-type]


def _ranks(monkeypatch: pytest.MonkeyPatch, *rows: tuple[float, float, float | None, float | None]) -> dict[str, Any]:
    """Ranks from (step_ms, wait_ms, own_ms, backward_ms) rows."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers import ranks

    table = {i: {"rank": i, "own_ms": own, "backward_ms": bwd, "after_ms": 1.0 if own is not None else None, "steps": 50,
                 "step_ms": step, "wait_ms": wait, "wait_share": 0.1, "peak": None, "limit": None}
             for i, (step, wait, own, bwd) in enumerate(rows)}
    monkeypatch.setattr(ranks, "_rank_row", lambda rank, s: table[rank])
    return ranks.rank_facts(SimpleNamespace(ranks=dict.fromkeys(table)))  # type: ignore[arg-type]


def _code_cases(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, dict[str, Any], str]]:
    """(rule file, fact, facts an analyzer returned, the words it wrote before they moved)."""
    (tmp / "train.py").write_text("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8)\n"
                                  'if __name__ == "__main__":\n    pass\n')
    (tmp / "hf.py").write_text("from transformers import TrainingArguments\nargs = TrainingArguments(output_dir='o')\n")
    (tmp / "opt.py").write_text("import argparse\nloader = DataLoader(ds, num_workers=args.w, persistent_workers=args.w > 0)\n"
                                'p = argparse.ArgumentParser()\np.add_argument("--w", type=int, default=0)\n'
                                'if __name__ == "__main__":\n    pass\n')
    (tmp / "hp.py").write_text("class M:\n    def train_dataloader(self): return DataLoader(ds, "
                               "num_workers=self.hparams.w, persistent_workers=self.hparams.w > 0)\n")
    (tmp / "f64.py").write_text("import numpy as np\nimport torch\nx = torch.from_numpy(np.ones(3))\n")
    (tmp / "setn.py").write_text("import torch\ntorch.set_num_threads(4)\n")
    (tmp / "omp.py").write_text('import os\nos.environ["OMP_NUM_THREADS"] = "8"\n')
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.float64_fix import float64_fix_facts

    def f64(site: Any, default: str = "float32") -> dict[str, Any]:
        ops = SimpleNamespace(top_float64=lambda n: [site] if site else [], float64_calls=3)
        (tmp / "dflt.py").write_text("import torch\ntorch.set_default_dtype(torch.float64)\n")
        # the float64 runs at line 3; it was made at line 2 (the sampler saw no op there)
        (tmp / "makers.py").write_text("import numpy as np, torch\nx = torch.from_numpy(np.zeros(4))\ny = x * 2\n")
        session = SimpleNamespace(run={"cwd": str(tmp), "script": "dflt.py"}, ops=ops, model={"default_dtype": default})
        return float64_fix_facts(session)  # type: ignore[arg-type]

    nf, tl, ds = "nonfinite-loss.yaml", "tensor-leak.yaml", "dataloader-stall.yaml"
    to, dd = "thread-oversubscription.yaml", "distributed.yaml"
    finite = {"last_finite_loss": 2.5, "last_finite_step": 7}
    return [
        (nf, "nonfinite_preceded", _health(**finite), "the last finite loss was 2.5 at step 7"),
        (nf, "nonfinite_preceded", _health(), "no finite loss was read before it"),
        (nf, "nonfinite_preceded_window", _health(**finite, checked="sampled steps"),
         "; losses are read on sampled steps only (on this device, or once the loop was steady), so it went "
         "non-finite between step 8 and step 9"),
        (nf, "nonfinite_preceded_window", _health(**finite), ""),
        (nf, "nonfinite_preceded_lr", _health(lr=0.5, lr_first=0.1),
         "; the learning rate was 0.5 (it was 0.1 at the first step)"),
        (nf, "nonfinite_preceded_lr", _health(lr=0.1, lr_first=0.1), "; the learning rate was 0.1"),
        (nf, "nonfinite_preceded_lr", _health(lr=NAN), "; the learning rate was nan"),
        (nf, "nonfinite_preceded_lr", _health(), ""),
        (nf, "nonfinite_preceded_grad", _health(grad_norm_last=120.0, grad_norm_median=2.0),
         "; the gradient norm jumped to 120, 60 times its median of 2"),
        (nf, "nonfinite_preceded_grad", _health(grad_norm_last=3.0, grad_norm_median=2.0),
         "; the gradient norm was 3 (no jump)"),
        (nf, "nonfinite_preceded_grad", _health(grad_norm_last=NAN), "; the gradient norm was nan (no jump)"),
        (nf, "nonfinite_preceded_grad", _health(grad_norm_last=INF, grad_norm_median=2.0),
         "; the last gradient norm clip_grad_norm_ returned was inf (median before 2)"),
        (nf, "nonfinite_preceded_grad", _health(grad_norm_last=NAN, grad_norm_median=2.0),
         "; the last gradient norm clip_grad_norm_ returned was nan (median before 2)"),
        (nf, "nonfinite_preceded_grad", _health(), ""),
        (nf, "nonfinite_preceded_fp16", _health(fp16_autocast=True),
         "; the run uses fp16 autocast and no GradScaler scaled a loss"),
        (nf, "nonfinite_preceded_fp16", _health(param_dtypes=["float16"]),
         "; the run uses float16 parameters and no GradScaler scaled a loss"),
        (nf, "nonfinite_preceded_fp16", _health(fp16_autocast=True, grad_scaler=True), "; fp16 with a GradScaler"),
        (nf, "nonfinite_preceded_fp16", _health(), ""),
        (tl, "leak_place_sentence", _leak(alive=0),
         "No line was found by the sampled leak tracking (it follows tensors made on sampled steps only)."),
        (tl, "leak_place_sentence", _leak(holder="outs", holder_file="/w/train.py", holder_line=14,
                                          holder_code="outs.append(out)"),
         "The sampled leak tracking found the line that keeps them: `outs.append(out)` at train.py:14, adding to "
         "`outs` (see that finding)."),
        (tl, "leak_place_sentence", _leak(holder="outs", holder_file="/w/train.py", holder_line=14),
         "The sampled leak tracking found the line that keeps them: `outs` at train.py:14, adding to `outs` "
         "(see that finding)."),
        (tl, "leak_place_sentence", _leak(alive=0, between=[_between(tmp, "val_preds.append(model(xv))")]),
         "Outside the sampled steps, a list grows with tensors that keep their autograd graphs: "
         "`val_preds.append(model(xv))` at eval.py:2 adds them (the newest one's graph held 1.0 MiB of tensors "
         "saved for a `backward()`), and `val_preds` grew from 2 items at step 15 to 48 at step 244. Where that "
         "line runs between the training steps (an evaluation pass), run the pass under `with torch.no_grad():`; "
         "or keep the values without their graphs: `val_preds.append(model(xv).detach())  # no autograd graph "
         "kept`."),
        (tl, "leak_place_sentence", _leak(alive=0, between=[_between(tmp, "val_preds.insert(0, out)")]),
         "Outside the sampled steps, a list grows with tensors that keep their autograd graphs: "
         "`val_preds.insert(0, out)` at eval.py:2 adds them (the newest one's graph held 1.0 MiB of tensors saved "
         "for a `backward()`), and `val_preds` grew from 2 items at step 15 to 48 at step 244. Where that line "
         "runs between the training steps (an evaluation pass), run the pass under `with torch.no_grad():`; or "
         "keep the values without their graphs (`.detach()`, `.item()`)."),
        (tl, "leak_site_kept_by", _leak(), " The container holding them was not found among the training loop's "
                                           "variables."),
        (tl, "leak_site_kept_by", _leak(holder="outs", holder_file="/w/t.py", holder_line=3, holder_code="outs += [o]"),
         " They are kept in `outs`, added to at t.py:3 (`outs += [o]`)."),
        (tl, "leak_site_kept_by", _leak(holder="outs", holder_file="/w/t.py", holder_line=3),
         " They are kept in `outs`, added to at t.py:3."),
        (tl, "leak_site_kept_by", _leak(holder="outs", holder_code="outs += [o]"),
         " They are kept in `outs`, added to (`outs += [o]`)."),
        (tl, "leak_site_kept_by", _leak(holder="outs"), " They are kept in `outs`, added to."),
        # issue 28: a rate beside the sampled steps' total, to set beside the process's growth
        (tl, "leak_site_graph_size", _leak(bytes=4 * 65536, alive=4, steps=[1, 3, 5, 12], graph_nodes=40),
         " Their graphs' saved tensors were freed by `backward()`: what stays is the tensors (256.0 KiB, about 64.0"
         " KiB more every step) and 40 autograd nodes, objects of autograd's own that no tensor size counts, more"
         " every step."),
        # the container's bytes measured: evaluation items 4 times the sampled training ones
        # count at their size (10 training items of 64 KiB and 4 of 256 KiB in 10 steps), not
        # 14 x 64 KiB (89.6 KiB a step)
        (tl, "leak_site_graph_size", _leak(bytes=2 * 65536, alive=2, steps=[3, 5], graph_nodes=254,
                                           holder="self.history", holder_size0=6, holder_step0=10,
                                           holder_size=20, holder_step=20, holder_bytes0=6 * 65536,
                                           holder_bytes=(6 + 10 + 4 * 4) * 65536),
         " Their graphs' saved tensors were freed by `backward()`: what stays is the tensors (128.0 KiB, about"
         " 166.4 KiB more every step) and 254 autograd nodes, objects of autograd's own that no tensor size counts,"
         " more every step."),
        (tl, "leak_site_graph_size", _leak(bytes=2 * 65536, alive=2, steps=[3, 5], graph_nodes=10,
                                           graph_bytes=6 * 65536),
         " They hold 512.0 KiB: 128.0 KiB of their own and 384.0 KiB of tensors their graphs saved for a"
         " `backward()` that has not run (10 autograd nodes); about 256.0 KiB more every step."),
        (tl, "leak_site_graph_size", _leak(bytes=4096, alive=2, steps=[3, 5]),
         " The tensors hold 4.0 KiB of their own (about 2.0 KiB more every step); what their graphs hold was not"
         " measured."),
        (ds, "loader_which", _loader(tmp, "train.py"), "the DataLoader"),
        (ds, "loader_which", _loader(tmp, "train.py", 2, 21), "the 21st DataLoader"),
        (ds, "loader_which", _loader(tmp, "train.py", 2, 22), "the 22nd DataLoader"),
        (ds, "loader_which", _loader(tmp, "train.py", 2, 3), "the 3rd DataLoader"),
        (ds, "loader_which", _loader(tmp, "train.py", 2, 12), "the 12th DataLoader"),
        (ds, "loader_name", _loader(tmp, "train.py", 2, 2), "the 2nd DataLoader built at train.py:2"),
        # Lightning builds validation's loader first (sanity check): the training loader is
        # named by the hook that built it, not "the 2nd DataLoader"
        (ds, "loader_which", _hooked(tmp), "the DataLoader of train_dataloader()"),
        (ds, "loader_name", _hooked(tmp), "the DataLoader of train_dataloader() built at train.py:2"),
        (ds, "loader_name", _loader(tmp, None, 2, 2), "the 2nd DataLoader"),
        (ds, "loader_name", _copies(tmp), "the 2nd DataLoader built at train.py:26"),
        (ds, "loader_name", _rebuilt(tmp), "the DataLoader built at train.py:2"),
        (ds, "loader_name", _loader(tmp, "train.py", trainer=True),
         "the Trainer's training DataLoader (started at train.py:2)"),
        (ds, "loader_name", _loader(tmp, None, trainer=True), "the Trainer's training DataLoader"),
        (ds, "loader_name", _loader(tmp, "train.py", trainer=True, side=True),
         "the Trainer's evaluation DataLoader (started at train.py:2)"),
        (ds, "loader_name", _loader(tmp, None, trainer=True, side=True), "the Trainer's evaluation DataLoader"),
        # issue 28: a step's wait partly for an evaluation loader read inside the steps
        (ds, "stall_wait", {"stall_wait": "training_shared", "loading_wait_share": 0.83, "data_wait_ms": 74.92,
                            "data_wait_own_ms": 38.31, "step_batches": "one", "compute_ms": 14.83,
                            "step_mean_ms": 89.71, "first_stall_step": 2, "last_step": 59},
         "83% of the training time went to waiting for DataLoaders: on average a step waited 74.9 ms for data, "
         "38.3 ms of it for its batch from the loader named below and the rest for other loaders' batches read "
         "inside the steps (an evaluation pass), and computed for 14.8 ms, 89.7 ms in all (steps 2 to 59)."),
        (ds, "stall_wait", {"stall_wait": "training", "loading_wait_share": 0.67, "data_wait_ms": 35.21,
                            "step_batches": "one", "compute_ms": 17.3, "step_mean_ms": 52.4, "first_stall_step": 6,
                            "last_step": 59},
         "67% of the training time went to waiting for the DataLoader: on average a step waited 35.2 ms for its "
         "batch and computed for 17.3 ms, 52.4 ms in all (steps 6 to 59)."),
        (ds, "stall_wait", {"stall_wait": "evaluation", "eval_wait_s": 3.91, "eval_wait_share": 0.34,
                            "run_steps_s": 11.6, "eval_batches": 29, "eval_batch_ms": 136.1},
         "Evaluation waited 3.9 s for its DataLoader's batches, 34% of the 11.6 s the steps took (29 of its "
         "batches timed, 136.1 ms each): time of the evaluation passes between training steps, not of training "
         "steps waiting for their batches."),
        (ds, "stall_wait", {"stall_wait": "evaluation_only", "eval_wait_s": 1.16, "eval_wait_share": 0.48,
                            "run_steps_s": 2.45, "eval_batches": 49, "eval_batch_ms": 24.0},
         "Evaluation waited 1.2 s for its DataLoader's batches, 48% of the 2.5 s the steps took (49 of its "
         "batches timed, 24.0 ms each): the run trained no step (no optimizer step, no backward pass), so its "
         "steps are the evaluation's batches."),
        (ds, "reason_trains", {"reason_trains": "train", "reason_train_ms": 12.14}, "It trains in 12.1 ms"),
        (ds, "reason_trains", {"reason_trains": "side", "reason_train_ms": 0.38},
         "It is read in a few steps only (evaluation, say), and the script is done with each of its batches in 0.4 ms"),
        (ds, "reason_train_on", {"reason_train_on": "train"}, "to train on"),
        (ds, "reason_train_on", {"reason_train_on": "side"}, "to use"),
        (ds, "loader_where", _loader(tmp, "train.py", 2, 2), "Change the line that builds the 2nd DataLoader "
                                                              "(train.py:2) to"),
        (ds, "loader_where", _loader(tmp, "gone.py"), "Build the DataLoader with"),
        (ds, "loader_where", _loader(tmp, "opt.py"), "The line that builds the DataLoader (opt.py:2) takes its workers "
                                                     "from the script's command-line option and needs no change"),
        (ds, "loader_where", _loader(tmp, "hp.py"),
         "The line that builds the DataLoader (hp.py:2) takes its workers from the module's hyperparameters "
         "(`self.hparams`) and needs no change"),
        (ds, "loader_where", _shared_loaders(tmp),
         "The line that builds the 2nd DataLoader (train.py:2) builds the 1st DataLoader too, so changed there both "
         "would get the workers. Give them to this one only, at the call that makes it (train.py:6), and let "
         "`make_loader()` hand them on to `DataLoader(...)`"),
        (ds, "loader_where", _loop_loaders(tmp, literal=True),
         "The line that builds the 2nd DataLoader (loop.py:5) builds the 1st DataLoader too, in the loop over "
         "`split` (loop.py:4); changed as written, both would get the workers. Give them to this one only, with a "
         "condition on `split`: change the line to"),
        (ds, "loader_where", _loop_loaders(tmp, literal=False),
         "The line that builds the 2nd DataLoader (loopvar.py:5) builds the 1st DataLoader too, in the loop over "
         "`split` (loopvar.py:4), and the run cannot tell which pass built which; changed as written, both would "
         "get the workers. Set these for this one only (a condition on `split`)"),
        (ds, "loader_where", _loader(tmp, "hf.py", trainer=True),
         "The Trainer builds it from its `TrainingArguments`: change them (hf.py:2) to"),
        (ds, "loader_where", _loader(tmp, "gone.py", trainer=True),
         "The Trainer builds it from its `TrainingArguments`: set"),
        (ds, "loader_where", _hf_cli(tmp), "The Trainer builds it from its `TrainingArguments`, which the script "
                                           "reads from its command line: run it with"),
        ("ops.yaml", "float64_fix_where", f64(SimpleNamespace(file=str(tmp / "f64.py"), line=3)),
         "float64 usually comes from NumPy (`torch.from_numpy` keeps `float64`). Convert before\nmoving to the device, "
         "and keep the default dtype float32.\nThe float64 comes from f64.py:3: change that line to"),
        ("ops.yaml", "float64_fix_where", f64(None),
         "float64 usually comes from NumPy (`torch.from_numpy` keeps `float64`). Convert before\nmoving to the device, "
         "and keep the default dtype float32.\nWhere the array enters torch"),
        ("ops.yaml", "float64_fix_where", f64(SimpleNamespace(file=str(tmp / "makers.py"), line=3)),
         "float64 usually comes from NumPy (`torch.from_numpy` keeps `float64`). Convert before\nmoving to the device, "
         "and keep the default dtype float32.\nThe script makes float64 tensors at these lines: change them to"),
        ("ops.yaml", "float64_fix_where", f64(None, "float64"),
         "The script makes float64 torch's default dtype at dflt.py:2 (`torch.set_default_dtype`), so every new float "
         "tensor (`torch.randn`, the model's weights) is float64: change that line to"),
        *[(file, "thread_fix_where", facts, words) for file in (to, ds) for facts, words in [
            (_threads(tmp, monkeypatch, calls=[{"file": str(tmp / "setn.py"), "line": 2}]),
             "The script sets the count itself at setn.py:2: change that line to"),
            (_threads(tmp, monkeypatch, target="omp.py"),
             "The script sets OMP_NUM_THREADS itself at omp.py:2: change that line to"),
            (_threads(tmp, monkeypatch), "At the very start of the script (or `OMP_NUM_THREADS=4` in the environment)"),
        ]],
        # who keeps the cores busy: measured others (or not measured) get "measure on a quiet
        # machine"; the training alone (others under a quarter core) is told so
        (ds, "thread_busy_with", _threads(tmp, monkeypatch, torch_threads=4, others=2.0),
         "Measure again on a quiet machine before changing the loader. Meanwhile close other busy programs, or "
         "give torch no more threads than the cores left free of other programs and busy workers (2). "
         "At the very start of the script (or `OMP_NUM_THREADS=2` in the environment):"),
        (ds, "thread_busy_with", _threads(tmp, monkeypatch, torch_threads=1, others=2.0),
         "Measure again on a quiet machine before changing the loader. Meanwhile close other busy programs: torch "
         "runs 1 intra-op thread, no more than the cores they leave free, so fewer threads would not help."),
        (ds, "thread_busy_with", _threads(tmp, monkeypatch, torch_threads=4, others=0.1),
         "No other program kept the cores busy: the training's own threads (4 intra-op threads) and its loading "
         "take turns on the 4 cores: on this machine the wait stays until each batch is cheaper to build (fewer "
         "torch threads would trade computing time for loading time)."),
        (ds, "thread_busy_with", _threads(tmp, monkeypatch, torch_threads=4, busy=2.0, workers=2, others=0.0),
         "No other program kept the cores busy: the training's own threads (4 intra-op threads) and its workers' "
         "loading share the 4 cores. Give torch no more threads than the cores the busy workers leave free (2). "
         "At the very start of the script (or `OMP_NUM_THREADS=2` in the environment):"),
        # more threads than the 4 free cores: cut, and where; 4 of 4: nothing to cut, no code
        (to, "thread_cut", _threads(tmp, monkeypatch),
         "While they run, give torch no more threads than the cores left free (4):"),
        (to, "thread_cut", _threads(tmp, monkeypatch, torch_threads=4),
         "Torch runs 4 intra-op threads, no more than the cores left free: no thread count to change in the script."),
        (ds, "thread_cut", _threads(tmp, monkeypatch),
         "Meanwhile close other busy programs, or give torch no more threads than the cores left free of other "
         "programs and busy workers (4). At the very start of the script (or `OMP_NUM_THREADS=4` in the "
         "environment):"),
        (ds, "thread_cut", _threads(tmp, monkeypatch, torch_threads=1),
         "Meanwhile close other busy programs: torch runs 1 intra-op thread, no more than the cores they leave "
         "free, so fewer threads would not help."),
        (to, "thread_workers_text", _threads(tmp, monkeypatch), "no DataLoader workers"),
        (to, "thread_workers_text", _threads(tmp, monkeypatch, workers=1, measured=False),
         "1 DataLoader worker process (not counted: their CPU use was not measured in so short a run)"),
        (to, "thread_workers_text", _threads(tmp, monkeypatch, workers=3, busy=2.25),
         "3 DataLoader worker processes using 2.2 cores of CPU between them"),
        (to, "thread_workers_text", _threads(tmp, monkeypatch, workers=2, busy=0.96),
         "2 DataLoader worker processes using 1.0 core of CPU between them"),
        (dd, "straggler_detail", _ranks(monkeypatch, (50.0, 20.0, None, None), (50.0, 2.0, None, None)),
         "20.0 ms of data wait per step against 2.0 ms on the others"),
        (dd, "straggler_detail", _ranks(monkeypatch, (60.0, 1.0, None, None), (40.0, 1.0, None, None)),
         "60.0 ms per step against 40.0 ms on the others"),
        (dd, "straggler_detail", _ranks(monkeypatch, (50.0, 1.0, 30.0, 10.0), (50.0, 1.0, 10.0, 30.0)),
         "30.0 ms per step against 10.0 ms on the others, who wait for it in backward (30.0 ms against its "
         "10.0 ms)"),
    ]


def _tables(file: str | Path, fact: str) -> Mapping[str, Any]:
    """The phrase tables of the first rule in ``file`` that words ``fact``."""
    path = file if isinstance(file, Path) else RULES_DIR / file
    return next(rule.phrases for rule in load_rules([path]) if fact in rule.phrases)


def test_the_analyzers_codes_read_as_their_old_words_from_the_rule_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each code an analyzer returns has its phrase, which reads as the sentence the analyzer
    wrote itself before (rendered with the figures it returns beside the code), and every
    phrase of those tables has a case here."""
    cases = _code_cases(tmp_path, monkeypatch)
    seen: dict[tuple[str, str], set[str]] = {}
    for file, fact, facts, words in cases:
        tables = _tables(file, fact)
        code = facts[fact]
        assert str(code) in tables[fact], (file, fact, code)
        assert phrase_for(tables, facts, fact, ()) == words, (file, fact, code)
        seen.setdefault((file, fact), set()).add(str(code))
    for (file, fact), codes in seen.items():
        assert codes == set(_tables(file, fact)[fact]), (file, fact)  # no phrase without its case
    # the rest of a ladder's figures are words too: the processes' plural is the rule file's
    processes = "thread_worker_processes"
    assert set(_tables("thread-oversubscription.yaml", processes)[processes]) == {"1", "other"}


def test_edited_phrases_change_what_the_analyzers_codes_read_as(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every phrase of those tables, rewritten in a copy of its rule file, is what the code
    reads as: no words are left in Python."""
    import yaml

    cases = _code_cases(tmp_path, monkeypatch)
    for file in {file for file, *_ in cases}:
        data = yaml.safe_load((RULES_DIR / file).read_text())
        facts_of_file = {fact for f, fact, *_ in cases if f == file}
        for table in [data.get("phrases") or {}, *[rule.get("phrases") or {} for rule in data["rules"]]]:
            for fact in facts_of_file & set(table):
                table[fact] = {code: f"EDITED {fact} {code}" for code in table[fact]}
        edited = tmp_path / "edited" / file
        edited.parent.mkdir(exist_ok=True)
        edited.write_text(yaml.safe_dump(data, sort_keys=False))
        for f, fact, facts, _ in cases:
            if f == file:
                said = phrase_for(_tables(edited, fact), facts, fact, ())
                assert said == f"EDITED {fact} {facts[fact]}", (file, fact)


def test_a_sampled_nonfinite_loss_is_titled_with_its_window() -> None:
    """A loss read non-finite on a sampled step whose previous step was not read: the title
    names the window it went non-finite in, never the step as its first; one whose step
    before was read finite, or read at every step, names the step."""
    rules = load_rules([NONFINITE_FILE])
    (window,) = evaluate(rules, _health(last_finite_loss=2.5, last_finite_step=7, checked="sampled steps"), "cpu")
    assert window.title == "The loss became nan between step 8 and step 9: the training diverged", window.title
    (next_one,) = evaluate(rules, _health(last_finite_loss=2.5, last_finite_step=8, checked="sampled steps"), "cpu")
    assert next_one.title == "The loss became nan at step 9: the training diverged", next_one.title
    (every,) = evaluate(rules, _health(last_finite_loss=2.5, last_finite_step=7), "cpu")
    assert every.title == "The loss became nan at step 9: the training diverged", every.title


def test_the_nonfinite_evidence_is_its_clauses_in_turn(tmp_path: Path) -> None:
    """Through the engine: the evidence joins the first clause and the optional ones with
    "; ", a clause whose code is phrased "" is left out, and an edited clause is the finding's."""
    facts = _health(last_finite_loss=2.5, last_finite_step=7, checked="sampled steps", lr=0.1, lr_first=0.1,
                    grad_norm_last=120.0, grad_norm_median=2.0, fp16_autocast=True)
    (finding,) = evaluate(load_rules([NONFINITE_FILE]), facts, "cpu")
    assert ("Before it: the last finite loss was 2.5 at step 7; losses are read on sampled steps only (on this "
            "device, or once the loop was steady), so it went non-finite between step 8 and step 9; the learning "
            "rate was 0.1; the gradient norm jumped to 120, 60 times its median of 2; the run uses fp16 autocast and no GradScaler scaled a loss. "
            "Every step after a NaN") in finding.evidence, finding.evidence
    quiet = _health(last_finite_loss=2.5, last_finite_step=7)
    (finding,) = evaluate(load_rules([NONFINITE_FILE]), quiet, "cpu")
    assert "Before it: the last finite loss was 2.5 at step 7. Every step after a NaN" in finding.evidence
    edited = tmp_path / "nonfinite-loss.yaml"
    old = 'no_finite_loss: "no finite loss was read before it"'
    assert old in NONFINITE_FILE.read_text()
    edited.write_text(NONFINITE_FILE.read_text().replace(old, 'no_finite_loss: "every loss was NaN (edited)"'))
    (finding,) = evaluate(load_rules([edited]), _health(), "cpu")
    assert "Before it: every loss was NaN (edited). Every step" in finding.evidence


def test_the_oversubscription_title_says_how_many_cores_were_free() -> None:
    """Sweep s52 a05: "2 busy threads on 2 cores" read as no problem at all; what made it one
    was that other programs left about 0.5 of the 2 cores free, which only the evidence said."""
    rules = [r for r in load_rules([builtin_rules_dir() / "thread-oversubscription.yaml"])
             if r.id == "thread-oversubscription"]
    facts = {"busy_threads": 2, "cores": 2, "cores_left": 0.5, "torch_threads": 2, "torch_threads_text": 2,
             "thread_oversubscription": 2.1, "thread_workers_text": "none", "suggested_torch_threads": 1,
             "thread_fix_where": "script_start", "thread_fix_code": "torch.set_num_threads(1)"}
    (finding,) = evaluate(rules, facts, "cpu")
    assert finding.title == "2 busy threads on 2 cores, 0.5 of them free of other programs", finding.title


@pytest.mark.parametrize("threads,words", [(1, "1 intra-op thread"), (4, "4 intra-op threads")])
def test_torchs_thread_count_is_worded_by_the_thread_rules(threads: int, words: str) -> None:
    """``torch_threads_text`` is the count; both rules of thread-oversubscription.yaml word it
    from the file's phrases (a rule may say "1 intra-op thread", never "1 intra-op threads")."""
    rules = {r.id: r for r in load_rules([builtin_rules_dir() / "thread-oversubscription.yaml"])}
    for rule in ("thread-oversubscription", "other-programs-busy"):
        assert phrase_for(rules[rule].phrases, {"torch_threads_text": threads}, "torch_threads_text", ()) == words


def test_one_slow_read_is_no_burst_but_a_slow_step_in_four_is() -> None:
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.loader_advice import BURST, steady_ratio, step_loads, step_ratios

    def steps(waits: list[float]) -> list[Any]:
        return [SimpleNamespace(wait=w, dur=w + 0.001) for w in waits]  # 1 ms of training each

    once = steps([0.0004] * 99 + [2.0])  # a cold cache at one step: trimmed away
    ratio, spread = steady_ratio(step_loads(once, 0)), step_ratios(step_loads(once, 0))
    assert ratio is not None and spread is not None and ratio < BURST * spread[0]
    every_fourth = steps([0.0004, 0.0004, 0.0004, 0.05] * 25)  # a shard every 4th batch
    ratio, spread = steady_ratio(step_loads(every_fourth, 0)), step_ratios(step_loads(every_fourth, 0))
    assert ratio is not None and spread is not None and ratio >= BURST * spread[0]
    assert ratio == pytest.approx((0.0004 * 3 * 25 + 0.05 * 20) / (0.001 * 95), rel=1e-6)  # 5 of the 25 slow ones trimmed


@pytest.mark.parametrize("top,title_end", [
    ([], "during the run"),
    ([{"name": "python spin.py", "cores": 0.9}], "during the run: top: python spin.py 90%"),
])
def test_the_busy_machine_title_names_the_top_programs_or_ends_there(top: list[dict[str, Any]], title_end: str) -> None:
    """``others_top_text`` is an optional clause: with no program named (the launcher could
    read none) the title ends at "during the run", never "during the run(not measured)"."""
    from types import SimpleNamespace

    from mpsprofiler.diagnosis.analyzers.threads import others_named

    facts = {"others_busy_cores": 0.9, "others_busy_share": 0.45, "cores": 2, "torch_threads": 1,
             "torch_threads_text": 1, "others_window_s": 4.0, "cores_free": 1.1,
             **others_named(SimpleNamespace(others={"top": top}))}  # type: ignore[arg-type]
    rules = [r for r in load_rules([builtin_rules_dir() / "thread-oversubscription.yaml"]) if r.id == "other-programs-busy"]
    (finding,) = evaluate(rules, facts, "cpu")
    assert finding.title == f"Other programs used 0.9 of 2 cores {title_end}", finding.title


def test_a_loader_short_of_cores_gets_the_workers_that_reach_the_best_step() -> None:
    """An unseen Lightning DataModule: 229 ms a batch in the training process, 158 ms of it CPU
    work (the rest a sleep per sample), 72 ms to train on, 2 cores. One worker per free core
    (1) reached 1.2x; a batch comes every (158 + 72) / 2 = 115 ms with both cores busy, and 2
    workers of 229 ms each reach it (2.7x measured). A loader that computes all of its time
    next to a long step stays at the free core."""
    short = _advise("cpu", _fig(229.0, 301.0, cpu_ms=158.0), train_s=0.072, cores=2)
    assert short["num_workers_reason"][0] == "cpu_short" and short["suggested_num_workers"] == 2, short
    assert short["num_workers_helps"] and short["best_step_ms"] == pytest.approx(115.0, abs=0.5)
    computes = _advise("cpu", _fig(200.0, 400.0, cpu_ms=200.0), train_s=0.2, cores=2)
    assert computes["suggested_num_workers"] == 1, computes


def test_a_cpu_floor_above_the_measured_step_is_not_said_nor_fewer_workers_advised() -> None:
    """Sweep t11: 8 restarted workers read as 73.3 ms of CPU a batch on 2 cores; the model's
    floor (37.9 ms) was above the 13.6 ms step measured, and "num_workers=2 at most" followed.
    A floor above the step measured means the model does not hold: neither is said."""
    fig = _fig(11.2, 13.6, cpu_ms=0.2, workers_cpu=73.3 * 40 / 1e3, window_batches=40.0)
    said = advise(fig, "cpu", 8, 2.4e-3, 1, 2, "physical", 16, 64 * 2**30, None, 2, 1000)
    assert said["reason_floor"] == "none" and said["best_step_ms"] is None, said
    assert said["suggested_num_workers"] == 8 and not said["num_workers_helps"], said
    text = reason_text(said, bound="cpu")
    assert "cannot get much below" not in text and "at most" not in text, text
    assert text.count("  ") == 0 and "busy. Make each batch cheaper" in text, text
    # the floor below the step stays
    short = advise(_fig(30.0, 40.0, cpu_ms=1.0, workers_cpu=30.0 * 40 / 1e3, window_batches=40.0), "cpu", 2,
                   0.01, 1, 2, "physical", 32, 64 * 2**30, None, 2, 1000)
    assert short["reason_floor"] == "shown" and "cannot get much below" in reason_text(short, bound="cpu"), short


def test_workers_mostly_off_the_cpu_are_kept_not_cut_to_the_cores() -> None:
    """Sweep s52 a04/a02: a loader of 1 ms sleeps per sample given the 8 workers its first run
    advised; the next run read 3.2 ms of CPU against 1.6 ms of training per batch on 2 cores
    and told "Use num_workers=2 at most". Each worker's batch took 48 ms, 45 of it off the
    CPU: 2 workers took the run from 1.0 s to 2.0 s. Workers that mostly wait are kept; a
    loader whose workers compute their whole batch is still cut to the cores."""
    fig = _fig(3.9, 6.0, cpu_ms=0.1, workers_cpu=3.2 * 40 / 1e3, workers_runq=7.8 * 40 / 1e3, window_batches=40.0)
    said = advise(fig, "cpu", 8, 1.6e-3, 1, 2, "physical", 32, 64 * 2**30, None, 2, 1000)
    assert said["num_workers_reason"][0] == "cpu_short", said
    assert said["suggested_num_workers"] == 8 and not said["num_workers_helps"], said
    text = reason_text(said, bound="cpu")
    assert "at most" not in text and "keep num_workers=8. Make each batch cheaper" in text, text
    assert "Each of the 8 workers spends 37.0 of its 48.0 ms a batch neither computing nor queued" in text, text
    assert text.count("  ") == 0 and "{" not in text, text
    # 8 workers that compute their batch and queue for the 2 cores the rest of it: cut to them
    busy = _fig(41.0, 42.0, cpu_ms=0.1, workers_cpu=70.0 * 40 / 1e3, workers_runq=250.0 * 40 / 1e3,
                window_batches=40.0)
    cut = advise(busy, "cpu", 8, 10e-3, 1, 2, "physical", 32, 64 * 2**30, None, 2, 1000)
    assert cut["suggested_num_workers"] == 2 and cut["reason_kept_waiting"] == "none", cut
    assert "Use num_workers=2 at most" in reason_text(cut, bound="cpu")


def test_waiting_that_is_mostly_a_wait_for_a_core_is_worded_so() -> None:
    """Sweep t11, num_workers=0 beside 2 busy programs: 90.9 ms a batch, 10.1 ms of it CPU and
    47.4 ms ready to run without a core; it read "mostly waiting (I/O, sleep)"."""
    fig = _fig(90.9, 95.5, cpu_ms=10.1, wait_runq=47.4 * 40 / 1e3)
    said = _advise("waiting", fig, cores=2)
    assert said["figures_loading"] == "waiting_core", said
    assert "more of it for a free CPU core" in figures_text(said, bound="waiting"), figures_text(said, bound="waiting")
    assert "and 47.4 ms ready to run but waiting for a free CPU core" in reason_text(said, bound="waiting")
    quiet = _advise("waiting", _fig(90.9, 95.5, cpu_ms=10.1, wait_runq=1.0 * 40 / 1e3), cores=2)
    assert quiet["figures_loading"] == "waiting" and "(I/O, sleep)" in figures_text(quiet, bound="waiting")
