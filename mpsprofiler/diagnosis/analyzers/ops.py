"""Facts about op placement, CPU fallback, syncs and dtypes, for the rules in rules/ops.yaml.

Facts are flat and named; a fact that does not apply is left out (a rule over a missing
fact does not match). Tables are preformatted Markdown so rules can quote them as is.
"Predicted" facts say what would happen on a Mac, from the ops a CPU or CUDA run used and
the MPS kernel table of the installed torch (:mod:`mpsprofiler.kernels.readiness`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...devices.kinds import normalize_device
from ...devices.mps_rules import fallback_enabled
from ...events.payloads import EnvFields
from ...kernels.readiness import MpsKernelTable, default_table
from ...session.ops import OTHER, OpRow, OpStats, SyncRow
from ...session.session import Session
from .registry import analyzer
from .sync_fix import library_path

TABLE_ROWS = 8
NO_MODULE = "code outside any nn.Module"
"""What a rule's evidence says for an op run by no module ("... in code outside any
nn.Module (train.py:48)"); a table cell shows a dash instead."""


def _where(file: str, line: int) -> str:
    """``train.py:12`` for the script's files; a library's as its package names it
    (``torch/optim/lbfgs.py:428``), not to be taken for a script of the same name."""
    if not file:
        return "?"
    library = library_path(file)
    return f"{library if library != file else os.path.basename(file)}:{line}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _module(name: str) -> str:
    return name or NO_MODULE


def _op_table(rows: list[OpRow], stats: OpStats, evidence: Callable[[str], str] | None = None) -> str:
    """Markdown table of op rows; ``evidence`` adds a column saying why each is predicted."""
    head, rule = "| op | calls/step | ms/step | module | file:line |", "|---|---:|---:|---|---|"
    if evidence is not None:
        head, rule = head + " evidence |", rule + "---|"
    lines = [head, rule]
    for r in rows[:TABLE_ROWS]:
        line = (f"| `{_cell(r.op)}` | {stats.per_step(r.calls):.1f} | {stats.per_step(r.host_s) * 1e3:.2f} "
                f"| {_cell(r.module or '–')} | {_cell(_where(r.file, r.line))} |")  # fmt: skip
        if evidence is not None:
            line += f" {_cell(evidence(r.op))} |"
        lines.append(line)
    if len(rows) > TABLE_ROWS:
        lines.append(f"| … {len(rows) - TABLE_ROWS} more | | | | |" + (" |" if evidence is not None else ""))
    return "\n".join(lines)


def _sync_table(rows: list[SyncRow], stats: OpStats) -> str:
    lines = ["| kind | calls/step | file:line | code | module |", "|---|---:|---|---|---|"]
    for r in rows[:TABLE_ROWS]:
        code = f"`{_cell(r.code)}`" if r.code else ""
        lines.append(f"| {_cell(r.kind)} | {stats.per_step(r.calls):.1f} | {_cell(_where(r.file, r.line))} "
                     f"| {code} | {_cell(r.module or '–')} |")  # fmt: skip
    return "\n".join(lines)


def _merge_by_op(rows: Iterable[OpRow]) -> dict[str, list[OpRow]]:
    by_op: dict[str, list[OpRow]] = {}
    for row in rows:
        by_op.setdefault(row.op, []).append(row)
    return by_op


def _ordered(rows: list[OpRow]) -> list[OpRow]:
    """Most calls first; a forward op before its backward (its line is the model's, not
    the line that calls backward())."""
    return sorted(rows, key=lambda r: (-r.calls, "_backward" in r.op, -r.host_s))


def _fallback_facts(prefix: str, rows: list[OpRow], stats: OpStats) -> dict[str, Any]:
    """Shared shape of actual (``mps_fallback_*``) and predicted facts; ``rows`` come
    :func:`_ordered`."""
    by_op = _merge_by_op(rows)
    ops = sorted(by_op, key=lambda op: -sum(r.calls for r in by_op[op]))
    calls = sum(r.calls for r in rows)
    host = sum(r.host_s for r in rows)
    top = rows[0]
    return {
        f"{prefix}_ops": ops,
        f"{prefix}_count": len(ops),
        f"{prefix}_calls_per_step": stats.per_step(calls),
        f"{prefix}_ms_per_step": stats.per_step(host) * 1e3,
        f"{prefix}_modules": sorted({_module(r.module) for r in rows}),
        f"{prefix}_top_op": top.op,
        f"{prefix}_top_module": _module(top.module),
        f"{prefix}_top_line": _where(top.file, top.line),
    }


def _layer_on_cpu(stats: OpStats, kind: str) -> dict[str, Any]:
    """A module whose ops run only on the CPU while the model lives on the accelerator,
    or whose parameters sit on another device than its input."""
    model = stats.model_device or ""
    if kind == "cpu" or not model or model.startswith("cpu"):
        return {}
    for m in stats.mismatches.values():
        if m.get("param_device", "").startswith("cpu") or m.get("input_device", "").startswith("cpu"):
            return {"layer_on_cpu_module": m["module"], "layer_on_cpu_device": model,
                    "layer_on_cpu_param_device": m.get("param_device"),
                    "layer_on_cpu_input_device": m.get("input_device"),
                    "layer_on_cpu_count": len(stats.mismatches), "layer_on_cpu_source": "mismatch"}  # fmt: skip
    per_module: dict[str, float] = {}
    for row in stats.ops.values():
        if row.module and row.module != OTHER and row.devices == {"cpu"}:
            per_module[row.module] = per_module.get(row.module, 0.0) + row.host_s
    if not per_module:
        return {}
    module = max(per_module, key=lambda m: per_module[m])
    return {"layer_on_cpu_module": module, "layer_on_cpu_device": model,
            "layer_on_cpu_param_device": "cpu", "layer_on_cpu_input_device": "cpu",
            "layer_on_cpu_ms_per_step": stats.per_step(per_module[module]) * 1e3,
            "layer_on_cpu_count": len(per_module), "layer_on_cpu_source": "cpu_ops"}  # fmt: skip


def _env_flag(env: Mapping[str, Any], name: str) -> str | None:
    for source in (env, env.get("env_vars"), env.get("vars"), env.get("pytorch_env")):
        value = source.get(name) if isinstance(source, dict) else None
        if isinstance(value, str):
            return value
    return None


def ops_facts(
    ops: OpStats, device_kind: str, env: EnvFields | None = None, table: MpsKernelTable | None = None,
    training_s: float = 0.0,
) -> dict[str, Any]:
    """Flat facts for rules; empty when no step was sampled."""
    if ops.sampled_steps == 0:
        return {}
    kind = normalize_device(device_kind or ops.device_kind or "cpu")
    env = env or {}
    facts: dict[str, Any] = {
        "ops_sampled_steps": ops.sampled_steps,
        "ops_first_step": ops.first_step,
        "ops_sample_interval": ops.interval,
        "ops_overhead_share": ops.overhead_share(),
        "ops_cost_s": ops.cost_s,
        "ops_cost_share": ops.cost_share(training_s),
        "ops_converged": ops.converged,
        "ops_model_device": ops.model_device,
    }
    flag = _env_flag(env, "PYTORCH_ENABLE_MPS_FALLBACK")
    # torch reads it with std::stoi (MPSFallback.mm): "0.5" is off, "2" on
    facts["mps_fallback_enabled"] = fallback_enabled(flag)

    # actual fallbacks (MPS only)
    if kind == "mps":
        misses = _ordered(list(ops.mps_misses.values()))
        facts.update({"mps_fallback_ops": [], "mps_fallback_count": 0, "mps_fallback_calls_per_step": 0.0})
        if misses:
            facts.update(_fallback_facts("mps_fallback", misses, ops))
            facts["mps_fallback_top"] = _op_table(misses, ops)
            total = ops.per_step(ops.host_s) * 1e3
            facts["mps_fallback_share"] = facts["mps_fallback_ms_per_step"] / total if total > 0 else None

    # predicted fallbacks on a Mac (any device)
    table = table or default_table()
    predicted = _ordered(ops.predicted_fallbacks(table, kind))
    facts.update({"mps_predicted_fallback_ops": [], "mps_predicted_fallback_count": 0,
                  "mps_predicted_fallback_calls_per_step": 0.0})  # fmt: skip
    if predicted:
        facts.update(_fallback_facts("mps_predicted_fallback", predicted, ops))
        facts["mps_predicted_fallback_table"] = _op_table(predicted, ops, table.explain)
        facts["mps_predicted_fallback_top_evidence"] = table.explain(predicted[0].op)
    facts["mps_kernel_table_size"] = len(table)

    # syncs
    syncs = ops.top_syncs(1000)
    total_syncs = sum(s.calls for s in syncs)
    facts["syncs_per_step"] = ops.per_step(total_syncs)
    # a cut sample's reads stop at the cut: the count per step is a lower bound then (codes)
    facts["syncs_counted"] = facts["syncs_cut"] = "at_least" if ops.cut_steps else "all"
    facts["syncs_predicted"] = bool(syncs) and all(s.predicted for s in syncs)
    if syncs:
        top = syncs[0]
        facts.update({
            "sync_top_line": _where(top.file, top.line),
            "sync_top_file": top.file,
            "sync_top_code": top.code or top.op,
            "sync_top_module": _module(top.module),
            "sync_top_kind": top.kind,
            "sync_top_calls_per_step": ops.per_step(top.calls),
            "sync_kinds": sorted({s.kind for s in syncs}),
            "sync_table": _sync_table(syncs, ops),
        })  # fmt: skip

    # dtypes
    facts["float64_ops_per_step"] = ops.per_step(ops.float64_calls)
    sites = ops.top_float64(1)
    if sites:
        s = sites[0]
        facts.update({"float64_top_line": _where(s.file, s.line), "float64_top_module": _module(s.module),
                      "float64_top_code": s.code, "float64_top_op": s.op})  # fmt: skip
    facts["bf16_complex_ops"] = ops.per_step(ops.bfloat16_calls + ops.complex_calls)
    facts["bfloat16_ops_per_step"] = ops.per_step(ops.bfloat16_calls)
    facts["complex_ops_per_step"] = ops.per_step(ops.complex_calls)

    facts.update(_layer_on_cpu(ops, kind))
    return facts


OPS_FACTS: tuple[str, ...] = (
    "bf16_complex_ops", "bfloat16_ops_per_step", "complex_ops_per_step", "float64_ops_per_step",
    "float64_top_code", "float64_top_line", "float64_top_module", "float64_top_op", "layer_on_cpu_count",
    "layer_on_cpu_device", "layer_on_cpu_input_device", "layer_on_cpu_module", "layer_on_cpu_ms_per_step",
    "layer_on_cpu_param_device", "layer_on_cpu_source", "mps_fallback_enabled", "mps_fallback_share",
    "mps_fallback_top", "mps_kernel_table_size", "mps_predicted_fallback_table",
    "mps_predicted_fallback_top_evidence", "ops_converged", "ops_cost_s", "ops_cost_share", "ops_first_step",
    "ops_model_device", "ops_overhead_share",
    "ops_sample_interval", "ops_sampled_steps", "sync_kinds", "sync_table", "sync_top_calls_per_step",
    "sync_top_code", "sync_top_file", "sync_top_kind", "sync_top_line", "sync_top_module", "syncs_counted",
    "syncs_cut", "syncs_per_step", "syncs_predicted",
    *(f"{p}_{s}" for p in ("mps_fallback", "mps_predicted_fallback") for s in (
        "ops", "count", "calls_per_step", "ms_per_step", "modules", "top_op", "top_module", "top_line")),
)
"""Every fact the ``ops`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("ops", provides=OPS_FACTS)
def op_facts(session: Session) -> dict[str, Any]:
    return dict(ops_facts(session.ops, session.device_kind, session.env, training_s=session.steps.total_dur))
