"""Findings reports: one small renderer per format, all fed the same Session and Results.

Each renderer is a class with a ``name``, a file ``extension`` and
``render(session, results) -> str`` (pyinstrument's exporter shape). :data:`FORMATS` is the
one registry: the CLI's ``--format`` choices and help, the file-suffix lookup of
``--report FILE`` and the TUI's export all read it, so adding a format is one module plus one
:class:`Format` line here. Renderer modules are imported on first use (markdown-it and the
charts stay out of commands that never render). ``console.py`` (the end-of-run summary) is
separate: it is printed, not saved.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..results import Results
    from ..session.session import Session


class Renderer(Protocol):
    name: str
    extension: str

    def render(self, session: Session, results: Results) -> str: ...


@dataclass(frozen=True)
class Format:
    """A report format: its name, the renderer (``module:Class`` in this package), the file
    suffixes that ask for it (the first one is what its files get) and a few words for help."""

    name: str
    renderer: str
    suffixes: tuple[str, ...]
    description: str


REGISTRY: tuple[Format, ...] = (
    Format("md", "markdown:MarkdownRenderer", (".md", ".markdown"), "Markdown"),
    Format("html", "html:HtmlRenderer", (".html", ".htm"), "one file, charts included"),
    Format("json", "json_report:JsonRenderer", (".json",), "summary and findings"),
    Format("trace", "trace:TraceRenderer", (".trace.json",), "open in chrome://tracing or ui.perfetto.dev"),
)
FORMATS: tuple[str, ...] = tuple(f.name for f in REGISTRY)
DEFAULT_FORMAT = "md"
_BY_NAME = {f.name: f for f in REGISTRY}
_SUFFIXES = sorted(((s, f.name) for f in REGISTRY for s in f.suffixes), key=lambda p: -len(p[0]))
"""Longest suffix first: ``.trace.json`` is asked before ``.json``."""


def format_help() -> str:
    """``md (Markdown, the default), html (...), ... or trace (...)`` for ``--format``."""
    parts = [f"{f.name} ({f.description}{', the default' if f.name == DEFAULT_FORMAT else ''})" for f in REGISTRY]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def get_renderer(fmt: str) -> Renderer:
    """The renderer of a format name (``md``, ``html``, ``json``, ``trace``)."""
    entry = _BY_NAME.get(fmt)
    if entry is None:
        raise ValueError(f"unknown report format {fmt!r}: choose one of {', '.join(FORMATS)}")
    module, cls = entry.renderer.split(":")
    renderer: Renderer = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    return renderer


def render_report(fmt: str, session: Session, results: Results) -> str:
    """The report of one run in ``fmt``, as text ready to write to a file."""
    return get_renderer(fmt).render(session, results)


def format_for_path(path: Path | str) -> str:
    """The format a report file name asks for, from its suffix (``.trace.json`` before ``.json``)."""
    name = Path(path).name.lower()
    for suffix, fmt in _SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return fmt
    names = ", ".join(f.suffixes[0] + (f" (or {', '.join(f.suffixes[1:])})" if len(f.suffixes) > 1 else "")
                      for f in REGISTRY)
    raise ValueError(f"cannot tell the report format from {Path(path).name!r}: name it {names}")


__all__ = ["DEFAULT_FORMAT", "FORMATS", "REGISTRY", "Format", "Renderer", "format_for_path", "format_help",
           "get_renderer", "render_report"]
