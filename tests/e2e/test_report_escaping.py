"""The Markdown report shows ``<module>`` and other angle brackets in a finding's evidence
and fix as text: a Markdown viewer reads ``<word>`` as an HTML tag and drops it. Code
spans and fenced blocks stay exactly as the rule wrote them.

Checked by rendering with markdown-it (CommonMark, raw HTML on: what GitHub and most
viewers do before sanitising) and looking at what a reader would see.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from helpers import mpsprof_cli
from mpsprofiler.report.markdown import escape_tags


def to_html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).render(markdown)


def test_tags_in_prose_become_text() -> None:
    text = "Raised at crash.py:13 in <module>: see <b>this</b>."
    html = to_html(escape_tags(text))
    assert "in &lt;module&gt;" in html and "&lt;b&gt;this&lt;/b&gt;" in html
    assert "<module>" not in html and "<b>" not in html


def test_code_spans_and_fences_are_kept_as_written() -> None:
    text = (
        "Check `if a<b:` and ``x ` <y> `` at <here>.\n\n"
        "```python\nfor x in xs:  # <not a tag>\n    pass\n```\n\n"
        "~~~~\n<raw> ~~~\n~~~~\n"
        "after <z>"
    )
    out = escape_tags(text)
    assert "`if a<b:`" in out and "``x ` <y> ``" in out
    assert "```python\nfor x in xs:  # <not a tag>\n    pass\n```" in out
    assert "~~~~\n<raw> ~~~\n~~~~" in out
    assert out.endswith("after \\<z\\>") and "at \\<here\\>." in out
    html = to_html(out)
    assert "<code>if a&lt;b:</code>" in html and "# &lt;not a tag&gt;" in html and "&lt;z&gt;" in html


def test_links_quotes_and_escaped_brackets_survive() -> None:
    text = "> note: <https://pytorch.org/docs> and <b>\n> > a `c->d` -> e\nalready \\<escaped\\>\nunclosed ` <u>"
    out = escape_tags(text)
    assert out == ("> note: <https://pytorch.org/docs> and \\<b\\>\n> > a `c->d` -\\> e\n"
                   "already \\<escaped\\>\nunclosed ` \\<u\\>")
    html = to_html(out)
    assert html.startswith("<blockquote>") and "<blockquote>\n<p>a <code>c-&gt;d</code> -&gt; e" in html
    assert '<a href="https://pytorch.org/docs">' in html and "&lt;escaped&gt;" in html


PIECES = ["<module>", "<b>", "</i>", "<", "x", " ", "\n", "    ", "`", "``", "`a<b>`", "```", "~~~", "> ", "- ",
          "1. ", "# ", "|", "<https://a.b>"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30))
def test_no_tag_outside_code_reaches_the_html(pieces: list[str]) -> None:
    """Whatever the mix, the rendered HTML holds no tag of ours outside code elements."""
    html = to_html(escape_tags("".join(pieces)))
    outside_code = html
    for tag in ("pre", "code"):
        while f"<{tag}>" in outside_code or f"<{tag} " in outside_code:
            start = outside_code.find(f"<{tag}")
            end = outside_code.find(f"</{tag}>", start)
            if end < 0:
                break
            outside_code = outside_code[:start] + outside_code[end + len(tag) + 3 :]
    for tag in ("<module>", "<b>", "</i>"):
        assert tag not in outside_code


@pytest.mark.slow
def test_crash_at_module_level_reads_in_module_in_the_report(tmp_path: Path) -> None:
    """End to end: a real crash in a script's top level, through ``mpsprof run`` and
    ``mpsprof report --format md``: the finding's evidence shows ``in <module>``."""
    script = tmp_path / "crash.py"
    script.write_text(
        "import torch\nfrom torch import nn\n\n"
        "model = nn.Linear(4, 2, device='meta')  # never materialised\n"
        "x = torch.randn(3, 4)\n"
        "loss = model(x).sum()\n",
        encoding="utf-8",
    )
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), cwd=tmp_path, timeout=180, stdin=None)
    assert proc.returncode != 0 and (run_dir / "events.jsonl").exists(), proc.stderr[-2000:]
    report = mpsprof_cli("report", str(run_dir), "--format", "md", cwd=tmp_path, timeout=120, stdin=None)
    assert report.returncode == 0, report.stderr[-2000:]
    md = report.stdout
    evidence = [line for line in md.splitlines() if line.startswith("**Evidence:**") and "crash.py:6" in line]
    if not evidence:
        pytest.fail("no finding quotes the crash line:\n" + md[:3000])
    assert "in \\<module\\>" in evidence[0]
    assert "`loss = model(x).sum()`" in evidence[0]  # the quoted code span is untouched
    assert "in &lt;module&gt;" in to_html(evidence[0])
