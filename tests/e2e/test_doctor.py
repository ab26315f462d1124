"""Doctor checks: the real machine, and Macs described by fake environment dicts."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.doctor import (
    STATUSES,
    Check,
    add_doctor_arguments,
    main_doctor,
    mps_min_macos,
    render_text,
    run_checks,
    to_json,
)
from mpsprofiler.environment import collect_environment

GIB = 1024**3


def mac(**overrides: Any) -> dict[str, Any]:
    """An Apple-silicon Mac with MPS working; tests change one fact at a time."""
    env: dict[str, Any] = {
        "python": "3.12.4", "python_executable": "/opt/homebrew/bin/python3", "platform": "darwin",
        "os": "macOS 14.5", "macos_version": "14.5", "machine": "arm64", "chip": "Apple M2 Pro",
        "apple_silicon": True, "rosetta": False, "cores_logical": 12, "cores_physical": 12,
        "cores_performance": 8, "memory_total": 32 * GIB, "torch": "2.9.0", "torch_cuda": None,
        "mps_built": True, "mps_available": True, "cuda_available": False, "cuda_device_count": 0,
        "cuda_device_name": None, "torch_threads": 8, "omp_num_threads": None, "pytorch_env": {},
    }
    env.update(overrides)
    return env


def by_id(checks: list[Check]) -> dict[str, Check]:
    return {c.id: c for c in checks}


def test_this_machine_says_mps_unavailable_because_not_macos() -> None:
    if sys.platform == "darwin":
        pytest.skip("runs on Linux")
    checks = by_id(run_checks())
    assert checks["mps"].status == "info"
    assert "not macOS" in checks["mps"].detail
    assert checks["torch"].status == "ok"
    assert all(c.status in STATUSES for c in checks.values())


def test_apple_silicon_macos_14_torch_29_is_ok() -> None:
    checks = by_id(run_checks(mac()))
    assert checks["mps"].status == "ok"
    assert checks["mps_watermark"].status == "ok"
    assert checks["torch"].status == "ok"
    assert not [c for c in checks.values() if c.status == "fail"]


def test_macos_13_with_torch_29_fails_and_needs_14() -> None:
    check = by_id(run_checks(mac(macos_version="13.6", mps_available=False)))["mps"]
    assert check.status == "fail"
    assert "macOS 14" in check.detail and "13.6" in check.detail
    assert "torch<2.9" in check.fix


@pytest.mark.parametrize(
    ("torch_version", "needed"),
    [("2.4.1", (12, 3)), ("2.5.0", (13, 0)), ("2.8.0+cpu", (13, 0)), ("2.9.0", (14, 0)),
     ("2.10.0.dev20250101", (14, 0)), ("garbage", None)],
)
def test_minimum_macos_per_torch_version(torch_version: str, needed: tuple[int, int] | None) -> None:
    assert mps_min_macos(torch_version) == needed


@pytest.mark.parametrize(("torch_version", "macos", "says", "not_says"), [
    # bfloat16 from torch 2.3 on macOS 14 (pytorch/pytorch#119641), complex on macOS 14
    # (supportsComplex, OperationUtils.h), int64 downcast before 13.3 (OperationUtils.h)
    ("2.5.1", "13.2", ["bfloat16 and complex tensors need macOS 14", "Before macOS 13.3"], ["torch 2.3"]),
    ("2.5.1", "13.6", ["bfloat16 and complex tensors need macOS 14"], ["13.3", "torch 2.3"]),
    ("2.2.2", "13.6", ["Complex tensors need macOS 14", "bfloat16 needs torch 2.3+ and macOS 14"], []),
    ("2.2.2", "14.5", ["bfloat16 on MPS needs torch 2.3 or newer"], ["Complex"]),
    ("2.9.0", "14.5", [], ["bfloat16", "complex", "Complex", "int64"]),
])
def test_mps_ok_detail_names_what_this_torch_and_macos_lack(torch_version: str, macos: str,
                                                             says: list[str], not_says: list[str]) -> None:
    """Audit fix: the note said "bfloat16 needs macOS 14" to torch 2.1/2.2 users too, whose
    torch has no bfloat16 on MPS at all (the BEHAVIOUR table of devices/mps_rules.py)."""
    check = by_id(run_checks(mac(torch=torch_version, macos_version=macos)))["mps"]
    assert check.status == "ok", check.detail
    for text in says:
        assert text in check.detail, check.detail
    for text in not_says:
        assert text not in check.detail, check.detail


def test_older_torch_on_macos_13_is_fine() -> None:
    assert by_id(run_checks(mac(macos_version="13.2", torch="2.5.1")))["mps"].status == "ok"


def test_rosetta_fails_with_the_arm64_python_fix() -> None:
    env = mac(machine="x86_64", rosetta=True, torch="2.2.2", mps_available=False)
    check = by_id(run_checks(env))["mps"]
    assert check.status == "fail"
    assert "Rosetta" in check.detail
    assert "arm64" in check.fix


def test_intel_mac_sets_cpu_expectations() -> None:
    env = mac(machine="x86_64", apple_silicon=False, chip="Intel(R) Core(TM) i7-9750H",
              cores_performance=None, torch="2.2.2", mps_available=False)
    checks = by_id(run_checks(env))
    assert checks["mps"].status == "info"
    assert "Intel Mac" in checks["mps"].detail and "CPU" in checks["mps"].detail
    assert "Unified memory" not in checks["hardware"].detail


def test_built_but_unavailable_points_at_sandboxes() -> None:
    check = by_id(run_checks(mac(mps_available=False)))["mps"]
    assert check.status == "fail" and "sandbox" in check.detail


def test_torch_without_mps_fails() -> None:
    check = by_id(run_checks(mac(mps_built=False, mps_available=False)))["mps"]
    assert check.status == "fail" and "pip install --upgrade torch" in check.fix


@pytest.mark.parametrize(
    ("variables", "status", "needle"),
    [
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "abc"}, "fail", "no limit at all"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "2.5"}, "fail", "invalid high watermark ratio"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "-1"}, "fail", "outside [0, 2.0]"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.0"}, "fail", "invalid low watermark ratio 1.4"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.0", "PYTORCH_MPS_LOW_WATERMARK_RATIO": "1.2"},
         "fail", "between 0 and the high ratio"),
        ({"PYTORCH_MPS_LOW_WATERMARK_RATIO": "lots"}, "fail", "not a number"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.5x", "PYTORCH_MPS_LOW_WATERMARK_RATIO": "1.2"},
         "warn", "reads it as 1.5"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.0", "PYTORCH_MPS_LOW_WATERMARK_RATIO": "0.8"},
         "ok", "High 1"),
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "1.8"}, "ok", "High 1.8"),
        # C's strtod stops at "_" (Python's float() would read 1.0): 0, the limit is off
        ({"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0_1"}, "warn", "reads it as 0.0, i.e. no limit at all"),
    ],
)
def test_watermark_values(variables: dict[str, str], status: str, needle: str) -> None:
    check = by_id(run_checks(mac(pytorch_env=variables)))["mps_watermark"]
    assert check.status == status, check
    assert needle in check.detail
    assert "read once" in check.detail
    assert (check.fix != "") == (status != "ok")


def test_watermark_zero_warns_about_swap_and_freezing() -> None:
    env = mac(pytorch_env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "0.0"})
    check = by_id(run_checks(env))["mps_watermark"]
    assert check.status == "warn"
    assert "swaps" in check.detail and "freeze" in check.detail


def test_watermarks_off_macos_have_no_effect() -> None:
    env = mac(platform="linux", pytorch_env={"PYTORCH_MPS_HIGH_WATERMARK_RATIO": "9"})
    assert by_id(run_checks(env))["mps_watermark"].status == "info"


@pytest.mark.parametrize(
    ("value", "status"), [("1", "info"), ("0", "info"), ("2", "warn"), ("true", "fail"), ("", "fail")]
)
def test_fallback_variable(value: str, status: str) -> None:
    check = by_id(run_checks(mac(pytorch_env={"PYTORCH_ENABLE_MPS_FALLBACK": value})))["mps_fallback"]
    assert check.status == status
    if status == "info":
        assert "import torch" in check.detail  # it must be set before torch loads
    else:
        assert "PYTORCH_ENABLE_MPS_FALLBACK=1" in check.fix


@pytest.mark.parametrize(("value", "state"), [("2", "is on"), ("0.5", "is off"), ("0x1", "is off")])
def test_fallback_variable_says_what_stoi_reads(value: str, state: str) -> None:
    """Audit fix: "any non-zero integer is on" told a user with 0.5 nothing; std::stoi
    (MPSFallback.mm) reads 0.5 and 0x1 as 0, so the fallback is off."""
    check = by_id(run_checks(mac(pytorch_env={"PYTORCH_ENABLE_MPS_FALLBACK": value})))["mps_fallback"]
    assert check.status == "warn" and state in check.detail and "std::stoi" in check.detail, check.detail


def test_fallback_on_mentions_the_hidden_cost() -> None:
    check = by_id(run_checks(mac(pytorch_env={"PYTORCH_ENABLE_MPS_FALLBACK": "1"})))["mps_fallback"]
    assert "slower than pure CPU" in check.detail and "first" in check.detail


def test_eight_gb_mac_warns_about_memory() -> None:
    check = by_id(run_checks(mac(memory_total=8 * GIB)))["hardware"]
    assert check.status == "warn" and "batch size 8 or 16" in check.fix


def test_threads() -> None:
    assert by_id(run_checks(mac(torch_threads=24)))["threads"].status == "warn"
    assert by_id(run_checks(mac(omp_num_threads="many")))["threads"].status == "warn"
    efficiency = by_id(run_checks(mac(torch_threads=12)))["threads"]
    assert efficiency.status == "info" and "set_num_threads(8)" in efficiency.detail
    assert by_id(run_checks(mac()))["threads"].status == "ok"


def test_cuda_checks() -> None:
    gpu = mac(platform="linux", cuda_available=True, cuda_device_count=2, torch_cuda="12.4",
              cuda_device_name="NVIDIA H100")
    assert by_id(run_checks(gpu))["cuda"].status == "ok"
    hidden = mac(platform="linux", torch_cuda="12.4", pytorch_env={"CUDA_VISIBLE_DEVICES": ""})
    check = by_id(run_checks(hidden))["cuda"]
    assert check.status == "warn" and "hides every GPU" in check.detail
    # PyPI's CUDA wheel on a Linux machine without an NVIDIA driver: it trains on the CPU
    no_driver = by_id(run_checks(mac(platform="linux", torch_cuda="13.2", nvidia_driver=False)))["cuda"]
    assert no_driver.status == "info" and "no NVIDIA driver" in no_driver.detail
    assert "download.pytorch.org/whl/cpu" in no_driver.detail
    with_driver = by_id(run_checks(mac(platform="linux", torch_cuda="13.2", nvidia_driver=True)))["cuda"]
    assert with_driver.status == "warn" and "sees no GPU" in with_driver.detail


def test_doctor_looks_for_the_nvidia_driver_here() -> None:
    from mpsprofiler.doctor import nvidia_driver_present

    expected = None
    if sys.platform.startswith("linux"):
        expected = Path("/proc/driver/nvidia/version").exists() or any(Path("/dev").glob("nvidia[0-9]*"))
    assert nvidia_driver_present() is expected


def test_missing_torch_fails() -> None:
    assert by_id(run_checks(mac(torch=None)))["torch"].status == "fail"


def test_a_broken_env_dict_still_gives_every_check() -> None:
    checks = run_checks({"platform": "darwin", "apple_silicon": True, "cores_logical": "x",
                         "torch_threads": 4})
    assert len(checks) == len(run_checks(mac()))
    assert all(c.status in STATUSES for c in checks)


def test_to_json_round_trips() -> None:
    env = collect_environment()
    checks = run_checks(env)
    data = json.loads(json.dumps(to_json(checks, env)))
    assert data["environment"] == env
    assert [Check(**c) for c in data["checks"]] == checks
    assert sum(data["summary"].values()) == len(checks)
    assert data["status"] in ("ok", "warn", "fail")


def test_render_text_in_a_pipe_is_plain() -> None:
    env = mac(macos_version="13.6", mps_available=False)
    text = render_text(run_checks(env), env, color=False)
    assert "\x1b[" not in text
    assert "FAIL" in text and "fix:" in text and "`" in text  # Markdown kept for pasting
    colored = render_text(run_checks(env), env, color=True)
    assert "\x1b[" in colored


def test_invalid_fallback_value_is_reported_and_restored() -> None:
    """Doctor hides a non-numeric value while torch loads (std::stoi would abort it on a Mac)."""
    code = (
        "import json, os\n"
        "from mpsprofiler.doctor import collect_for_doctor\n"
        "env = collect_for_doctor()\n"
        "print(json.dumps([env['pytorch_env'].get('PYTORCH_ENABLE_MPS_FALLBACK'),\n"
        "                  os.environ.get('PYTORCH_ENABLE_MPS_FALLBACK')]))\n"
    )
    environ = dict(os.environ, PYTORCH_ENABLE_MPS_FALLBACK="true")
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout
    assert json.loads(out) == ["true", "true"]


def test_main_doctor_json(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_doctor_arguments(parser)
    assert main_doctor(parser.parse_args(["--json"])) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["id"] for c in data["checks"]} >= {"torch", "mps", "cuda", "mps_watermark"}


def test_main_doctor_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_doctor(argparse.Namespace(json=False)) == 0
    assert "MPS" in capsys.readouterr().out


def test_numpy_missing_is_a_warning_with_the_install_fix() -> None:
    checks = by_id(run_checks(mac(numpy=None)))
    assert checks["numpy"].status == "warn"
    assert "Failed to initialize NumPy" in checks["numpy"].detail
    assert "pip install numpy" in checks["numpy"].fix
    assert by_id(run_checks(mac(numpy="2.1.0")))["numpy"].status == "ok"


def test_this_machine_reports_its_numpy() -> None:
    from importlib import metadata

    check = by_id(run_checks())["numpy"]
    assert check.status == "ok"
    assert metadata.version("numpy") in check.detail


# threads, physical cores, logical cores, busy DataLoader workers (cores), other programs (cores)
THREAD_CASES = [
    (4, 2, 4, 0.0, 0.0),  # issue 26: 4 threads on 2 physical / 4 logical cores, oversubscribed for both
    (3, 2, 4, 0.0, 0.0),
    (2, 2, 4, 0.0, 0.0),
    (5, 4, 4, 0.0, 0.0),  # more threads than cores, under 1.5 per free core: neither warns
    (6, 4, 8, 0.0, 0.0),
    (24, 12, 12, 0.0, 0.0),
    (2, 2, 2, 0.0, 1.6),  # another program takes a core
    (2, 2, 2, 0.0, 0.1),
    (2, 4, 8, 2.5, 0.0),  # busy workers
    (4, 8, 8, 1.0, 2.0),
    (1, 1, 2, 3.0, 0.0),  # one torch thread: no OpenMP team, no finding
    (8, None, 4, 0.0, 0.0),  # physical cores unknown: logical, for both
]


@pytest.mark.parametrize(("threads", "physical", "logical", "workers", "others"), THREAD_CASES)
def test_doctor_panel_and_rule_give_one_thread_verdict(monkeypatch: pytest.MonkeyPatch, threads: int,
                                                        physical: int | None, logical: int, workers: float,
                                                        others: float) -> None:
    """Issue 26 item 3: the thread-oversubscription rule, ``mpsprof doctor`` and the TUI's
    Environment panel judge the same numbers alike (same function, same core count)."""
    from mpsprofiler.diagnosis import engine
    from mpsprofiler.diagnosis.analyzers import threads as analyzer
    from mpsprofiler.diagnosis.rules import load_builtin_and_user
    from mpsprofiler.doctor import check_threads
    from mpsprofiler.session.session import Session
    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets.environment import doctor_env

    env = {"torch_threads": threads, "cores_physical": physical, "cores_logical": logical, "omp_num_threads": None}
    # the run's measured figures, as the analyzer and the panel read them
    monkeypatch.setattr(analyzer, "_workers_busy", lambda session, n: (workers, True))
    monkeypatch.setattr(analyzer, "others_busy", lambda session: (others, 10.0))
    session = Session(read_back=True)
    session.env.update(env)  # type: ignore[typeddict-item]
    facts = analyzer.thread_facts(session)
    rule = [r for r in load_builtin_and_user([]).rules if r.id == "thread-oversubscription"]
    fired = bool(engine.evaluate(rule, facts, "cpu"))

    panel = check_threads(doctor_env(session.env, RunState(session, live=False)))
    doctor = check_threads({**env, "others_busy_cores": others, "workers_busy_cores": workers})  # type: ignore[arg-type]
    for check in (panel, doctor):
        assert (check.status == "warn") is fired, (check, facts)
        if fired:
            assert f"torch.set_num_threads({facts['suggested_torch_threads']})" in check.fix, check.fix
    if workers == 0.0:  # doctor itself, no training running: no busy workers
        alone = check_threads({**env, "others_busy_cores": others})  # type: ignore[arg-type]
        assert alone.status == doctor.status and alone.fix == doctor.fix


def test_doctor_counts_physical_cores_like_the_rule() -> None:
    check = check_threads_of(torch_threads=4, cores_physical=2, cores_logical=4)
    assert check.status == "warn" and "2 physical / 4 logical cores" in check.detail, check
    assert "OMP_NUM_THREADS=2" in check.fix, check.fix
    assert check_threads_of(torch_threads=2, cores_physical=2, cores_logical=4).status == "ok"


def test_doctor_says_what_other_programs_leave_as_measured() -> None:
    """A fresh clone's ``mpsprof doctor`` on a busy 2-core machine said "Other programs use
    2.0 of 2 cores (...): about 1.0 are free": the judgement's free cores (at least one, for
    the thread suggestion), not what was left. The run's rule words the measured figure
    (``cores_left``, rules/thread-oversubscription.yaml); doctor now does too."""
    busy = check_threads_of(torch_threads=1, cores_physical=2, cores_logical=2, others_busy_cores=2.0)
    assert "Other programs use 2.0 of 2 cores: about 0.0 are free." in busy.detail, busy.detail
    half = check_threads_of(torch_threads=1, cores_physical=2, cores_logical=2, others_busy_cores=0.6)
    assert "about 1.4 are free" in half.detail, half.detail


def check_threads_of(**env: Any) -> Check:
    from mpsprofiler.doctor import check_threads

    return check_threads({"omp_num_threads": None, **env})  # type: ignore[arg-type]


def test_the_others_reading_never_counts_the_trainings_own_processes() -> None:
    """Doctor's reading of other programs and the run's (launcher/others.py): a DataLoader
    worker (and its child) descends from the training by its listed parent pid: not another
    program, from the one listing (no second one for the tree, where a worker started or
    gone in between was missed)."""
    from types import SimpleNamespace

    from mpsprofiler.launcher.others import OtherPrograms

    class Proc:
        def __init__(self, pid: int, ppid: int, name: str) -> None:
            times = SimpleNamespace(user=5.0, system=1.0)
            self.pid, self.info = pid, {"name": name, "create_time": 1.0, "cpu_times": times, "ppid": ppid}

        def cmdline(self) -> list[str]:
            return [str(self.info["name"])]

    calls: list[str] = []

    class FakePsutil:
        Error = Exception

        @staticmethod
        def process_iter(attrs: list[str]) -> list[Proc]:
            calls.append("list")
            assert "ppid" in attrs
            return [Proc(1, 0, "init"), Proc(100, 1, "python"), Proc(101, 100, "python"),
                    Proc(102, 100, "python"), Proc(103, 102, "python"), Proc(200, 1, "ffmpeg"), Proc(0, 0, "idle")]

    sampler = OtherPrograms()
    sampler._proc = False  # psutil's listing, as on macOS
    sampler._read(sampler._list(FakePsutil), 100)
    assert calls == ["list"]  # one listing: the tree is the listed parent pids' (no second one)
    assert sorted(pid for pid, _ in sampler._last) == [1, 200]
