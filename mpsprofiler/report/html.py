"""One self-contained HTML file: open it anywhere, attach it to an issue, print it.

Nothing is fetched: the stylesheet is inlined (and pinned by hash in the page's
Content-Security-Policy, which also forbids every remote load and all scripts), charts
are inline SVG drawn here from the session's series. Every string from the script or
its environment goes through ``html.escape``; a finding's evidence and fix (Markdown
from a rule file) are rendered by markdown-it with raw HTML and images switched off.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache
from html import escape
from typing import Any

from ..diagnosis.findings import SEVERITY_ORDER, FindingDoc
from ..resources import report_stylesheet
from ..results import MemoryDoc, Results, StepsDoc, Summary
from ..session.session import Session
from ..units import fmt_bytes, fmt_pct, fmt_seconds
from . import charts, common, ops_tables
from .changes import change_lines, cut_text, experiment_lines
from .paths import display_paths
from .svg import e


@lru_cache(maxsize=1)
def stylesheet() -> str:
    return report_stylesheet()


def csp(css: str) -> str:
    """No scripts, no remote anything; only this page's own stylesheet (by hash)."""
    digest = base64.b64encode(hashlib.sha256(css.encode("utf-8")).digest()).decode("ascii")
    return (f"default-src 'none'; style-src 'sha256-{digest}'; img-src data:; font-src 'none'; "
            "connect-src 'none'; script-src 'none'; base-uri 'none'; form-action 'none'")


@lru_cache(maxsize=1)
def _markdown() -> Any:
    try:
        from markdown_it import MarkdownIt
    except ImportError:  # pragma: no cover - markdown-it-py comes with rich/textual
        return None
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("table")  # evidence quotes preformatted fact tables
    md.disable("image")  # an image would be a remote load
    # markdown-it's documented hook for link policy is this attribute
    md.validateLink = lambda url: url.strip().lower().startswith(("https://", "http://", "#"))  # type: ignore[method-assign]

    def link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
        tokens[idx].attrSet("rel", "noopener noreferrer")
        rendered: str = self.renderToken(tokens, idx, options, env)
        return rendered

    md.add_render_rule("link_open", link_open)
    return md


def render_markdown(text: str) -> str:
    """A rule's Markdown (evidence, fix) as safe HTML: raw HTML in it is shown as text."""
    md = _markdown()
    if md is None:
        return f"<pre>{escape(text)}</pre>"
    # a table scrolls sideways in its own box rather than squeezing code to a letter a line
    rendered: str = md.render(text)
    return rendered.replace("<table>", '<div class="tscroll"><table>').replace("</table>", "</table></div>")


def render_inline(text: str) -> str:
    """A finding's title: inline Markdown (code spans) on one line, raw HTML escaped."""
    md = _markdown()
    flat = " ".join(str(text).split())
    return escape(flat) if md is None else md.renderInline(flat)


class HtmlRenderer:
    name = "html"
    extension = ".html"

    def render(self, session: Session, results: Results) -> str:
        css = stylesheet()
        summary = results.summary
        findings = common.finding_dicts(results)
        title = f"mpsprof: {session.script} ({common.status_text(summary, session)})"
        parts = [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{e(csp(css))}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="referrer" content="no-referrer">',
            f'<meta name="generator" content="{e(common.footer_text())}">',
            f"<title>{e(title)}</title>",
            f"<style>{css}</style>",
            "</head><body><main>",
        ]
        parts += self._header(session, summary, findings)
        parts += _changes(summary)
        parts += _tried(results)
        parts += self._findings(findings)
        parts += self._charts(session)
        if session.crash is not None:
            parts += self._crash(session)
        parts += self._details(session, summary)
        parts += self._notes(session, summary, results)
        parts.append(f"<footer>Report by {e(common.footer_text())} · recorded in "
                     f"<code>{e(session.run.get('run_dir') or '?')}</code></footer>")
        parts.append("</main></body></html>")
        return display_paths("\n".join(parts)) + "\n"  # relative to the working directory, home as ~

    # -- sections -------------------------------------------------------------------
    def _header(self, session: Session, summary: Summary, findings: list[FindingDoc]) -> list[str]:
        status = common.badge_class(summary, session)
        out = [f'<header><h1>{e(session.script)} <span class="badge {e(status)}">{e(common.status_text(summary, session))}'
               f"</span></h1>"]
        meta = [f"device <strong>{e(common.device_text(summary))}</strong>",
                f"ran {e(fmt_seconds(summary.get('duration_s')))}"]
        if common.started_text(session):
            meta.append(f"recorded {e(common.started_text(session))}")
        out.append(f'<p class="sub">{" · ".join(meta)}</p>')
        out.append(f'<pre class="cmd"><code>{e(common.command_line(session))}</code></pre></header>')
        steps: StepsDoc | dict[str, Any] = summary.get("steps") or {}
        mem: MemoryDoc | dict[str, Any] = summary.get("memory") or {}
        cards = [
            ("Steps", str(steps.get("count", 0)), common.warmup_words(steps)),
            ("Median step", fmt_seconds(steps.get("median_s")), f"p90 {fmt_seconds(steps.get('p90_s'))}"),
            ("Steps / s", _num(steps.get("steps_per_s")), "steady state"),
            ("Data wait", fmt_pct(steps.get("data_wait_share")), "of steady step time"),
            ("Peak RSS", fmt_bytes(mem.get("peak_rss_with_workers") or mem.get("peak_rss")),
             "incl. workers" if (mem.get("peak_rss_with_workers") or 0) > (mem.get("peak_rss") or 0) else "process"),
        ]
        if mem.get("peak_device_allocated") is not None:
            cards.append(("Peak device", fmt_bytes(mem.get("peak_device_allocated")),
                          f"cache {fmt_bytes(mem.get('peak_device_cached'))}"))
        cards.append(("Findings", str(len(findings)), common.counts_text(findings) or "none"))
        out.append('<section class="cards">' + "".join(
            f'<div class="card"><div class="label">{e(k)}</div><div class="value">{e(v)}</div>'
            f'<div class="note">{e(n)}</div></div>' for k, v, n in cards) + "</section>")
        return out

    def _findings(self, findings: list[FindingDoc]) -> list[str]:
        out = [f'<section id="findings"><h2>Findings ({len(findings)})</h2>']
        if not findings:
            out.append('<p class="none">No rule found a problem in this run.</p>')
        for f in findings:
            sev = str(f.get("severity", "info"))
            sev_css = sev if sev in SEVERITY_ORDER else "info"
            meta = [f"rule <code>{e(f.get('rule', ''))}</code>"]
            if f.get("first_step") is not None:
                meta.append(f"from step {e(f['first_step'])}")
            if (f.get("count") or 1) > 1:
                meta.append(f"seen {e(f['count'])}×")
            out.append(f'<article class="finding {sev_css}"><header><span class="badge {sev_css}">{e(sev)}</span>'
                       f'<h3>{render_inline(f.get("title", ""))}</h3><span class="rule">{" · ".join(meta)}</span></header>')
            evidence = str(f.get("evidence") or "").strip()
            if evidence:
                out.append(f'<div class="evidence">{render_markdown(evidence)}</div>')
            fix = str(f.get("fix") or "").strip()
            if fix:
                out.append(f'<div class="fix"><strong>Fix</strong>{render_markdown(fix)}</div>')
            refs = [str(r) for r in f.get("references") or [] if str(r).strip()]
            if refs:
                out.append('<p class="refs">References: ' + ", ".join(_ref(r) for r in refs) + "</p>")
            out.append("</article>")
        out.append("</section>")
        return out

    def _charts(self, session: Session) -> list[str]:
        out = ['<section id="charts"><h2>Timeline</h2>']
        step_chart = charts.step_chart(session)
        out.append(step_chart or '<p class="none">No training steps were recorded.</p>')
        out += charts.memory_charts(session)
        out.append("</section>")
        return out

    def _crash(self, session: Session) -> list[str]:
        crash = session.crash
        assert crash is not None
        out = ['<section id="crash"><h2>Crash</h2><div class="crash">',
               f"<p><strong>{e(crash.type)}</strong>"
               + (f" <span class=\"sub\">({e(crash.module)})</span>" if crash.module and crash.module != "builtins" else "")
               + "</p>", f"<pre>{e(crash.message or '(no message)')}</pre>"]
        user = common.raised_at(session)
        if user:
            out.append(f"<p>Raised in your code at <code>{e(user.get('file'))}:{e(user.get('line'))}</code> "
                       f"in <code>{e(user.get('func'))}</code></p>")
        frames = common.crash_frames(session)
        if frames:
            lines = []
            for fr in frames:
                cls = ' class="user"' if fr.get("user") else ""
                mark = '<span class="mark">▶ </span>' if fr.get("user") else "  "
                lines.append(f"<span{cls}>{mark}{e(fr.get('file'))}:{e(fr.get('line'))} in {e(fr.get('func'))}</span>")
                if fr.get("code"):
                    lines.append(f"      {e(fr.get('code'))}")
            out.append("<details open><summary>Traceback (innermost last, ▶ your code)</summary>"
                       f'<pre class="trace">{chr(10).join(lines)}</pre></details>')
        out.append("</div></section>")
        return out

    def _details(self, session: Session, summary: Summary) -> list[str]:
        out = ['<section id="details"><div class="grid2"><div><h2>Environment</h2>',
               _kv_table(common.environment_rows(session))]
        variables = common.env_vars(session)
        out.append("<p>Variables: " + (" ".join(f"<code>{e(k)}={e(v)}</code>" for k, v in variables)
                                        if variables else '<span class="none">no PYTORCH_* or thread variables set</span>')
                   + "</p>")
        out += ["</div><div><h2>Figures</h2>", _kv_table(common.summary_rows(summary, session)), "</div></div>"]
        ranks = common.ranks_table(session)
        if ranks is not None:
            out += [f"<h2>Ranks ({len(session.ranks)})</h2>", _table(ranks)]
        dl = common.dataloader_table(session)
        if dl is not None:
            out += ["<h2>DataLoader</h2>", _table(dl)]
            heading, profile = common.loader_section(session)
            if profile:
                out += [f"<h3>{e(heading)}</h3>", _kv_table(profile)]
        warn = common.warnings_table(session)
        if warn is not None:
            out += [f"<h2>Warnings ({len(session.warnings)})</h2>", _table(warn)]
        data = ops_tables.ops_data(session)
        ops = ops_tables.ops_tables(session, data)
        if ops:
            out.append(f"<h2>Op accounting (sampled steps)</h2><p>{e(ops_tables.ops_headline(session, data))}</p>")
            for t in ops:
                out += [f"<h3>{e(t.title)}</h3>", _table(t)]
        out.append("</section>")
        return out

    def _notes(self, session: Session, summary: Summary, results: Results) -> list[str]:
        notes = [f"<strong>The recording is incomplete:</strong> {e(p)}." for p in common.recording_problems(summary)]
        notes += [f"The profiler switched off its <code>{e(err.get('instrument', '?'))}</code> instrument: "
                  f"{e(err.get('message', ''))}" + (f" (at <code>{e(str(err['where']))}</code>)" if err.get("where") else "")
                  for err in summary.get("probe_errors") or []]
        notes += [f"Rule file problem: {e(err)}" for err in getattr(results, "rule_errors", None) or []]
        if session.exit is None:
            notes.append("The recording ends before the script exited (still running, or cut off).")
        if not notes:
            return []
        return ['<section id="notes"><h2>Notes</h2><ul class="notes">'] + [f"<li>{n}</li>" for n in notes] + [
            "</ul></section>"]


# -- helpers ------------------------------------------------------------------------
def _tried(results: Results) -> list[str]:
    """``mpsprof try`` results stored with the run."""
    lines = experiment_lines(results)
    if not lines:
        return []
    items = "".join(f"<li>{e(line)}</li>" for line in lines)
    return [f'<section id="tried"><h2>Tried fixes (mpsprof try)</h2><ul class="notes">{items}</ul></section>']


def _changes(summary: Summary) -> list[str]:
    """``--set`` changes and a ``--max-steps`` cut, above the findings."""
    cut, changes = cut_text(summary), change_lines(summary)
    if not cut and not changes:
        return []
    items = "".join(f"<li>{e(line)}</li>" for line in ([cut] if cut else []) + changes)
    return [f'<section id="changes"><h2>Changed for this run (not in the script)</h2><ul class="notes">{items}</ul>'
            "</section>"]


def _num(value: Any) -> str:
    return f"{value:.2f}" if isinstance(value, (int, float)) else "–"


def _ref(url: str) -> str:
    if url.lower().startswith(("https://", "http://")) and not any(c.isspace() for c in url):
        return f'<a href="{e(url)}" rel="noopener noreferrer">{e(url)}</a>'
    return e(url)


def _kv_table(rows: list[tuple[str, str]]) -> str:
    if not rows:
        return '<p class="none">Not recorded.</p>'
    body = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def _table(t: common.Table) -> str:
    head = "".join(f'<th{_num_cls(i, t)}>{e(c)}</th>' for i, c in enumerate(t.columns))
    body = "".join("<tr>" + "".join(f"<td{_num_cls(i, t)}>{_code(v) if i in t.code else e(v)}</td>"
                                    for i, v in enumerate(row)) + "</tr>" for row in t.rows)
    note = f'<p class="sub">{e(t.note)}</p>' if t.note else ""
    return f'<div class="tscroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>{note}'


def _code(value: str) -> str:
    return f"<code>{e(value)}</code>" if value not in ("", "–") else e(value)


def _num_cls(i: int, t: common.Table) -> str:
    return ' class="num"' if i in t.numeric else ""
