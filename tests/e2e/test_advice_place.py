"""Findings name the user's own object and line, and their snippet is that line rewritten.

Real scripts through the real CLI (one short run per shape, shared by its tests)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import REPO, child_env, fix_code, line_of, one_finding, run_summary

PLACE = REPO / "tests" / "scripts_place"
_finding = one_finding
_code = fix_code


def _profile(tmp: Path, script: str, *args: str, env: dict[str, str] | None = None,
             script_args: tuple[str, ...] = ()) -> dict[str, Any]:
    return run_summary(tmp / "run", *args, str(PLACE / script), *script_args, env=env)


def _line_of(script: str, text: str) -> int:
    return line_of(PLACE / script, text)


@pytest.fixture(scope="module")
def two_loaders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _profile(tmp_path_factory.mktemp("two"), "two_loaders.py", "--max-steps", "30")


@pytest.mark.slow
def test_the_stall_names_the_slow_loader_and_rewrites_its_line(two_loaders: dict[str, Any]) -> None:
    f = _finding(two_loaders, "dataloader-stall", "dataloader-stall-critical")
    line = next(i for i, t in enumerate((PLACE / "two_loaders.py").read_text().splitlines(), 1)
                if t.strip().startswith("slow = DataLoader("))
    place = f"tests/scripts_place/two_loaders.py:{line}"
    assert "the 2nd DataLoader built at " + place in f["evidence"], f["evidence"]
    # its own figures: the slow loader's batch of 16, not the in-memory loader's 64
    assert "one batch of 16 samples" in f["evidence"] and "64" not in f["evidence"], f["evidence"]
    assert place in f["fix"]
    code = f["fix"].split("```python\n", 1)[1].split("```", 1)[0]
    assert code.startswith("slow = DataLoader(SlowReads(), batch_size=16, num_workers="), code
    assert "shuffle" not in code and "persistent_workers=True" in code


@pytest.mark.slow
def test_try_changes_only_the_named_loader(two_loaders: dict[str, Any]) -> None:
    from mpsprofiler.diagnosis.facts import collect_facts
    from mpsprofiler.experiment.candidates import candidate_for
    from mpsprofiler.session.recording import load_runs

    facts = collect_facts(load_runs([two_loaders["_dir"]]).session)
    f = _finding(two_loaders, "dataloader-stall", "dataloader-stall-critical")
    c = candidate_for(f, facts)
    assert c is not None and list(c.settings["dataloader"]) == ["2"], c.settings
    # persistent too, as the fix writes the loader; one loader's settings under one label
    assert re.fullmatch(r"num_workers=\d+, persistent_workers=true \(DataLoader 2\)", c.text), c.text


@pytest.mark.slow
def test_threads_set_inside_main_are_rewritten_at_that_line(tmp_path: Path) -> None:
    summary = _profile(tmp_path, "threads_in_main.py", "--max-steps", "30")
    f = _finding(summary, "thread-oversubscription")
    line = next(i for i, t in enumerate((PLACE / "threads_in_main.py").read_text().splitlines(), 1)
                if "torch.set_num_threads(16)" in t)
    assert f"tests/scripts_place/threads_in_main.py:{line}" in f["fix"], f["fix"]
    code = f["fix"].split("```python\n", 1)[1].split("```", 1)[0].strip()
    import re

    m = re.fullmatch(r"torch\.set_num_threads\((\d+)\)", code)
    assert m is not None and 1 <= int(m.group(1)) <= (f["facts"].get("cores") or 2), code
    assert "very start" not in f["fix"] and "at most 0" not in f["fix"]
    assert "16 intra-op threads" in f["evidence"]


def test_thread_judgement_counts_busy_workers_and_other_programs() -> None:
    from mpsprofiler.diagnosis.analyzers.threads import judge_threads

    # two sleeping workers (0.1 core between them) leave the 2 cores to torch's 2 threads
    quiet = judge_threads(2, 2, workers_busy=0.1)
    assert not quiet.oversubscribed and quiet.suggested == 2
    # the same with other programs using 1.6 of the 2 cores: one torch thread
    busy = judge_threads(2, 2, workers_busy=0.1, others_busy=1.6)
    assert busy.oversubscribed and busy.suggested == 1
    assert judge_threads(16, 2).suggested == 2 and judge_threads(16, 2).oversubscribed


def test_an_omp_num_threads_assignment_in_the_script_is_the_line_to_change(tmp_path: Path) -> None:
    from mpsprofiler.diagnosis.analyzers.threads import thread_fix_place

    script = tmp_path / "train.py"
    script.write_text('import os\n\nos.environ["OMP_NUM_THREADS"] = "16"\nimport torch\n', encoding="utf-8")

    class Fake:
        run = {"target": "train.py", "cwd": str(tmp_path)}
        model: dict[str, Any] = {}

    fix = thread_fix_place(Fake(), 1)  # type: ignore[arg-type]
    assert fix["thread_set_place"] == "train.py:3"
    assert fix["thread_fix_code"] == 'os.environ["OMP_NUM_THREADS"] = "1"'


@pytest.mark.slow
def test_a_plain_tensor_kept_in_a_module_level_list_names_the_append(tmp_path: Path) -> None:
    # 600 steps of 2.3 ms train 1.4 s: at the default budget op accounting affords its two
    # early samples and one more, and naming the line takes two sampled steps that keep a
    # tensor (every 5th): step 5 keeps one, and the sample after it follows that phase
    # (ops_schedule.FOLLOW_PERIOD). A 5% budget buys that third sample on a busy machine too,
    # where the early samples' wall time is 2-3 times a quiet one's and 2% left only steps 3
    # and 5 to a 600-step run.
    summary = _profile(tmp_path, "kept_list.py", "--ops-budget", "0.05", script_args=("600",))
    f = _finding(summary, "leak-site-container")
    append = _line_of("kept_list.py", "kept.append(feats)")
    assert f"kept_list.py:{append}" in f["title"], f["title"]
    assert "kept in `kept`" in f["evidence"]
    code = _code(f)
    assert code.startswith("kept.append(feats.mean().item())"), code
    assert f"(line {_line_of('kept_list.py', 'kept = []')})" in code and "deque(maxlen=" in code
    # the rate is the list's: 512 KiB every 5th step, about 102 KiB per step (not 512)
    rate = f["facts"]["leak_site_kib_per_step"]
    assert 60 <= rate <= 160, rate


@pytest.mark.slow
def test_outputs_kept_on_self_name_the_attribute_and_its_append(tmp_path: Path) -> None:
    summary = _profile(tmp_path, "module_outs.py")
    f = _finding(summary, "leak-site-graph")
    append = _line_of("module_outs.py", "self.outs.append(logits)")
    assert f"module_outs.py:{append}" in f["title"] and "kept in `self.outs`" in f["evidence"]
    assert _code(f).startswith("self.outs.append(logits.detach())")


@pytest.mark.slow
@pytest.mark.serial  # judged from measured CPU contention: a test beside it is one more busy program (and beside
# one, torch's two spinning threads and the spinner fought it for the 2 cores: 20 s instead of 5)
def test_another_cpu_heavy_program_is_found_and_torch_gets_fewer_threads(tmp_path: Path) -> None:
    import subprocess
    import sys

    spinner = tmp_path / "spin_beside.py"
    spinner.write_text("while True:\n    pass\n", encoding="utf-8")
    import time

    import psutil

    spin = subprocess.Popen([sys.executable, str(spinner)])
    began = time.monotonic()
    try:
        # MKL_NUM_THREADS too: conftest sets it to 1, and torch then runs one thread whatever OMP says
        summary = _profile(tmp_path, "cpu_matmul.py", env=child_env(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2"),
                           script_args=("120",))  # others are judged over >= 2 s of samples: 50 steps'
        # loop took 0.8 s beside the spinner on a quiet host (the rest was import torch, which a warm
        # cache makes short: CI once saw no reading at all); 120 take ~4 s
        times = psutil.Process(spin.pid).cpu_times()
        spin_share = (times.user + times.system) / (time.monotonic() - began)
    finally:
        spin.kill()
        spin.wait()
    f = _finding(summary, "other-programs-busy")
    assert f["facts"]["others_busy_cores"] >= 0.5, f["facts"]
    # "ran 1 intra-op thread;" or "ran 2 intra-op threads;", never "1 intra-op threads"
    assert re.search(r"ran (1 intra-op thread|(?!1 )\d+ intra-op threads);", " ".join(f["evidence"].split())), f["evidence"]
    # the launcher names who took the cores, busiest first, as `top` shows it (percent of a
    # core); the spinner by its script whenever it took more than the last one named (on a
    # quiet machine it is the first: CI; on a shared one others may take more)
    named = re.findall(r"(?:: top: |, )(.+?) (\d+)%", f["title"])
    shares = [int(p) for _, p in named]
    assert named and shares == sorted(shares, reverse=True), f["title"]
    if spin_share * 100 > 1.3 * shares[-1] + 5:
        assert any(n.endswith("spin_beside.py") for n, _ in named), (f["title"], spin_share)
    # the Environment panel's thread check (doctor's, fed the run's figures) agrees
    from mpsprofiler.doctor import check_threads
    from mpsprofiler.session.recording import load_runs
    from mpsprofiler.tui.widgets.environment import doctor_env

    session = load_runs([summary["_dir"]]).session

    class State:
        live = False

    state = State()
    state.session = session  # type: ignore[attr-defined]
    check = check_threads(doctor_env(session.env, state))  # type: ignore[arg-type]
    assert f["facts"]["torch_threads"] == 2, f["facts"]
    assert check.status == "warn" and named[0][0] in check.detail, check
    assert "torch.set_num_threads(1)" in check.fix, check.fix
    # 2 cores less the other program's one leave one: torch gets one thread (measured: with a
    # spinning `python -c 'while True: pass'` beside it, 150 steps took 10.45 s with
    # OMP_NUM_THREADS=2 and 1.05 s with 1; the test runs 50: still longer than the 2 s
    # (4 samples) over which other programs' use is judged, MIN_OTHERS_WINDOW_S)
    assert "torch.set_num_threads(1)" in f["fix"], f["fix"]


def test_doctor_counts_the_cores_other_programs_take() -> None:
    from mpsprofiler.diagnosis.analyzers.threads import judge_threads
    from mpsprofiler.doctor import check_threads

    env: dict[str, Any] = {"torch_threads": 2, "cores_logical": 2, "cores_physical": 2, "omp_num_threads": None,
                           "others_busy_cores": 1.6,
                           "others_top": [{"name": "python spin.py", "cores": 0.9}, {"name": "ffmpeg", "cores": 0.4}]}
    busy = check_threads(env)  # type: ignore[arg-type]
    j = judge_threads(2, 2, 0.0, 1.6)
    assert busy.status == "warn" and f"torch.set_num_threads({j.suggested})" in busy.fix, busy
    assert "python spin.py 90%, ffmpeg 40%" in busy.detail, busy.detail
    quiet = check_threads({**env, "others_busy_cores": 0.1})  # type: ignore[arg-type]
    assert quiet.status == "ok", quiet


def test_try_has_three_outcomes() -> None:
    from mpsprofiler.experiment.stats import speedup
    from mpsprofiler.experiment.trial import headline

    wide = speedup([(1.4, 1.0), (3.8, 1.0), (3.7, 1.0)])  # the three pairs, all faster
    assert wide is not None and wide.verdict == "unproven" and wide.low < 1.0
    more = wide.pairs_to_settle()
    assert more is not None and more > 3
    text = headline({"label": "num_workers=4", "verdict": wide.verdict, "pairs": 3, "speedup": wide.estimate,
                     "interval": [wide.low, wide.high], "pairs_to_settle": more})
    assert text.startswith("NOT PROVEN YET") and f"--pairs {more}" in text
    assert "interval" in text and f"{wide.low:.2f}"[:3] in text  # a bounded interval is printed
    two = speedup([(1.4, 1.0), (11.0, 1.0)])  # two pairs far apart: Student's interval bounds nothing
    assert two is not None and two.verdict == "unproven" and two.high / max(two.low, 1e-12) > 100, two
    text = headline({"label": "num_workers=7", "verdict": two.verdict, "pairs": 2, "speedup": two.estimate,
                     "interval": [two.low, two.high], "pairs_to_settle": two.pairs_to_settle()})
    assert text.startswith("NOT PROVEN YET with num_workers=7") and "over 2 pairs, too few to bound it" in text, text
    assert "interval" not in text, text
    same = speedup([(1.0, 1.01), (1.0, 0.99), (1.01, 1.0), (0.99, 1.0), (1.0, 1.0)])
    assert same is not None and same.verdict == "same"
    fast = speedup([(3.0, 1.0), (3.1, 1.0), (2.9, 1.0)])
    assert fast is not None and fast.verdict == "faster"
    slow = speedup([(1.0, 3.0), (1.0, 3.1), (1.0, 2.9)])
    assert slow is not None and slow.verdict == "slower"
