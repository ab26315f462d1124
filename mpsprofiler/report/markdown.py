"""GitHub-flavoured Markdown report: made to be pasted into an issue as is.

Every string that came from the script or its environment is escaped (a ``|`` in a
table cell, backticks, ``<tag>``), or fenced with a fence longer than any backtick run
inside it, so nothing the script printed can break the layout or inject markup. A
finding's evidence and fix are Markdown written by a rule (tables, code blocks) and keep
their Markdown, but ``<`` and ``>`` outside code spans and fenced blocks are escaped: a
fact quoted from the script (``train.py:13 in <module>``) is text, and a viewer that
reads it as an HTML tag would drop it. Its title is treated the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..diagnosis.findings import FindingDoc
from ..mdtext import code as code  # the views import them from here too
from ..mdtext import escape as escape
from ..mdtext import fenced as fenced
from ..results import Results, Summary
from ..session.session import Session
from . import common, ops_tables
from .changes import change_lines, cut_text, experiment_lines
from .paths import display_paths

SEVERITY_LABEL = {"critical": "🔴 Critical", "warning": "🟠 Warning", "info": "🔵 Info"}
def cell(text: Any) -> str:
    """Table cell text: escaped, with no line break (a newline would end the table)."""
    return escape(text) or " "


def inline(text: Any) -> str:
    """One line of rule-authored Markdown (a title): code spans kept, tags outside them
    escaped so a fact quoted from the script cannot become HTML."""
    flat = " ".join(str(text).split())
    pieces = re.split(r"(`+[^`]*?`+)", flat)
    return "".join(p if p.startswith("`") else p.replace("<", "\\<").replace(">", "\\>") for p in pieces)


_AUTOLINK = re.compile(r"<(?:https?|mailto):[^\s<>`]*>")
_PROBE_BASE = 0xF0000
"""Supplementary private-use code points: one per bracket while the parser looks."""
_CODE_TOKENS = frozenset({"code_inline", "fence", "code_block"})


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def escape_tags(text: str) -> str:
    """Rule-authored Markdown with ``<`` / ``>`` escaped everywhere but in code: code
    spans, fenced and indented blocks stay as written, as do autolinks
    (``<https://...>``) and blockquote marks.

    Where code is, the Markdown parser decides: each bracket is swapped for a private-use
    character (inert in Markdown, so the parse is that of the escaped text), the text is
    parsed, and the brackets that landed in a code token are the ones left alone.
    """
    keep = {i for m in _AUTOLINK.finditer(text) for i in (m.start(), m.end() - 1)}
    marks = [i for i, ch in enumerate(text)
             if i not in keep and _escapable(text, i, ch)]
    if not marks:
        return text
    if len(marks) > 0xFFFD or any(ord(ch) >= _PROBE_BASE for ch in text):
        in_code: set[int] = set()  # cannot probe: escape every bracket (never a lost tag)
    else:
        probe = list(text)
        for n, i in enumerate(marks):
            probe[i] = chr(_PROBE_BASE + n)
        in_code = _coded(_parser().parse("".join(probe)))
    out = list(text)
    for n, i in enumerate(marks):
        if n not in in_code:
            out[i] = "\\" + text[i]
    return "".join(out)


def _escapable(text: str, i: int, ch: str) -> bool:
    """``<`` anywhere, ``>`` after a word (``>`` at a line's start may open a quote);
    a bracket already escaped with a backslash stays as it is."""
    j = i
    while j > 0 and text[j - 1] == "\\":
        j -= 1
    if (i - j) % 2:
        return False
    if ch == "<":
        return True
    return ch == ">" and i > 0 and not text[i - 1].isspace() and text[i - 1] != ">"


def _coded(tokens: list[Any]) -> set[int]:
    """Indices of the probe characters inside code tokens."""
    found: set[int] = set()
    stack = list(tokens)
    while stack:
        token = stack.pop()
        if token.children:
            stack.extend(token.children)
        if token.type in _CODE_TOKENS:
            found.update(ord(ch) - _PROBE_BASE for ch in token.content if ord(ch) >= _PROBE_BASE)
    return found


def code_cell(text: Any) -> str:
    """A code span inside a table cell: GFM splits cells on '|' even inside code, and
    reads '\\|' back as '|'."""
    flat = " ".join(str(text).split())
    if flat in ("", "–"):
        return cell(flat)
    return code(flat).replace("|", "\\|")


def table(columns: list[str], rows: list[list[str]], numeric: set[int] | None = None,
          code_cols: set[int] | None = None) -> list[str]:
    numeric, code_cols = numeric or set(), code_cols or set()
    align = ["---:" if i in numeric else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(code_cell(v) if i in code_cols else cell(v) for i, v in enumerate(row)) + " |"
              for row in rows]
    return lines


def _table_block(t: common.Table) -> list[str]:
    """A :class:`common.Table` as Markdown lines, its note (if any) in italics below."""
    return table(t.columns, t.rows, t.numeric, t.code) + (["", f"_{escape(t.note)}_"] if t.note else [])


class MarkdownRenderer:
    name = "md"
    extension = ".md"

    def render(self, session: Session, results: Results) -> str:
        summary = results.summary
        findings = common.finding_dicts(results)
        out: list[str] = []
        title = f"# mpsprof: {escape(display_paths(session.script))} {escape(common.status_text(summary, session))}"
        out += [title, ""]
        headline = f"**{len(findings)} finding{'s' if len(findings) != 1 else ''}**"
        if findings:
            headline += f" ({common.counts_text(findings)})"
        meta = [headline, f"device **{escape(common.device_text(summary))}**"]
        if common.started_text(session):
            meta.append(f"recorded {escape(common.started_text(session))}")
        out += [" · ".join(meta), "", fenced(common.command_line(session), "sh"), ""]

        out += ["## Environment", ""]
        out += _kv(common.environment_rows(session), "Item")
        variables = common.env_vars(session)
        out += ["", "Environment variables: " + (", ".join(code(f"{k}={v}") for k, v in variables)
                                                 if variables else "no `PYTORCH_*` or thread variables set"), ""]

        out += ["## Summary", ""] + _kv(common.summary_rows(summary, session), "Figure") + [""]
        out += _changes(summary)

        out += [f"## Findings ({len(findings)})", ""]
        if not findings:
            out += ["No rule found a problem in this run.", ""]
        for f in findings:
            out += self._finding(f)
            out += [f"**Tried:** {escape(line)}" for line in experiment_lines(results, str(f.get("rule")))]
            out += [""] if experiment_lines(results, str(f.get("rule"))) else []
        tried = experiment_lines(results)
        if tried:
            out += ["## Tried fixes (`mpsprof try`)", ""] + [f"- {escape(line)}" for line in tried] + [""]

        ranks = common.ranks_table(session)
        if ranks is not None:
            out += [f"## Ranks ({len(session.ranks)})", ""] + _table_block(ranks) + [""]

        dl = common.dataloader_table(session)
        if dl is not None:
            out += ["## DataLoader", ""] + _table_block(dl) + [""]
            heading, profile = common.loader_section(session)
            if profile:
                out += _kv(profile, heading) + [""]

        if session.crash is not None:
            out += self._crash(session)

        warn = common.warnings_table(session)
        if warn is not None:
            out += [f"## Warnings ({len(session.warnings)})", ""] + _table_block(warn) + [""]

        data = ops_tables.ops_data(session)
        ops = ops_tables.ops_tables(session, data)
        if ops:
            out += ["## Op accounting (sampled steps)", "", escape(ops_tables.ops_headline(session, data)), ""]
            for t in ops:
                out += [f"**{escape(t.title)}**", ""] + _table_block(t) + [""]

        notes = self._notes(session, summary, results)
        if notes:
            out += ["## Notes", ""] + notes + [""]
        out += ["---", f"<sub>Report by {escape(common.footer_text())}: `mpsprof report RUN_DIR --format md`</sub>", ""]
        # paths relative to the working directory, home as ~ (prose values were shown so before escaping)
        return display_paths("\n".join(out))

    def _finding(self, f: FindingDoc) -> list[str]:
        sev = str(f.get("severity", "info"))
        label = SEVERITY_LABEL.get(sev, escape(sev))
        out = [f"### {label}: {inline(f.get('title', ''))}", ""]
        meta = [f"rule {code(f.get('rule', ''))}"]
        if f.get("first_step") is not None:
            meta.append(f"from step {escape(f['first_step'])}")
        if (f.get("count") or 1) > 1:
            meta.append(f"seen {escape(f['count'])} times")
        out += [" · ".join(meta), ""]
        evidence = escape_tags(str(f.get("evidence") or "").strip())
        if evidence:
            out += [f"**Evidence:** {evidence}", ""]
        fix = escape_tags(str(f.get("fix") or "").strip())
        if fix:
            out += ["**Fix:**", "", fix, ""]
        refs = [r for r in f.get("references") or [] if str(r).strip()]
        if refs:
            out += ["References: " + ", ".join(_link(str(r)) for r in refs), ""]
        return out

    def _crash(self, session: Session) -> list[str]:
        crash = session.crash
        assert crash is not None
        out = ["## Crash", "", f"**{escape(crash.type)}**" + (f" ({code(crash.module)})" if crash.module
                                                            and crash.module != "builtins" else ""), ""]
        out += [fenced(crash.message or "(no message)", "text"), ""]
        user = common.raised_at(session)
        if user:
            where = f"{user.get('file')}:{user.get('line')}"
            out += [f"Raised in your code at {code(where)} "
                    f"in {code(user.get('func'))}:", ""]
            if user.get("code"):
                out += [fenced(str(user.get("code")), "python"), ""]
        frames = common.crash_frames(session)
        if frames:
            lines = []
            for fr in frames:
                mark = "▶ " if fr.get("user") else "  "
                lines.append(f"{mark}{fr.get('file')}:{fr.get('line')} in {fr.get('func')}")
                if fr.get("code"):
                    lines.append(f"      {fr.get('code')}")
            out += ["<details><summary>Traceback (innermost last, ▶ = your code)</summary>", "",
                    fenced("\n".join(lines), "text"), "", "</details>", ""]
        return out

    def _notes(self, session: Session, summary: Summary, results: Results) -> list[str]:
        notes = [f"- **The recording is incomplete:** {escape(p)}." for p in common.recording_problems(summary)]
        for err in summary.get("probe_errors") or []:
            notes.append(f"- The profiler switched off its {code(err.get('instrument', '?'))} instrument: "
                         f"{escape(err.get('message', ''))}" + (f" (at {code(str(err['where']))})" if err.get("where") else ""))
        for err in getattr(results, "rule_errors", None) or []:
            notes.append(f"- Rule file problem: {escape(err)}")
        if session.exit is None:
            notes.append("- The recording ends before the script exited (still running, or cut off).")
        return notes


def _changes(summary: Summary) -> list[str]:
    """``--set`` changes and a ``--max-steps`` cut: figures of a changed run say so."""
    cut, changes = cut_text(summary), change_lines(summary)
    if not cut and not changes:
        return []
    out = ["## Changed for this run (not in the script)", ""]
    out += [f"- {escape(line)}" for line in ([cut] if cut else []) + changes]
    return out + [""]


def _kv(rows: list[tuple[str, str]], label: str) -> list[str]:
    if not rows:
        return ["(not recorded)"]
    return table([label, "Value"], [[k, v] for k, v in rows])


def _link(url: str) -> str:
    if re.fullmatch(r"https?://[^\s<>]+", url):
        return f"<{url}>"
    return escape(url)
