"""Fuzzing the readers of untrusted input: the recording (``events.decode_lines``,
``Session.feed_many``, ``load_run``) and the rule loader. Bounded and derandomized so
the suite stays fast and a failure reproduces."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

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
