"""Fuzzing the readers of untrusted input: the recording (``events.decode_lines``,
``Session.feed_many``, ``load_run``) and the rule loader. Bounded and derandomized so
the suite stays fast and a failure reproduces."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from mpsprofiler import events
from mpsprofiler.diagnosis.rules import parse_rules_text
from mpsprofiler.session.recording import RecordingError, load_run
from mpsprofiler.session.session import Session
from mpsprofiler.session.summary import summarize

FUZZ = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=6), st.dictionaries(st.text(max_size=8), inner, max_size=6)),
    max_leaves=8,
)
FIELDS = sorted(
    {*events.STEP_COLUMNS, "agg", "mode", "sample", "n", "hist", "dur_sum", "i_last", "rss", "rss_children",
     "sys_available", "sys_total", "swap_used", "cpu_pct", "workers", "device", "allocated", "category",
     "message", "filename", "lineno", "count", "type", "module", "frames", "returncode", "signal",
     "signal_name", "duration", "stopped_by_user", "schema", "id", "batch_size", "num_workers", "instrument",
     "script", "argv", "step", "ops", "host_s", "syncs", "parameters", "device_kind", "world_size"}
)


@st.composite
def event_records(draw: st.DrawFn) -> dict:
    record = {"k": draw(st.sampled_from(sorted(events.ALL_KINDS) + ["mystery"])),
              "ts": draw(st.floats(allow_nan=True, allow_infinity=True) | st.integers(0, 10**6))}
    for name in draw(st.lists(st.sampled_from(FIELDS), max_size=8, unique=True)):
        record[name] = draw(json_values)
    if record["k"] == "hello":
        record["schema"] = draw(st.sampled_from([1, events.SCHEMA_VERSION]))
    if record["k"] == "steps" and draw(st.booleans()):
        n = draw(st.integers(0, 5))
        for name in events.STEP_COLUMNS:
            record[name] = draw(st.lists(scalars, min_size=n, max_size=n))
    return record


def _line(record: dict) -> bytes:
    return json.dumps(record).encode() + b"\n"  # NaN / Infinity as a hand-edited file may hold


lines = st.one_of(
    st.binary(max_size=80),
    event_records().map(_line),
    event_records().map(lambda r: _line(r)[: len(_line(r)) // 2]),
    st.sampled_from([b"[" * 5000 + b"]" * 5000 + b"\n", b'{"k": "steps", "ts": 1e999}\n', b"\xef\xbb\xbf{}\n"]),
)


@FUZZ
@given(st.lists(lines, max_size=12))
def test_decode_lines_never_raises(raw: list[bytes]) -> None:
    report = events.DecodeReport()
    decoded = list(events.decode_lines(raw, report))
    assert report.skipped + len(decoded) <= len(raw)
    for event in decoded:
        assert isinstance(event.kind, str) and event.kind
        assert isinstance(event.ts, float)
    assert isinstance(report.describe(), str)


OVERFLOWS = [  # numbers no encoder writes, in fields the session does arithmetic on
    {"k": "steps", "ts": 1, "agg": {"n": float("inf"), "dur_sum": 1, "hist": {"1": float("nan")}}},
    {"k": "steps", "ts": 1, **{c: [10**30] for c in events.STEP_COLUMNS}},
    {"k": "exit", "ts": 1, "returncode": float("inf")},
    {"k": "mem", "ts": 2, "rss": 10**30, "device": {"allocated": float("-inf")}},
    {"k": "warning", "ts": 1, "count": float("inf")},
]


@FUZZ
@given(st.lists(event_records(), max_size=12))
@example(OVERFLOWS)
def test_session_folds_any_events_and_summarizes(records: list[dict]) -> None:
    session = Session()
    evs = list(events.decode_lines([_line(r) for r in records]))
    session.feed_many(evs)
    assert session.events_seen == len(evs)
    summary = summarize(session)
    json.dumps(summary, default=str)  # summary.json can be written


@FUZZ
@given(st.lists(lines, max_size=12))
def test_load_run_refuses_or_reads_any_file(raw: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        path.write_bytes(b"".join(raw))
        try:
            loaded = load_run(Path(tmp))
        except (RecordingError, events.SchemaError) as exc:
            assert str(exc)
            return
        assert loaded.session.events_seen > 0
        assert isinstance(loaded.notes, str)


rule_keys = st.sampled_from(["id", "title", "severity", "when", "evidence", "fix", "devices", "references",
                             "first_step", "requires", "enabled", "threshold_reason", "bogus"])
rule_values = st.one_of(
    json_values,
    st.sampled_from(["warning", "critical", "info", "mps", "steps_count > 3", "{steps_count}", "__import__('os')",
                     "().__class__.__bases__", "data_wait_share > 0.2 and cores_logical < 4", "{{ x }}", "!!python/name:os.system"]),
)
rule_docs = st.one_of(
    st.text(max_size=200),
    st.dictionaries(st.just("rules"), st.lists(st.dictionaries(rule_keys, rule_values, max_size=8), max_size=4))
    .map(lambda d: json.dumps(d)),  # JSON is YAML: structurally plausible rule files
    st.sampled_from(["rules:\n  - &a [*a]\n", "a: &a [*a, *a]\nb: [*a, *a, *a]\n", "!!python/object/apply:os.system ['true']\n",
                     "rules:\n  - id: x\n    when: !!python/name:os.system\n"]),
)


@FUZZ
@given(rule_docs)
def test_rule_loader_never_raises(text: str) -> None:
    rules, errors = parse_rules_text(text, Path("fuzz.yaml"))
    for error in errors:
        assert error.line >= 1 and str(error).startswith("fuzz.yaml:")
    for rule in rules:
        assert rule.id


@pytest.mark.parametrize("when", ["__import__('os').system('touch /tmp/x')", "open('/etc/passwd').read()",
                                  "(lambda: 1)()", "[c for c in ().__class__.__mro__]", "exec('1')"])
def test_rule_conditions_are_not_python(when: str) -> None:
    text = f"rules:\n  - id: evil\n    title: t\n    severity: info\n    when: {json.dumps(when)}\n    evidence: e\n    fix: f\n"
    rules, errors = parse_rules_text(text, Path("evil.yaml"))
    assert rules == [] and errors and errors[0].line == 5


# -- every view over damaged recordings ----------------------------------------------------
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "recordings"
BASES = [[json.loads(line) for line in (FIXTURES / name / "events.jsonl").read_text().splitlines() if line.strip()]
         for name in ("slow_dataloader", "ddp_straggler")]
EXTRA = [  # kinds the fixtures lack
    {"k": "warning", "ts": 1, "category": "UserWarning", "message": "m", "filename": "f.py", "lineno": 3, "count": 2},
    {"k": "exception", "ts": 2, "type": "RuntimeError", "module": "builtins", "message": "boom",
     "frames": [{"file": "a.py", "line": 1, "func": "f", "code": "x", "user": True}]},
    {"k": "probe_error", "ts": 1, "instrument": "ops", "message": "x"},
    {"k": "bye", "ts": 3, "dropped": 3, "reason": "r"},
]
WEIRD = ["NaN", "12M", "", "<b>", "inf", 1e308, -1e308, 1e-320, 2**63 - 1, -(2**63), 10**18, -1, 0, None, True,
         [], {}, [1e308], [None], [[1]], {"a": "b"}]
"""Wrong types and huge values, as a hand-edited or damaged recording may hold (markup-like
text such as ``[/x]`` is the TUI escaping tests' business)."""


def _strict_json(text: str) -> Any:
    def refuse(name: str) -> None:
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


@st.composite
def damaged_recordings(draw: st.DrawFn) -> list[dict]:
    """A real recording (plus the kinds it lacks) with a few values replaced by weird ones:
    a top-level field, an item of a list field, or a key of a dict (or of a list's dict)."""
    records = [dict(r) for r in draw(st.sampled_from(BASES))] + [dict(e) for e in EXTRA]
    for _ in range(draw(st.integers(1, 4))):
        record = records[draw(st.integers(0, len(records) - 1))]
        key = draw(st.sampled_from(sorted(k for k in record if k != "k")))
        value, weird = record[key], draw(st.sampled_from(WEIRD))
        if isinstance(value, list) and value and draw(st.booleans()):
            value = list(value)
            i = draw(st.integers(0, len(value) - 1))
            if isinstance(value[i], dict) and value[i]:
                value[i] = {**value[i], draw(st.sampled_from(sorted(value[i]))): weird}
            else:
                value[i] = weird
        elif isinstance(value, dict) and value and draw(st.booleans()):
            value = {**value, draw(st.sampled_from(sorted(value))): weird}
        else:
            value = weird
        record[key] = value
    return records


def _tui_data(session: Session, results: Any) -> None:
    """What the TUI's panels prepare from a session, rendered to text."""
    import io

    from rich.console import Console
    from rich.markdown import Markdown

    from mpsprofiler.tui.state import RunState
    from mpsprofiler.tui.widgets import (
        environment,
        findings,
        findings_list,
        header,
        memory,
        ops,
        overview,
        plots,
        warnings,
    )

    state = RunState(session, live=False, findings=list(results.findings), rule_errors=list(results.rule_errors))
    items = [environment.run_table(state), environment.env_table(session.env), environment.doctor_table(session.env),
             environment.rules_text(state), memory.memory_table(state), memory.limits_table(state),
             overview.figures_table(state), overview.figures_table(state, 40), warnings.warnings_table(session), warnings.probe_text(session),
             ops.summary_text(session.ops.to_dict(), state), header.script_line(session.run, session.script),
             header.device_line(session), state.status_text()]
    items += [str(line) for line in ops.op_lines(session.ops.to_dict())]
    if session.crash is not None:
        items.append(warnings.crash_text(session.crash))
    for finding in results.findings:
        items += [Markdown(findings.finding_markdown(finding)), findings_list.finding_prompt(finding)]
    header.findings_line(state)
    for series in (plots.step_series, plots.memory_series, plots.system_series, plots.cpu_series, plots.wait_series,
                   plots.time_range, plots.rank_step_split):
        series(session)
    console = Console(file=io.StringIO(), width=120)
    for item in items:
        console.print(item)


def check_every_view(records: list[dict]) -> None:
    from mpsprofiler.report import render_report
    from mpsprofiler.report.console import render_console
    from mpsprofiler.results import build_results

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        try:
            loaded = load_run(Path(tmp))
        except (RecordingError, events.SchemaError) as exc:
            assert str(exc)
            return
        results = build_results(loaded.session)
        json.dumps(json.loads(json.dumps(events.json_safe(results.document()), default=str, allow_nan=False)))
        render_console(results.summary, results.findings, tmp)
        for fmt in ("md", "html", "json", "trace"):
            text = render_report(fmt, loaded.session, results)
            if fmt in ("json", "trace"):
                _strict_json(text)  # valid JSON: no NaN, no Infinity
        _tui_data(loaded.session, results)


DAMAGED_EXAMPLES = [  # the shapes of the crashes the fuzzing found
    [{**r, "duration": "NaN"} if r["k"] == "exit" else r for r in BASES[0]],
    [{**r, "parameters": "12M", "dtypes": 3} if r["k"] == "model" else r for r in BASES[0]],
    [{**r, "dur": [1e308] * len(r["dur"])} if r["k"] == "steps" else r for r in BASES[0]],
    [{**r, "rss": 1e308, "cpu_pct": [1]} if r["k"] == "mem" else r for r in BASES[1]],
    [{**r, "argv": 1.5, "cwd": {}} if r["k"] == "run" else r for r in BASES[0]],
    [{**r, "chip": 7, "pytorch_env": "x"} if r["k"] == "env" else r for r in BASES[0]],
]


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_recordings())
def test_every_view_reads_damaged_recordings(records: list[dict]) -> None:
    check_every_view(records)


@pytest.mark.parametrize("number", range(len(DAMAGED_EXAMPLES)))
def test_every_view_reads_known_damage(number: int) -> None:
    check_every_view(DAMAGED_EXAMPLES[number])


@pytest.mark.slow
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_recordings())
def test_every_view_reads_damaged_recordings_long(records: list[dict]) -> None:
    check_every_view(records)


def test_report_command_on_damaged_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``mpsprof report`` in every format on a recording with a duration "NaN", parameters
    "12M" and step times of 1e308: no traceback, the odd values shown raw, valid JSON."""
    from mpsprofiler.cli import main

    damage = {"exit": {"duration": "NaN"}, "model": {"parameters": "12M"}}
    records = [{**r, **damage.get(r["k"], {})} for r in BASES[0]]
    records = [{**r, "dur": [1e308] * len(r["dur"])} if r["k"] == "steps" else r for r in records]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = {}
    for fmt in ("md", "html", "json", "trace"):
        assert main(["report", str(tmp_path), "--format", fmt]) == 0
        out[fmt] = capsys.readouterr().out
    assert "| Model parameters | 12M |" in out["md"] and "| Duration | NaN |" in out["md"]
    assert _strict_json(out["json"])["device"]["parameters"] == "12M"
    assert _strict_json(out["trace"])["traceEvents"]
