"""OpStats (session side), ops_facts and the rules in rules/ops.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mpsprofiler.diagnosis.analyzers.ops import ops_facts
from mpsprofiler.diagnosis.analyzers.sync_fix import sync_fix
from mpsprofiler.kernels.readiness import MpsKernelTable
from mpsprofiler.session.ops import OpStats
from ops_driver import load_example, ops_events, private_cache, run_example  # noqa: F401

RULES = Path(__file__).resolve().parents[2] / "rules" / "ops.yaml"


def _stats(events: list[tuple[str, dict[str, Any]]]) -> OpStats:
    stats = OpStats()
    for record in ops_events(events):
        stats.feed(record)
    return stats


def _event(step: int, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"k": "ops", "ts": 1.0, "step": step, "host_s": 0.01, "overhead_s": 0.002,
                            "interval": 10, "device_kind": "cpu", "model_device": "cpu", "ops": [],
                            "syncs": [], "float64": {"calls": 0, "sites": []},
                            "bf16_complex": {"bfloat16": 0, "complex": 0}, "mismatch": [], "mps_kernel": []}  # fmt: skip
    base.update(extra)
    return base


def _findings(facts: dict[str, Any], device: str) -> dict[str, Any]:
    from mpsprofiler.diagnosis.engine import evaluate
    from mpsprofiler.diagnosis.rules import load_file

    ruleset = load_file(RULES)
    assert ruleset.ok, [str(e) for e in ruleset.errors]
    return {f.rule: f for f in evaluate(ruleset, facts, device)}


# --------------------------------------------------------------------------- OpStats


def test_opstats_means_per_sampled_step() -> None:
    stats = OpStats()
    op = {"op": "aten::mm", "calls": 4, "host_s": 0.002, "devices": ["cpu"], "module": "fc",
          "dtypes": ["float32"], "file": "/x/train.py", "line": 12}  # fmt: skip
    stats.feed(_event(3, ops=[op]))
    stats.feed(_event(5, ops=[dict(op, calls=2)]))
    stats.feed(_event(9))  # a step where the op did not run counts as zero
    row = stats.ops[("aten::mm", "fc")]
    assert (row.steps, row.calls) == (2, 6)
    assert stats.per_step(row.calls) == pytest.approx(2.0)
    assert (stats.first_step, stats.last_step, stats.sampled_steps) == (3, 9, 3)
    out = stats.to_dict()
    assert out["ops"][0]["calls_per_step"] == 2.0 and out["ops"][0]["file"] == "/x/train.py"
    assert out["overhead_share"] == pytest.approx(0.2)


def test_opstats_memory_is_bounded() -> None:
    stats = OpStats(max_keys=50)
    for step in range(20):
        ops = [{"op": f"aten::op{i % 300}", "module": f"m{step}.{i}", "calls": 1} for i in range(400)]
        syncs = [{"kind": "item", "file": f"f{step}.py", "line": i, "calls": 1} for i in range(100)]
        stats.feed(_event(step, ops=ops, syncs=syncs))
    assert len(stats.ops) <= 50 + 500
    assert len(stats.syncs) <= 50
    assert stats.dropped > 0


@pytest.mark.parametrize(
    "junk",
    [
        {},
        {"step": "x", "ops": "nope", "syncs": None, "float64": [], "mismatch": {}},
        {"ops": [None, 3, {"op": None}, {"op": "aten::x", "calls": "many", "devices": "cpu"}]},
        {"syncs": [{"kind": 1, "line": "x"}], "float64": {"calls": True, "sites": [None]}},
    ],
)
def test_opstats_tolerates_odd_events(junk: dict[str, Any]) -> None:
    stats = OpStats()
    stats.feed(junk)
    stats.feed("not a dict")  # type: ignore[arg-type]
    assert stats.to_dict()["sampled_steps"] == 1
    ops_facts(stats, "cpu")


# --------------------------------------------------------------------------- facts on real runs


def test_predicted_fallback_facts_and_rule() -> None:
    events, _ = run_example("fallback_ops", steps=7)
    facts = ops_facts(_stats(events), "cpu", {})
    assert facts["ops_sampled_steps"] == 2 and facts["ops_first_step"] == 3
    ops = set(facts["mps_predicted_fallback_ops"])
    assert {"aten::multilabel_margin_loss_forward", "aten::_pdist_forward", "aten::adaptive_max_pool3d",
            "aten::multilabel_margin_loss_backward", "aten::_pdist_backward",
            "aten::adaptive_max_pool3d_backward"} <= ops  # fmt: skip
    assert facts["mps_predicted_fallback_count"] == len(ops)
    assert facts["mps_predicted_fallback_calls_per_step"] == pytest.approx(6.0)
    assert {"MultiLabelMarginLoss", "model.spread (SpreadPenalty)", "model.encoder.pool (AdaptiveMaxPool3d)"} <= set(
        facts["mps_predicted_fallback_modules"])
    table = facts["mps_predicted_fallback_table"]
    assert table.startswith("| op | calls/step |") and "`aten::_pdist_forward`" in table
    assert "fallback_ops.py:" in table
    assert "mps_fallback_ops" not in facts  # actual fallbacks are an MPS-only fact
    found = _findings(facts, "cpu")
    assert "mps-readiness" in found and found["mps-readiness"].severity == "info"
    assert "aten::_pdist_forward" in found["mps-readiness"].evidence
    assert found["mps-readiness"].first_step == 3
    assert "cpu-fallback" not in found


def test_the_mac_prediction_names_the_device_the_run_used() -> None:
    """mps-readiness is a prediction for CPU and CUDA runs alike: its evidence names the
    device this run used (the ``device_kind`` fact), so neither reads as a Mac's run."""
    events, _ = run_example("fallback_ops", steps=7)  # (a CPU run: its facts stand for a CUDA one's too)
    predicted = ops_facts(_stats(events), "cpu", {})
    for device, used in (("cpu", "this run used the CPU, not a Mac's GPU,"),
                         ("cuda", "this run used a CUDA GPU, not a Mac's,")):
        facts = {**predicted, "device_kind": device}
        finding = _findings(facts, device)["mps-readiness"]
        assert finding.title.startswith("If this script ran on a Mac's GPU (MPS), "), finding.title
        assert f"A prediction for a Mac: {used}" in " ".join(finding.evidence.split()), finding.evidence


def test_a_run_that_already_enables_the_fallback_is_not_told_to_enable_it() -> None:
    """Sweep s52 a12: a Mac script sets ``os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"``
    before ``import torch``; mps-readiness still said to set it, and ``patch`` "on the Mac, set
    PYTORCH_ENABLE_MPS_FALLBACK=1 before `import torch`". The run's environment at torch's
    import (the probe's ``pytorch_env``) says whether it is set: only a run without it gets
    the lines to add, which the not-patched line quotes."""
    from types import SimpleNamespace

    from mpsprofiler.patch.unplanned import unplanned_line

    events, _ = run_example("fallback_ops", steps=7)
    session = SimpleNamespace(run={"cwd": "/x"}, dataloaders={})
    fixes = {}
    for flag, env in (("set", {"pytorch_env": {"PYTORCH_ENABLE_MPS_FALLBACK": "1"}}), ("unset", {})):
        finding = _findings(ops_facts(_stats(events), "cpu", env), "cpu")["mps-readiness"]
        line = unplanned_line(session, finding, {}, "/x/train.py")  # type: ignore[arg-type]
        fixes[flag] = (finding.fix, line)
    fix, line = fixes["set"]
    assert "This run had PYTORCH_ENABLE_MPS_FALLBACK=1 before torch was imported" in fix, fix
    assert "os.environ[" not in fix and "{" not in fix, fix
    assert "the run already had PYTORCH_ENABLE_MPS_FALLBACK=1 before `import torch`: keep it" in line, line
    fix, line = fixes["unset"]
    assert 'os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"  # before `import torch`' in fix, fix
    assert 'on the Mac, `os.environ["PYTORCH_ENABLE_MPS_FALLBACK"] = "1"` before `import torch`' in line, line


def test_clean_model_fires_none_of_the_op_rules() -> None:
    events, _ = run_example("mps_clean", steps=7)
    facts = ops_facts(_stats(events), "cpu", {})
    assert facts["mps_predicted_fallback_count"] == 0 and facts["mps_predicted_fallback_ops"] == []
    assert facts["float64_ops_per_step"] == 0
    assert _findings(facts, "cpu") == {}


def test_sync_facts_and_rules() -> None:
    example = load_example("sync_heavy")
    lines = Path(example.__file__).read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "param.grad.norm().item()" in text)
    events, model = run_example("sync_heavy", steps=7)
    stats = _stats(events)
    facts = {**ops_facts(stats, "cpu", {}), **sync_fix(stats)}
    n_params = len(list(model.parameters()))
    assert facts["syncs_per_step"] == pytest.approx(n_params)
    assert facts["syncs_predicted"] is True
    assert facts["sync_top_line"] == f"sync_heavy.py:{line}"
    assert facts["sync_top_code"].startswith("norms[name] = param.grad.norm().item()")
    assert facts["sync_top_module"] == "code outside any nn.Module" and facts["sync_top_kind"] == "item"
    assert f"sync_heavy.py:{line}" in facts["sync_table"]
    assert (facts["sync_top_via_where"], facts["sync_fix_where"]) == ("none", "plain")  # the script's own line
    found = _findings(facts, "cpu")
    assert set(found) == {"sync-heavy-mac"}
    assert f"sync_heavy.py:{line}" in found["sync-heavy-mac"].evidence
    assert "keep per-step values on the device" in found["sync-heavy-mac"].fix
    # the same numbers measured on a GPU (not predicted) fire the warning instead
    assert set(_findings(dict(facts, syncs_predicted=False), "cuda")) == {"sync-heavy"}


def test_actual_fallback_facts_on_fake_mps() -> None:
    table = MpsKernelTable.load()
    events, _ = run_example("fallback_ops", steps=7, device_kind="mps", mps_device_type="cpu",
                            has_mps_kernel=lambda op: table.status(op) != "cpu_fallback")  # fmt: skip
    facts = ops_facts(_stats(events), "mps", {"PYTORCH_ENABLE_MPS_FALLBACK": "1"})
    assert facts["mps_fallback_enabled"] is True
    assert facts["mps_fallback_count"] >= 6
    assert facts["mps_fallback_calls_per_step"] == pytest.approx(6.0)
    assert "| `aten::multilabel_margin_loss_forward` | 1.0 |" in facts["mps_fallback_top"]
    assert facts["mps_fallback_share"] is not None and 0 < facts["mps_fallback_share"] < 1
    found = _findings(facts, "mps")
    assert "cpu-fallback" in found and "mps-readiness" not in found
    assert "encoder.pool" in found["cpu-fallback"].evidence


# --------------------------------------------------------------------------- synthetic facts


def test_float64_facts() -> None:
    site = {"module": "head", "file": "/w/train.py", "line": 7, "op": "aten::addmm", "calls": 3,
            "code": "y = self.head(x)"}  # fmt: skip
    stats = OpStats()
    stats.feed(_event(3, float64={"calls": 5, "sites": [site]}, bf16_complex={"bfloat16": 2, "complex": 1}))
    facts = ops_facts(stats, "cpu")
    assert facts["float64_ops_per_step"] == 5
    assert facts["float64_top_line"] == "train.py:7" and facts["float64_top_module"] == "head"
    assert facts["bf16_complex_ops"] == 3
    found = _findings(facts, "cpu")
    assert "float64-mps" in found and "train.py:7" in found["float64-mps"].evidence


def test_layer_on_cpu_from_mismatch_and_from_cpu_ops() -> None:
    stats = OpStats()
    stats.feed(_event(3, device_kind="mps", model_device="mps:0",
                      mismatch=[{"module": "embed", "param_device": "cpu", "input_device": "mps:0"}]))  # fmt: skip
    facts = ops_facts(stats, "mps")
    assert facts["layer_on_cpu_module"] == "embed" and facts["layer_on_cpu_device"] == "mps:0"
    assert "layer-on-cpu" in _findings(facts, "mps")

    stats = OpStats()
    ops = [{"op": "aten::addmm", "module": "head", "calls": 2, "host_s": 0.004, "devices": ["cpu"]},
           {"op": "aten::addmm", "module": "body", "calls": 2, "host_s": 0.001, "devices": ["cuda:0"]}]  # fmt: skip
    stats.feed(_event(3, device_kind="cuda", model_device="cuda:0", ops=ops))
    facts = ops_facts(stats, "cuda")
    assert facts["layer_on_cpu_module"] == "head" and facts["layer_on_cpu_source"] == "cpu_ops"
    assert facts["layer_on_cpu_ms_per_step"] == pytest.approx(4.0)
    # on a CPU run nothing is "left on the CPU"
    stats.model_device = "cpu"
    assert "layer_on_cpu_module" not in ops_facts(stats, "cpu")


def test_cuda_run_predicts_only_ops_on_the_gpu() -> None:
    ops = [{"op": "aten::_pdist_forward", "module": "spread", "calls": 1, "devices": ["cuda:0"]},
           {"op": "aten::_ctc_loss", "module": "CTCLoss", "calls": 1, "devices": ["cpu"]}]  # fmt: skip
    stats = OpStats()
    stats.feed(_event(3, device_kind="cuda", model_device="cuda:0", ops=ops))
    facts = ops_facts(stats, "cuda")
    assert facts["mps_predicted_fallback_ops"] == ["aten::_pdist_forward"]


def test_no_sampled_step_no_facts() -> None:
    assert ops_facts(OpStats(), "mps") == {}


def test_rules_file_is_valid() -> None:
    from mpsprofiler.diagnosis.rules import load_file

    ruleset = load_file(RULES)
    assert ruleset.errors == []
    assert {r.id for r in ruleset} == {"cpu-fallback", "mps-readiness", "sync-heavy", "sync-heavy-mac",
                                       "layer-on-cpu", "float64-mps"}  # fmt: skip


def test_to_dict_lists_predicted_fallbacks() -> None:
    events, _ = run_example("fallback_ops", steps=4)
    out = _stats(events).to_dict()
    assert {r["op"] for r in out["mps_predicted"]} >= {"aten::_pdist_forward", "aten::adaptive_max_pool3d"}
    assert all(r["calls_per_step"] == 1.0 for r in out["mps_predicted"])
    assert _stats(events).to_dict(predict=False)["mps_predicted"] == []


def test_reports_show_predicted_fallbacks_as_their_own_table() -> None:
    from mpsprofiler.report.ops_tables import ops_tables
    from mpsprofiler.session.session import Session

    events, _ = run_example("fallback_ops", steps=4)
    session = Session()
    session.ops = _stats(events)
    tables = {t.title: t for t in ops_tables(session)}
    predicted = tables["Ops that would fall back to the CPU on a Mac (no MPS kernel in this torch)"]
    assert predicted.columns == ["Op", "Module", "Calls / step", "Where", "Evidence"]
    evidence = {row[0]: row[4] for row in predicted.rows}
    assert "native_functions.yaml `_pdist_forward`" in evidence["aten::_pdist_forward"]
    assert not any("predicted" in title.lower() for title in tables)  # no raw generic copy


# ------------------------------------------------- syncs a framework makes inside the user's line
TRAINER = "/venv/lib/python3.11/site-packages/transformers/trainer.py"
NAN_FILTER = ("if ( self.args.logging_nan_inf_filter and not is_torch_xla_available() and "
              "(torch.isnan(tr_loss_step) or torch.isinf(tr_loss_step)) ):")


def _sync(file: str, line: int, calls: int, via: dict[str, Any] | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"kind": "scalar", "op": "aten::_local_scalar_dense", "calls": calls, "module": "",
                             "file": file, "line": line, "code": "trainer.train()", "device": "cpu",
                             "predicted": True}  # fmt: skip
    if via is not None:
        entry["via"] = via
    return entry


def test_a_trainers_loss_filter_is_told_by_its_setting_in_the_scripts_arguments(tmp_path: Path) -> None:
    """Syncs made by the Trainer's NaN/inf loss filter inside ``trainer.train()`` (the probe
    records the library frame they came through): the fix is the script's own
    TrainingArguments call with ``logging_nan_inf_filter=False``, its line named; the
    per-step count is the filter's share (a logging read through another frame is not)."""
    script = tmp_path / "train.py"
    script.write_text("from transformers import Trainer, TrainingArguments\n\n"
                      "args = TrainingArguments(output_dir='out', max_steps=9,\n"
                      "                         gradient_accumulation_steps=2)\n"
                      "Trainer(model=None, args=args).train()\n")
    nan = {"file": TRAINER, "line": 1956, "function": "_run_epoch", "code": NAN_FILTER}
    log = {"file": TRAINER, "line": 2100, "function": "_maybe_log_save_evaluate", "code": "tr_loss.item()"}
    stats = OpStats()
    for step in (3, 5):
        stats.feed(_event(step, syncs=[_sync(str(script), 5, 4, nan), _sync(str(script), 5, 1, log)]))
    facts = {**ops_facts(stats, "cpu", {}), **sync_fix(stats, str(tmp_path))}
    assert facts["syncs_per_step"] == 5
    assert facts["sync_top_via"] == "transformers/trainer.py:1956 (_run_epoch)"  # the frame most calls came through
    assert (facts["sync_fix_where"], facts["sync_fix_place"], facts["sync_fix_per_step"]) == \
        ("trainer_filter_line", "train.py:3", 4)
    code = facts["sync_fix_code"]
    assert "logging_nan_inf_filter=False" in code and "gradient_accumulation_steps=2" in code
    found = _findings(facts, "cpu")["sync-heavy-mac"]
    assert "inside transformers/trainer.py:1956 (_run_epoch)" in found.evidence
    assert "The Trainer makes 4 of these reads per step itself" in found.fix
    assert "`TrainingArguments` (train.py:3)" in found.fix and code in found.fix
    assert "norms" not in found.fix  # not the advice for the script's own reads
    gpu = _findings(dict(facts, syncs_predicted=False), "cuda")["sync-heavy"]
    assert "logging_nan_inf_filter=False" in gpu.fix and "before moving to a GPU" not in gpu.fix
    # the script gone (a recording read elsewhere): the setting, without a line of it
    script.unlink()
    facts = {**ops_facts(stats, "cpu", {}), **sync_fix(stats, str(tmp_path))}
    assert facts["sync_fix_where"] == "trainer_filter" and "sync_fix_place" not in facts
    fix = _findings(facts, "cpu")["sync-heavy-mac"].fix
    assert "logging_nan_inf_filter=False" in fix and "where the script builds its `TrainingArguments`" in fix


def test_syncs_through_other_library_code_keep_the_plain_fix_and_name_the_frame() -> None:
    """A library's own reads that are not the Trainer's filter (and trainer.py lines that are
    not it): the evidence says which library line, the fix stays the general one."""
    for via in ({"file": "/venv/lib/python3.11/site-packages/timm/utils/metrics.py", "line": 30,
                 "function": "accuracy", "code": "return [correct[:k].sum().item() for k in topk]"},
                {"file": TRAINER, "line": 2100, "function": "_maybe_log_save_evaluate", "code": "tr_loss.item()"}):
        stats = OpStats()
        stats.feed(_event(3, syncs=[_sync("/x/train.py", 8, 6, via)]))
        facts = {**ops_facts(stats, "cpu", {}), **sync_fix(stats)}
        assert facts["sync_fix_where"] == "plain" and "sync_fix_code" not in facts
        found = _findings(facts, "cpu")["sync-heavy-mac"]
        assert f"inside {via['file'].split('site-packages/')[1]}:{via['line']} ({via['function']})" in found.evidence
        assert "keep per-step values on the device" in found.fix


def test_anomaly_nan_checks_read_in_autograd_s_device_thread_are_said_as_such() -> None:
    """On a CUDA GPU (the device call of session 51: an H100) autograd runs the backward
    pass in its own device thread, so anomaly detection's NaN checks come as reads with no
    line of the script ("most from ?", `aten::_local_scalar_dense`); the fix said "keep the
    values on the device". With anomaly detection on and checking NaN, such reads are its
    checks: the fix says so, and cites anomaly detection's docs, not the other variants'.
    The same siteless reads with anomaly detection off keep the plain fix."""
    sync = {"kind": "item", "op": "aten::_local_scalar_dense", "module": "", "file": "", "line": 0, "calls": 12}
    on = _event(3, device_kind="cuda", model_device="cuda:0", syncs=[sync],
                anomaly={"check_nan": True, "sites": [{"file": "/t/train.py", "line": 26, "calls": 1}]})
    off = _event(3, device_kind="cuda", model_device="cuda:0", syncs=[sync])
    for event, where in ((on, "anomaly_engine"), (off, "plain")):
        stats = OpStats()
        stats.feed(event)
        facts = {**ops_facts(stats, "cuda", {}), **sync_fix(stats)}
        assert facts["sync_fix_where"] == where, facts
        found = _findings(facts, "cuda")["sync-heavy"]
        refs = " ".join(found.references)
        if where == "anomaly_engine":
            assert "anomaly detection checking every backward op" in found.fix and "no line of the script" in found.fix
            assert "keep it on the device" not in found.fix, found.fix
            assert "anomaly-detection" in refs and "lbfgs" not in refs, refs
        else:
            assert "keep it on the device" in found.fix and "anomaly-detection" not in refs, found.fix
