"""A run elsewhere with the MPS variables a Mac would refuse: the run itself went fine
(nothing but torch's MPS backend reads them), so the findings are predictions, encoded from
torch's sources: ``setHighWatermarkRatio`` / ``setLowWatermarkRatio`` in
aten/src/ATen/mps/MPSAllocator.mm (0 <= high <= 2, 0 <= low <= high; the low default on
Apple silicon is 1.4) and ``std::stoi`` of PYTORCH_ENABLE_MPS_FALLBACK in
aten/src/ATen/mps/MPSFallback.mm (``import torch`` aborts on text that is no number)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import REPO, child_env, mpsprof_cli, read_summary
from mpsprofiler.devices.mps_rules import (
    FALLBACK,
    HIGH,
    LOW,
    fallback_aborts,
    stoi,
    validate_env,
    validate_watermarks,
    watermark_fix,
)

SCRIPT = REPO / "tests" / "scripts" / "exits.py"  # no torch needed: the variables are the run's


def test_the_fallback_switch_aborts_where_stoi_reads_no_number() -> None:
    for raw in ("true", "yes", "", " on", "x1"):
        assert fallback_aborts(raw), raw
    for raw in ("1", "0", " 1", "+1", "-0", "1.0", "2", "1abc"):  # stoi reads a leading number
        assert not fallback_aborts(raw), raw
    assert not fallback_aborts(None)
    assert fallback_aborts("99999999999")  # std::out_of_range: beyond int


@pytest.mark.parametrize(("raw", "on"), [
    ("1", True), ("2", True), ("-1", True), (" 1", True), ("1.0", True), ("1abc", True),
    ("0", False), ("00", False), ("0.5", False), ("0x1", False), ("-0", False),
    ("true", False), ("", False), (None, False), ("99999999999", False),
])
def test_the_fallback_is_on_where_stoi_reads_a_non_zero_int(raw: str | None, on: bool) -> None:
    """MPSFallback.mm, TORCH_LIBRARY_IMPL(_, MPS, m): ``!value || std::stoi(value) == 0``
    registers the NotImplementedError fallback, anything else the CPU one. Audit fix: the ops
    analyzer took "0.5" and "00" for on, the environment analyzer "2" for off."""
    from mpsprofiler.devices.mps_rules import fallback_enabled
    from mpsprofiler.diagnosis.analyzers.ops import ops_facts
    from mpsprofiler.session.ops import OpStats

    assert fallback_enabled(raw) is on
    if raw is not None:
        assert stoi(raw) == (None if fallback_aborts(raw) else int(re.match(r"\s*([+-]?\d+)", raw).group(1)))  # type: ignore[union-attr]
    stats = OpStats()
    stats.sampled_steps = 1
    env = {} if raw is None else {FALLBACK: raw}
    assert ops_facts(stats, "cpu", env)["mps_fallback_enabled"] is on


def test_the_fix_for_a_refused_pair_is_a_pair_torch_accepts() -> None:
    for env in ({HIGH: "0.5"}, {HIGH: "1.2"}, {HIGH: "2.5"}, {HIGH: "1.0", LOW: "1.2"}, {LOW: "1.9"}):
        assert validate_env(env) is not None, env
        pair = watermark_fix(env)
        assert pair is not None and validate_env(pair) is None and validate_env(pair, unified=False) is None, pair
        assert float(pair[LOW]) <= float(pair[HIGH]) <= 2.0, pair
    assert watermark_fix({HIGH: "0.5"}) == {HIGH: "0.5", LOW: "0.4"}
    assert watermark_fix({HIGH: "1.0", LOW: "0.8"}) is None
    assert validate_watermarks(0.5, None) == "invalid low watermark ratio 1.4"


def _findings(tmp_path: Path, name: str, **env: str) -> dict[str, dict[str, str]]:
    run = tmp_path / name
    proc = mpsprof_cli("run", "--headless", "-o", str(run), str(SCRIPT), "0", env=child_env(**env))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {f["rule"]: f for f in read_summary(run)["findings"]}


@pytest.mark.slow
def test_a_shell_a_mac_would_refuse_is_said_and_a_valid_one_is_not(tmp_path: Path) -> None:
    found = _findings(tmp_path, "refused", **{HIGH: "0.5", FALLBACK: "true"})
    water = found["mac-watermark-refused"]
    assert "invalid low watermark ratio 1.4" in water["title"], water
    assert 'os.environ["PYTORCH_MPS_HIGH_WATERMARK_RATIO"] = "0.5"' in water["fix"]
    assert 'os.environ["PYTORCH_MPS_LOW_WATERMARK_RATIO"] = "0.4"' in water["fix"]
    # in front of the script's own command as this run ran it, not a made-up `python train.py`
    assert re.search(rf"{HIGH}=0\.5 {LOW}=0\.4 python \S*{re.escape(SCRIPT.name)} 0`", water["fix"]), water["fix"]
    fallback = found["mac-fallback-aborts"]
    assert "PYTORCH_ENABLE_MPS_FALLBACK=true" in fallback["title"] and '"1"' in fallback["fix"], fallback
    clean = _findings(tmp_path, "accepted", **{HIGH: "1.0", LOW: "0.8", FALLBACK: "1"})
    assert not {"mac-watermark-refused", "mac-fallback-aborts"} & set(clean), sorted(clean)
