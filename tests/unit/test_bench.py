"""``mpsprof bench --quick`` on the CPU, for real (OMP_NUM_THREADS=1 keeps it under ~20 s)."""

from __future__ import annotations

import argparse
import json

import pytest

from mpsprofiler.bench import (
    QUICK_SIZES,
    add_bench_arguments,
    interpret,
    main_bench,
    render_bench,
    run_bench,
    time_call,
)


@pytest.fixture(scope="module")
def quick_report() -> dict:
    return run_bench(quick=True, accelerator=False, progress=False)


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return parser.parse_args(argv)


def test_main_bench_quick_json_structure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_bench(parse(["--quick", "--json", "--sizes", "128,256"])) == 0
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["quick"] is True and report["repeats"] == 2 and report["sizes"] == [128, 256]
    kinds = [r["kind"] for r in report["results"]]
    assert kinds == ["matmul", "matmul", "conv", "transformer"]
    for result in report["results"]:
        assert result["cpu"]["median_ms"] > 0
        assert len(result["cpu"]["samples_ms"]) == 2
        assert all(s > 0 for s in result["cpu"]["samples_ms"])
        if report["accelerator"] is None:
            assert result["accelerator"] is None and result["speedup"] is None
    assert "[1/" in captured.err  # plain progress lines when not a terminal


def test_quick_defaults_and_cpu_only_verdict(quick_report: dict) -> None:
    assert quick_report["sizes"] == list(QUICK_SIZES)
    assert quick_report["accelerator"] is None
    matmuls = [r for r in quick_report["results"] if r["kind"] == "matmul"]
    assert all(r["cpu"]["gflops"] > 0 for r in matmuls)
    models = [r for r in quick_report["results"] if r["kind"] != "matmul"]
    assert all(r["params"] > 0 for r in models)
    assert quick_report["verdict"][0].lower().startswith("no accelerator; cpu figures only")


def test_render_bench_is_plain_in_a_pipe(quick_report: dict) -> None:
    text = render_bench(quick_report, color=False)
    assert "\x1b[" not in text
    assert "matmul 1024" in text and "no accelerator" in text


def test_verdict_below_threshold_blames_data_loading_or_small_ops(quick_report: dict) -> None:
    report = json.loads(json.dumps(quick_report))
    report["accelerator"] = "mps"
    base = report["results"][0]
    fake = dict(base, size=2048, name="matmul 2048", speedup=1.05,
                accelerator={"median_ms": 1.0, "cold_ms": 1.0})
    report["results"] = [fake]
    assert "data loading or small ops" in interpret(report)[0]
    fake["speedup"] = 6.0
    assert "6.0x at 2048" in interpret(report)[0]


def test_quick_sizes_have_no_2048_verdict(quick_report: dict) -> None:
    report = json.loads(json.dumps(quick_report))
    report["accelerator"] = "cuda"
    for r in report["results"]:
        r["accelerator"], r["speedup"] = {"median_ms": 2.0, "cold_ms": 500.0}, 0.5
    lines = interpret(report)
    assert "without --quick" in lines[0]
    assert any("the CPU wins" in line for line in lines)
    assert any("first use" in line for line in lines)


def test_time_call_synchronises_and_batches_short_calls() -> None:
    syncs: list[int] = []
    calls: list[int] = []
    result = time_call(lambda: calls.append(1), lambda: syncs.append(1), repeats=3, min_sample_s=0.001)
    assert len(result["samples_ms"]) == 3 and result["median_ms"] >= 0
    assert result["calls_per_sample"] > 1  # a no-op is far below a millisecond
    assert len(syncs) == 2 * (1 + 2 + 3)  # before and after every timed region


def test_bad_sizes_are_rejected() -> None:
    with pytest.raises(SystemExit):
        parse(["--sizes", "12,abc"])
    with pytest.raises(SystemExit):
        parse(["--repeats", "0"])


def test_a_failing_device_is_reported_not_raised() -> None:
    report = run_bench(sizes=[32], quick=True, accelerator="no_such_device", progress=False)
    assert all(r["cpu"]["median_ms"] > 0 for r in report["results"])
    assert all(r["accelerator"]["error"] and r["speedup"] is None for r in report["results"])
    assert any("failed on no_such_device" in line for line in report["verdict"])
    assert "error" in render_bench(report, color=False)
