"""Safe templating of rule text (title, evidence, fix) with facts.

Rule files are written by users, so a template must never reach arbitrary objects:
``str.format(**facts)`` would allow ``{x.__class__}``-style walks. Instead each template
is split once with :class:`string.Formatter` and every field is looked up by plain name
in the facts dict. Attribute/index fields, positional fields and nested format specs are
refused when the rule loads; a value that does not suit its format spec prints plainly,
so rendering never fails. A text never has a hole: the sentence (or line) holding a fact
that is missing, ``None``, NaN or empty is left out of :meth:`Template.render`; only a
text that would be left empty (a one-sentence title) says "not measured" in its place.
Literal braces (e.g. in a fenced Python snippet of a fix) are written ``{{`` and ``}}``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MISSING = "?"
"""What :func:`render_value` prints for an absent or None fact (``rules check`` output)."""

NOT_MEASURED = "(not measured)"
"""In place of a missing fact only where leaving its sentence out would leave nothing."""



class Blank(str):
    """A phrase written empty (``""``): the fact reads as no words, but it is not missing,
    so the sentence around it stays (an optional clause: ``unknown: ""``, ``other: ", ..."``).
    See :func:`~mpsprofiler.diagnosis.engine.phrase_for`."""


BLANK = Blank("")

_HOLE = "\x00"
_SENTENCE = re.compile(
    r"(?<=[.!?:])[ \t]*\n?[ \t]*(?=[A-Z(`*])(?<=\s)|(?<=[.!?])[ \t]*\n?[ \t]*(?=\x00)(?<=\s)"
    r"|\n[ \t]*\n\s*|\n(?=[ \t]*(?:[-*] |\d+\. ))"
)
"""Where a sentence ends in prose: after '.', '!', '?' or ':' and white space before a
capital, a parenthesis, code or emphasis; after '.', '!' or '?' before a missing fact (a
sentence that starts with a field, such as a phrase; after ':' the field belongs to the
words before it); at a blank line; before a list item."""
_FENCE = re.compile(r"(^[ \t]*```.*?^[ \t]*```[^\n]*\n?)", re.M | re.S)

MAX_FIELD_CHARS = 2000
"""One rendered field is cut here: facts such as exception texts may be long."""

MAX_TEMPLATE_CHARS = 20_000

_IDENT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
# Python's format-spec mini-language, with width and precision kept small so that a
# hostile "{x:999999999}" cannot allocate a huge string.
_SPEC = re.compile(
    r"(?:[^{}]?[<>=^])?[+\- ]?z?#?0?(?P<width>\d{1,3})?[_,]?(?:\.(?P<prec>\d{1,2}))?"
    r"[bcdeEfFgGnosxX%]?\Z"
)
_FORMATTER = string.Formatter()
_BRACE_HINT = "write '{{' and '}}' for literal braces (e.g. in code)"


class TemplateError(ValueError):
    """A template that cannot be used; ``offset`` is the character index of the problem."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class Field:
    name: str
    conversion: str | None
    spec: str


@dataclass(frozen=True)
class Template:
    """A parsed template: literal text and fields, in order."""

    source: str
    pieces: tuple[str | Field, ...]

    @property
    def fields(self) -> tuple[str, ...]:
        """Fact names the template refers to, in first-use order."""
        seen: dict[str, None] = {}
        for piece in self.pieces:
            if isinstance(piece, Field):
                seen.setdefault(piece.name)
        return tuple(seen)

    def render(self, facts: Mapping[str, Any]) -> str:
        """Fill the template from ``facts``, leaving out each sentence whose fact is
        missing (see the module docstring); never raises."""
        out: list[str] = []
        holes = False
        for piece in self.pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                value = facts.get(piece.name)
                if _missing(value):
                    out.append(_HOLE)
                    holes = True
                else:
                    out.append(render_value(value, piece.spec, piece.conversion))
        text = "".join(out)
        return _without_holes(text) if holes else text


def _missing(value: Any) -> bool:
    if isinstance(value, Blank):
        return False
    if value is None or (isinstance(value, float) and value != value):
        return True
    return isinstance(value, (str, list, tuple, set, frozenset)) and not value


def _without_holes(text: str) -> str:
    """``text`` without its sentences that hold a hole: in prose a sentence may span
    lines (it ends at '.', '!' or '?' before a capital, or at a blank line or a list
    item); in a fenced code block each line is one."""
    parts = _FENCE.split(text)
    kept: list[str] = []
    for k, part in enumerate(parts):
        if k % 2:  # a fenced block, fences included; left out whole when only its fences stay
            lines = [line for line in part.splitlines(keepends=True) if _HOLE not in line]
            kept.append("" if all(not line.strip() or line.lstrip().startswith("```") for line in lines)
                        else "".join(lines))
        else:
            kept.append(_prose_without_holes(part))
    result = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", "".join(kept))).strip(" ")
    if not result.strip():
        return text.replace(_HOLE, NOT_MEASURED)
    return result


def _prose_without_holes(text: str) -> str:
    kept: list[str] = []
    pos = 0
    for match in [*_SENTENCE.finditer(text), None]:
        end = match.start() if match is not None else len(text)
        sep = match.group(0) if match is not None else ""
        if _HOLE not in text[pos:end]:
            kept.append(text[pos:end] + sep)
        elif "\n" in sep:
            kept.append("\n" * min(sep.count("\n"), 2))
        pos = match.end() if match is not None else len(text)
    return "".join(kept)


def render_value(value: Any, spec: str = "", conversion: str | None = None) -> str:
    """Format one fact value; falls back to ``str`` when the spec does not suit the type."""
    if value is None:
        return MISSING
    try:
        if conversion == "r":
            text = format(repr(value), spec)
        elif isinstance(value, (list, tuple, set, frozenset)) and not spec:
            text = ", ".join(str(v) for v in value)
        else:
            text = format(value if conversion != "s" else str(value), spec)
    except (ValueError, TypeError, OverflowError):
        try:
            text = str(value)
        except Exception:  # a hostile __str__ must not break a report
            text = MISSING
    except Exception:
        text = MISSING
    if len(text) > MAX_FIELD_CHARS:
        text = text[: MAX_FIELD_CHARS - 1] + "…"
    return text


def _field_offsets(text: str) -> list[tuple[int, int]]:
    """(start, end) of each replacement field, mirroring Formatter's brace rules.

    Formatter.parse collapses ``{{`` and gives no positions, so error messages need this
    to point at the right character.
    """
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            if text.startswith("{{", i):
                i += 2
                continue
            depth, j = 1, i + 1
            while j < n and depth:
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                j += 1
            if depth:
                raise TemplateError(f"unclosed '{{'; {_BRACE_HINT}", i)
            spans.append((i, j))
            i = j
        elif c == "}":
            if text.startswith("}}", i):
                i += 2
                continue
            raise TemplateError(f"single '}}'; {_BRACE_HINT}", i)
        else:
            i += 1
    return spans


def compile_template(text: str) -> Template:
    """Parse and validate a template; raises :class:`TemplateError` with an offset."""
    if len(text) > MAX_TEMPLATE_CHARS:
        raise TemplateError(f"template longer than {MAX_TEMPLATE_CHARS} characters", 0)
    spans = _field_offsets(text)
    try:
        parsed = list(_FORMATTER.parse(text))
    except ValueError as exc:  # _field_offsets should have caught it; keep a safe net
        raise TemplateError(f"{exc}; {_BRACE_HINT}", 0) from None
    pieces: list[str | Field] = []
    k = 0
    for literal, name, spec, conversion in parsed:
        if literal:
            pieces.append(literal)
        if name is None:
            continue
        offset = spans[k][0] if k < len(spans) else 0
        k += 1
        pieces.append(_check_field(name, spec or "", conversion, offset))
    return Template(text, tuple(pieces))


def _check_field(name: str, spec: str, conversion: str | None, offset: int) -> Field:
    shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if not name:
        raise TemplateError(f"empty field {shown}: name a fact, e.g. {{step_ms}}; {_BRACE_HINT}", offset)
    if not _IDENT.match(name):
        if "." in name or "[" in name:
            why = "attribute and index access are not allowed; use a plain fact name"
        elif name.isdigit():
            why = "positional fields are not allowed; use a fact name"
        else:
            why = "a field must be a plain fact name (letters, digits, '_')"
        raise TemplateError(f"bad field {shown}: {why}; {_BRACE_HINT}", offset)
    if conversion not in (None, "r", "s"):
        raise TemplateError(f"bad conversion in {shown}: only !r and !s are allowed", offset)
    if "{" in spec or "}" in spec:
        raise TemplateError(f"nested field in format spec of {shown} is not allowed", offset)
    if spec and not _SPEC.match(spec):
        raise TemplateError(
            f"bad format spec in {shown} (expected e.g. '.1f', '.0%', '>8,'); {_BRACE_HINT}",
            offset,
        )
    return Field(name, conversion, spec)


def render_template(text: str, facts: Mapping[str, Any]) -> str:
    """One-shot helper for callers without a compiled template; never raises."""
    try:
        return compile_template(text).render(facts)
    except TemplateError:
        return text
