"""Findings reports: one small renderer per format, all fed the same Session and Results.

Each renderer is a class with a ``name``, a file ``extension`` and
``render(session, results) -> str`` (pyinstrument's exporter shape), so adding a format
is one module and one line in :data:`RENDERERS`. ``console.py`` (the headless summary)
is separate: it is printed, not saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

FORMATS = ("md", "html", "json", "trace")

_SUFFIXES = (
    (".trace.json", "trace"),
    (".json", "json"),
    (".md", "md"),
    (".markdown", "md"),
    (".html", "html"),
    (".htm", "html"),
)


class Renderer(Protocol):
    name: str
    extension: str

    def render(self, session: Any, results: Any) -> str: ...


def get_renderer(fmt: str) -> Renderer:
    """The renderer of a format name (``md``, ``html``, ``json``, ``trace``)."""
    if fmt == "md":
        from .markdown import MarkdownRenderer

        return MarkdownRenderer()
    if fmt == "html":
        from .html import HtmlRenderer

        return HtmlRenderer()
    if fmt == "json":
        from .json_report import JsonRenderer

        return JsonRenderer()
    if fmt == "trace":
        from .trace import TraceRenderer

        return TraceRenderer()
    raise ValueError(f"unknown report format {fmt!r}: choose one of {', '.join(FORMATS)}")


def render_report(fmt: str, session: Any, results: Any) -> str:
    """The report of one run in ``fmt``, as text ready to write to a file."""
    return get_renderer(fmt).render(session, results)


def format_for_path(path: Path | str) -> str:
    """The format a report file name asks for, from its suffix (``.trace.json`` before ``.json``)."""
    name = Path(path).name.lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return fmt
    raise ValueError(
        f"cannot tell the report format from {Path(path).name!r}: "
        "name it .md, .html (or .htm), .json, or .trace.json"
    )


__all__ = ["FORMATS", "Renderer", "format_for_path", "get_renderer", "render_report"]
