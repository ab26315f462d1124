"""Reports (md, html, json, trace) from real runs, and ``--fail-on`` CI gating.

One real run of a small hostile script (it prints, warns and crashes with markup, and its
argv and environment carry markup too) feeds most tests; reports are rendered in process
from its recording, and a few go through the CLI to check the wiring.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import textwrap
from html.parser import HTMLParser
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import pytest

from helpers import child_env, loud_rules, mpsprof_cli, read_summary
from mpsprofiler import __version__, cli
from mpsprofiler.diagnosis.findings import Finding
from mpsprofiler.report import format_for_path, ops_tables, render_report
from mpsprofiler.report.common import warmup_words
from mpsprofiler.report.json_report import load_schema
from mpsprofiler.results import Results, build_results
from mpsprofiler.session.recording import load_run
from mpsprofiler.session.session import Session
from mpsprofiler.session.summary import summarize
from mpsprofiler.units import fmt_seconds

ROOT = Path(__file__).resolve().parents[2]
SCRIPT_TAG = "<script>alert(1)</script>"
ATTR_BREAK = '"--><img src=x onerror=alert(1)>'
PIPES = "a|b `tick` ``two``"
UNICODE = "ünïcødé 日本語 🚀"
HOSTILE = [SCRIPT_TAG, ATTR_BREAK, PIPES, UNICODE]

HOSTILE_SCRIPT = """
import warnings
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

HOSTILE = {hostile!r}
for text in HOSTILE:
    print(text)
warnings.warn(" ".join(HOSTILE))
torch.manual_seed(0)
loader = DataLoader(TensorDataset(torch.randn(96, 8), torch.randn(96, 1)), batch_size=8)
model = nn.Linear(8, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, y in loader:
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
raise RuntimeError("boom " + " ".join(HOSTILE) + " ``` fence")
"""

# Rules that fire on any run (device_kind is always a fact), with markup in every field.
HOSTILE_RULES = """
rules:
  - id: test-always-info
    title: "Info finding <b>bold</b>"
    severity: info
    when: "device_kind != ''"
    evidence: "informational | evidence"
    fix: "Nothing to do."
  - id: test-always-critical
    title: "Critical finding <script>alert(1)</script> | pipe"
    severity: critical
    when: "device_kind != ''"
    evidence: "Evidence <i>markup</i> | pipe `tick`"
    fix: |
      Do this instead <script>alert(1)</script>:
      ```python
      loader = DataLoader(ds, num_workers=2)  # <img src=x onerror=alert(1)>
      ```
      ![pixel](https://example.com/pixel.png) [bad](javascript:alert(1)) [docs](https://pytorch.org/docs)
    references: ["https://pytorch.org/docs/stable/data.html", "javascript:alert(1)"]
"""

CLEAN_SCRIPT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(256, 64), torch.randn(256, 1)
for _ in range(25):
    opt.zero_grad()
    nn.functional.mse_loss(model(x), y).backward()
    opt.step()
print("clean done")
"""

WARNING_RULE = """
rules:
  - id: test-always-warning
    title: "A warning for CI"
    severity: warning
    when: "device_kind != ''"
    evidence: "always"
    fix: "Nothing."
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """One real run of the hostile script, with ``--report FILE.html`` and ``--fail-on``."""
    base = tmp_path_factory.mktemp("hostile")
    script = base / "hostile.py"
    script.write_text(HOSTILE_SCRIPT.format(hostile=HOSTILE), encoding="utf-8")
    rules = base / "rules"
    rules.mkdir()
    (rules / "hostile.yaml").write_text(HOSTILE_RULES, encoding="utf-8")
    run_dir, report = base / "run", base / "live-report.html"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--rules", str(rules), "--report", str(report),
                       "--fail-on", "warning", script.name, *HOSTILE, env=child_env(PYTORCH_MPSPROF_TEST=SCRIPT_TAG),
                       cwd=base)
    loaded = load_run(run_dir)
    results = build_results(loaded.session, [rules])
    return SimpleNamespace(base=base, run_dir=run_dir, rules=rules, report=report, proc=proc,
                           session=loaded.session, results=results,
                           summary=read_summary(run_dir))


@pytest.fixture(scope="module")
def rendered(hostile: SimpleNamespace) -> dict[str, str]:
    return {fmt: render_report(fmt, hostile.session, hostile.results) for fmt in ("md", "html", "json", "trace")}


# -- the run itself --------------------------------------------------------------------
def test_crashed_script_keeps_its_own_status_despite_fail_on(hostile: SimpleNamespace) -> None:
    assert hostile.proc.returncode == 1, hostile.proc.stderr
    assert "RuntimeError: boom" in hostile.proc.stderr
    assert hostile.session.crash is not None and hostile.session.steps.count == 12
    rules = [f.rule for f in hostile.results.findings]
    assert "test-always-critical" in rules and "test-always-info" in rules


def test_the_crash_is_one_finding_in_every_view(hostile: SimpleNamespace, rendered: dict) -> None:
    """The headless summary and the TUI listed the crash no rule explains as a critical
    finding; summary.json and the reports had none ("0 findings · No rule found a problem
    in this run" in the Markdown of a crashed run). It is the diagnosis's finding now."""
    (crash,) = [f for f in hostile.summary["findings"] if f["rule"] == "crash"]
    assert crash["severity"] == "critical" and crash["title"].startswith("Crashed after 12 steps (0 to 11): RuntimeError: boom")
    assert f"[CRIT] {crash['title']}  (crash)" in hostile.proc.stderr
    assert "rule `crash`" in rendered["md"] and "No rule found a problem" not in rendered["md"]
    assert [f["rule"] for f in json.loads(rendered["json"])["findings"]].count("crash") == 1


def test_run_report_flag_writes_one_self_contained_html(hostile: SimpleNamespace) -> None:
    assert f"wrote {hostile.report}" in hostile.proc.stderr
    text = hostile.report.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")
    _assert_safe_html(text)
    assert "Critical finding &lt;script&gt;alert(1)&lt;/script&gt;" in text


# -- Markdown --------------------------------------------------------------------------
def test_markdown_has_summary_figures_environment_and_findings(hostile: SimpleNamespace, rendered: dict) -> None:
    md = rendered["md"]
    steps = hostile.results.summary["steps"]
    assert md.startswith("# mpsprof: hostile.py crashed")
    assert f"| Steps | {steps['count']} ({warmup_words(steps)}, {steps['steady']} steady)" in md
    assert f"| Median step time | {fmt_seconds(steps['median_s'])} |" in md
    assert f"| p90 step time | {fmt_seconds(steps['p90_s'])} |" in md
    assert f"| Python | {hostile.session.env['python']} |" in md
    assert "`PYTORCH_MPSPROF_TEST=<script>alert(1)</script>`" in md
    # most severe first; titles escaped; the fix's Markdown and code block kept as written
    assert md.index("Critical finding") < md.index("Info finding")
    assert r"### 🔴 Critical: Critical finding \<script\>alert(1)\</script\> | pipe" in md
    assert "**Evidence:** Evidence \\<i\\>markup\\</i\\> | pipe `tick`" in md  # tags outside code escaped
    assert "```python\nloader = DataLoader(ds, num_workers=2)  # <img src=x onerror=alert(1)>\n```" in md
    assert "<https://pytorch.org/docs/stable/data.html>" in md
    # DataLoader config, crash with a fence longer than the message's backtick run
    assert "| 1 | TensorDataset | 8 | 0 |" in md
    assert "**RuntimeError**" in md and "````text\nboom <script>alert(1)</script>" in md
    assert md.rstrip().endswith(f"mpsprof {__version__}: `mpsprof report RUN_DIR --format md`</sub>")


def test_op_tables_follow_op_accounting(hostile: SimpleNamespace, rendered: dict) -> None:
    ops = ops_tables.ops_data(hostile.session)
    md, html = rendered["md"], rendered["html"]
    assert ops
    assert "## Op accounting" in md and "Op accounting (sampled steps)" in html
    top = ops["ops"][0]["op"]
    assert f"| `{top}` |" in md and f"<code>{top}</code>" in html


@pytest.mark.parametrize("fmt", ["md", "html", "json", "trace"])
def test_an_empty_session_still_renders(fmt: str) -> None:
    """A recording with nothing but its first lines: every section guards its data."""
    session = Session()
    text = render_report(fmt, session, Results(summary=summarize(session)))
    assert text.strip()
    if fmt == "json":
        jsonschema.validate(json.loads(text), load_schema())
    if fmt == "html":
        _assert_safe_html(text)
        assert "No training steps were recorded." in text
    if fmt == "md":
        assert "No rule found a problem" in text and "## Op accounting" not in text


def test_markdown_tables_keep_their_columns(rendered: dict) -> None:
    """A '|' from the script must not add a column: every row has its header's cell count."""
    lines = rendered["md"].splitlines()
    checked = 0
    for i, line in enumerate(lines):
        if line.startswith("|") and i + 1 < len(lines) and re.fullmatch(r"\|(-+:?\|)+", lines[i + 1]):
            width = _cells(line)
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                assert _cells(lines[j]) == width, lines[j]
                checked += 1
                j += 1
    assert checked >= 10
    # the script's own warning (torch may add its own, e.g. "Failed to initialize NumPy")
    warning_row = next(line for line in lines if line.startswith("| UserWarning") and "alert(1)" in line)
    assert r"\<script\>alert(1)\</script\>" in warning_row and r"a\|b \`tick\`" in warning_row


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row)) - 1


# -- HTML ------------------------------------------------------------------------------
class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.styles: list[str] = []
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_style = tag == "style"

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.styles.append(data)


def _assert_safe_html(text: str) -> _Tags:
    assert SCRIPT_TAG not in text and "<script" not in text.lower()
    assert "<img" not in text.lower()
    parser = _Tags()
    parser.feed(text)
    forbidden = {"script", "img", "iframe", "link", "object", "embed", "base", "form", "audio", "video", "source",
                 "frame", "image", "use", "foreignobject"}
    for tag, attrs in parser.tags:
        assert tag not in forbidden, (tag, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name)
            assert name not in ("src", "srcset", "xlink:href", "background", "poster", "action"), (tag, name)
            if name == "href":
                assert tag == "a" and re.match(r"https?://", value or ""), (tag, value)
            if name == "style":
                assert "url(" not in (value or ""), (tag, value)
    css = "".join(parser.styles)
    assert "url(" not in css and "@import" not in css
    csp = next(a["content"] for t, a in parser.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "script-src 'none'" in csp
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode()
    assert f"'sha256-{digest}'" in csp, "the stylesheet's hash must match, or browsers drop the styles"
    return parser


def test_html_escapes_every_hostile_string(rendered: dict) -> None:
    html = rendered["html"]
    parser = _assert_safe_html(html)
    escaped_tag = "&lt;script&gt;alert(1)&lt;/script&gt;"
    escaped_attr = "&quot;--&gt;&lt;img src=x onerror=alert(1)&gt;"
    assert html.count(escaped_tag) >= 5  # argv, env var, warning, crash, rule title, fix
    assert escaped_attr in html
    assert f"PYTORCH_MPSPROF_TEST={escaped_tag}" in html
    assert UNICODE in html
    assert "a|b `tick` ``two``" in html
    # the fix: Markdown rendered, raw HTML shown as text, images and javascript: links dropped
    assert '<pre><code class="language-python">loader = DataLoader(ds, num_workers=2)  # &lt;img src=x' in html
    assert "Do this instead &lt;script&gt;alert(1)&lt;/script&gt;:" in html
    assert "<p>Evidence &lt;i&gt;markup&lt;/i&gt; | pipe <code>tick</code></p>" in html
    hrefs = [a["href"] for t, a in parser.tags if t == "a"]
    assert hrefs and all(h.startswith("https://") for h in hrefs)
    assert "https://pytorch.org/docs/stable/data.html" in hrefs


def test_html_is_single_file_with_charts_and_sections(hostile: SimpleNamespace, rendered: dict) -> None:
    html = rendered["html"]
    assert html.count("<svg") >= 2 and "<title>Step time and data wait per step</title>" in html
    assert html.count("<style>") == 1 and "prefers-color-scheme: dark" in html and "@media print" in html
    steps = hostile.results.summary["steps"]
    assert f"{steps['count']} of {steps['count']} steps shown" in html
    assert "RuntimeError" in html and 'id="crash"' in html and "TensorDataset" in html
    assert html.index("Critical finding") < html.index("Info finding")


# -- JSON ------------------------------------------------------------------------------
def test_json_validates_against_schema_and_round_trips(hostile: SimpleNamespace, rendered: dict) -> None:
    doc = json.loads(rendered["json"])
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(doc, schema)
    jsonschema.validate(hostile.summary, schema)  # summary.json is the same document
    assert doc["schema"] == hostile.summary["schema"] and doc["mpsprof"] == __version__
    assert set(hostile.summary) <= set(doc)
    assert json.loads(json.dumps(doc)) == doc
    assert [Finding.from_dict(f).to_dict() for f in doc["findings"]] == doc["findings"]
    assert doc["steps"]["count"] == hostile.session.steps.count == 12
    assert doc["crash"]["message"].startswith("boom " + SCRIPT_TAG)
    assert doc["argv"][1:] == HOSTILE


def test_schema_rejects_wrong_documents(rendered: dict) -> None:
    doc = json.loads(rendered["json"])
    for key, value in [("status", "exploded"), ("steps", {"count": -1}), ("findings", [{"rule": "x"}])]:
        broken = dict(doc, **{key: value})
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, load_schema())
    bad_severity = dict(doc, findings=[dict(doc["findings"][0], severity="fatal")])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad_severity, load_schema())


# -- trace -----------------------------------------------------------------------------
def test_trace_is_valid_trace_event_json(hostile: SimpleNamespace, rendered: dict) -> None:
    doc = json.loads(rendered["trace"])
    assert doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    for ev in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(ev), ev
        assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
    steps = [ev for ev in events if ev["ph"] == "X" and ev.get("cat") == "step"]
    points = hostile.session.steps.series.points()
    assert [ev["args"]["step"] for ev in steps] == [p.i for p in points]
    for ev, p in zip(steps, points, strict=True):
        assert ev["ts"] + ev["dur"] == pytest.approx(p.end * 1e6, abs=1.0)
    by_step = {ev["args"]["step"]: ev for ev in steps}
    waits = [ev for ev in events if ev["ph"] == "X" and ev["name"] == "data wait"]
    assert waits
    for w in waits:
        step = by_step[w["args"]["step"]]
        assert w["ts"] == step["ts"] and w["dur"] <= step["dur"] and w["tid"] == step["tid"]
    counters = [ev for ev in events if ev["ph"] == "C"]
    assert any("rss" in ev["args"] for ev in counters)
    instants = {ev["cat"]: ev for ev in events if ev["ph"] == "i"}
    assert instants["crash"]["args"]["message"].startswith("boom " + SCRIPT_TAG)
    assert SCRIPT_TAG in instants["warning"]["args"]["message"]
    names = {ev["name"] for ev in events if ev["ph"] == "M"}
    assert {"process_name", "thread_name"} <= names


# -- the report command ------------------------------------------------------------------
def test_report_command_prints_markdown_to_stdout(hostile: SimpleNamespace, rendered: dict) -> None:
    proc = mpsprof_cli("report", str(hostile.run_dir), "--rules", str(hostile.rules), "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == rendered["md"]


@pytest.mark.parametrize("fmt", ["html", "json", "trace"])
def test_report_command_writes_file(hostile: SimpleNamespace, rendered: dict, tmp_path: Path, fmt: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / f"report.{fmt}"
    assert cli.main(["report", str(hostile.run_dir), "--rules", str(hostile.rules), "-f", fmt, "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == rendered[fmt]


def test_truncated_and_damaged_recording_still_reports(hostile: SimpleNamespace, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(hostile.run_dir, damaged)
    lines = (damaged / "events.jsonl").read_bytes().splitlines(keepends=True)
    cut = len(lines) * 2 // 3
    body = lines[:4] + [b"{not json at all\n"] + lines[4:cut] + [lines[cut][: len(lines[cut]) // 2]]
    (damaged / "events.jsonl").write_bytes(b"".join(body))
    out = tmp_path / "damaged.html"
    assert cli.main(["report", str(damaged), "--format", "html", "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "skipped 1 unreadable line(s)" in err and "cut off" in err and "showing what is valid" in err
    html = out.read_text(encoding="utf-8")
    _assert_safe_html(html)
    assert "The recording ends before the script exited" in html
    assert cli.main(["report", str(damaged), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# mpsprof: hostile.py ended without an exit record") and "## Summary" in md


@pytest.mark.parametrize(("name", "fmt"), [
    ("r.md", "md"), ("R.MD", "md"), ("r.html", "html"), ("r.htm", "html"), ("r.json", "json"),
    ("run.trace.json", "trace"), ("dir.v2/r.trace.json", "trace"),
])
def test_format_for_path(name: str, fmt: str) -> None:
    assert format_for_path(Path(name)) == fmt


@pytest.mark.parametrize("name", ["report.txt", "report", "trace.json.gz", ".md"])
def test_format_for_path_refuses_unknown_suffixes(name: str) -> None:
    with pytest.raises(ValueError, match=r"\.md \(or \.markdown\), \.html \(or \.htm\).*\.trace\.json"):
        format_for_path(Path(name))


# -- CI gating ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def clean_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("clean")
    script = base / "clean.py"
    script.write_text(textwrap.dedent(CLEAN_SCRIPT), encoding="utf-8")
    (base / "rules").mkdir()
    (base / "rules" / "warning.yaml").write_text(WARNING_RULE, encoding="utf-8")
    return script


def _findings(run_dir: Path) -> list[dict]:
    return read_summary(run_dir)["findings"]


@pytest.mark.slow
@pytest.mark.serial
def test_fail_on_warning_passes_a_clean_run(clean_script: Path, tmp_path: Path) -> None:
    proc = mpsprof_cli("run", "--headless", "--fail-on", "warning", "-o", str(tmp_path / "run"), str(clean_script))
    assert "clean done" in proc.stdout
    assert proc.returncode == 0, (proc.stderr, _findings(tmp_path / "run"))


@pytest.mark.slow
@pytest.mark.serial
def test_fail_on_uses_the_findings_severity(clean_script: Path, tmp_path: Path) -> None:
    """A custom rule's warning fails ``--fail-on warning`` (status 3) but not ``--fail-on critical``."""
    rules = str(clean_script.parent / "rules")
    strict = mpsprof_cli("run", "--headless", "--fail-on", "warning", "--rules", rules, "-o", str(tmp_path / "a"),
                         str(clean_script))
    assert strict.returncode == cli.EXIT_FINDINGS, strict.stderr
    assert "reached 'warning'" in strict.stderr
    lenient = mpsprof_cli("run", "--headless", "--fail-on", "critical", "--rules", rules, "-o", str(tmp_path / "b"),
                          str(clean_script))
    assert lenient.returncode == 0, lenient.stderr
    # info findings do not count for --fail-on; on a busy machine other-programs-busy is one
    assert [f["severity"] for f in _findings(tmp_path / "b") if f["severity"] != "info"] == ["warning"]


@pytest.mark.slow
@pytest.mark.serial
def test_fail_on_warning_fails_a_data_loader_stall(tmp_path: Path) -> None:
    """The bundled slow-DataLoader example must trip CI with the builtin rules alone."""
    proc = mpsprof_cli("run", "--headless", "--fail-on", "warning", "-o", str(tmp_path / "run"),
                       str(ROOT / "examples" / "slow_dataloader.py"), "--steps", "30")
    summary = read_summary(tmp_path / "run")
    assert any("dataloader" in rule for rule in loud_rules(summary)), summary["findings"]
    assert proc.returncode == cli.EXIT_FINDINGS, proc.stderr


def test_every_report_format_comes_from_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    """report/__init__.REGISTRY is the one list: renderer, suffix, CLI choices and help."""
    from mpsprofiler.report import REGISTRY, get_renderer

    for entry in REGISTRY:
        renderer = get_renderer(entry.name)
        assert renderer.name == entry.name and renderer.extension == entry.suffixes[0]
        assert format_for_path(Path("r" + entry.suffixes[0])) == entry.name
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{" + ",".join(e.name for e in REGISTRY) + "}" in text
    assert all(e.description in text for e in REGISTRY)
