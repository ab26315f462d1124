"""The corpus test (issue 27, item 5): real public training scripts under the real CLI.

tests/corpus/ holds faithful copies of pytorch/examples mnist and word_language_model,
karpathy's nanoGPT (train.py, model.py, configurator.py), minGPT (the package and the adder
project) and makemore, with their licences; tests/corpus/README.md says what was trimmed
(only what needs a download or a package CI lacks). Each runs on tiny synthetic data
(tests/corpus/prepare.py) with its own loop, argument parsing, evaluation and checkpoint
saving, once with plain python and once under ``mpsprof run --headless``, all in one
module fixture, two at a time. Every test below reads that one set of runs.

Expected: the same exit status and output as plain python (timings masked: the scripts
print their own step times), the expected optimizer step count, and no warning or critical
finding (none of these scripts has a problem worth one). A false finding seen on real code
becomes a fix plus an expectation here.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from helpers import Result, child_env, loud_rules, mpsprof_cmd, read_summary, run_python, strip_summary
from helpers import _run as run_cmd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "corpus"))
import prepare  # noqa: E402  (tests/corpus/prepare.py)

pytestmark = pytest.mark.slow

_TIMINGS = [
    re.compile(rb"\d+\.\d+ ?ms\b"),  # minGPT's iter_dt, makemore's step time, nanoGPT's time
    re.compile(rb"ms/batch +\d+\.\d+"),  # word_language_model
    re.compile(rb"time: +\d+\.\d+s"),  # word_language_model's epoch time
    re.compile(rb"mfu -?\d+\.\d+%"),  # nanoGPT
]


def masked(out: bytes, work: Path) -> bytes:
    """The scripts' output without the times they measure (they differ between any two runs)
    and with their working directory (each way runs in its own) written ``<work>``."""
    out = out.replace(str(work).encode(), b"<work>")
    for pattern in _TIMINGS:
        out = pattern.sub(b"<t>", out)
    return out


def _env(script: prepare.Script) -> dict[str, str]:
    env = child_env()
    if script.pythonpath:
        env["PYTHONPATH"] = script.pythonpath + ":" + env["PYTHONPATH"]
    return env


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("corpus")
    plain_work, prof_work = base / "plain", base / "profiled"
    prepare.prepare(plain_work)
    prepare.prepare(prof_work)
    plain_cmds, prof_cmds = prepare.commands(plain_work), prepare.commands(prof_work)

    def plain(name: str) -> Result:
        s = plain_cmds[name]
        return run_python(s.args, cwd=s.cwd, env=_env(s), timeout=240)

    def profiled(name: str) -> Result:
        s = prof_cmds[name]
        return run_cmd(mpsprof_cmd(s.args, base / f"run_{name}"), s.cwd, None, _env(s), 240)

    names = list(plain_cmds)
    with ThreadPoolExecutor(2) as pool:  # CI has 2 cores; the longest first
        jobs = {(n, kind): pool.submit(fn, n) for n in names for kind, fn in (("profiled", profiled), ("plain", plain))}
        results = {key: job.result() for key, job in jobs.items()}
    return {"base": base, "results": results, "names": names, "commands": prof_cmds}


NAMES = ["mnist", "word_language_model", "nanoGPT", "minGPT_adder", "makemore"]


def _summary(corpus: dict[str, Any], name: str) -> dict[str, Any]:
    return read_summary(corpus["base"] / f"run_{name}")


@pytest.mark.parametrize("name", NAMES)
def test_a_corpus_script_behaves_as_under_plain_python(corpus, name):
    plain, prof = corpus["results"][(name, "plain")], corpus["results"][(name, "profiled")]
    assert plain.returncode == 0, plain.stderr[-2000:]
    assert prof.returncode == plain.returncode, prof.stderr[-3000:]
    plain_work, prof_work = corpus["base"] / "plain", corpus["base"] / "profiled"
    assert masked(prof.stdout, prof_work) == masked(plain.stdout, plain_work)
    assert masked(strip_summary(prof.stderr), prof_work) == masked(plain.stderr, plain_work)


@pytest.mark.parametrize("name", NAMES)
def test_a_corpus_script_counts_its_optimizer_steps(corpus, name):
    steps = _summary(corpus, name)["steps"]
    assert steps["count"] == corpus["commands"][name].steps, steps


@pytest.mark.parametrize("name", NAMES)
def test_a_corpus_script_gets_no_warning(corpus, name):
    summary = _summary(corpus, name)
    assert loud_rules(summary) == [], [(f["rule"], f["title"]) for f in summary["findings"]]
    assert not summary.get("probe_errors"), summary.get("probe_errors")


@pytest.mark.parametrize("name", ["minGPT_adder", "nanoGPT"])
def test_an_evaluation_at_iteration_0_is_not_warm_up(corpus, name):
    """minGPT's adder evaluates the whole training and test sets in its batch callback at
    iteration 0 (in step 1, over DataLoaders of its own: 2 batches here, 100 with the
    original's 2 digits); nanoGPT runs estimate_loss() before iteration 0 (in step 0).
    Neither is the framework's warm-up (issue 27, item 3)."""
    summary = _summary(corpus, name)
    assert "long-warmup" not in {f["rule"] for f in summary["findings"]}, summary["findings"]
    if name == "minGPT_adder":
        from mpsprofiler.diagnosis.facts import collect_facts
        from mpsprofiler.session.recording import load_run

        facts = collect_facts(load_run(corpus["base"] / f"run_{name}").session)
        assert facts.get("warmup_own_work_steps") == 1, facts
