"""Markdown text that quotes the script safely: escaped prose, code spans and fenced blocks
that nothing the script printed can close early or turn into markup.

A leaf: the diagnosis writes findings in Markdown (a crash's own finding quotes its
message), and every report and view reads them.
"""

from __future__ import annotations

import re
from typing import Any

_SPECIAL = re.compile(r"([\\`*\[\]<>#|~&$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")


def escape(text: Any) -> str:
    """Inline text safe in Markdown prose: punctuation escaped, lines joined."""
    flat = " ".join(str(text).split())
    return _SPECIAL.sub(r"\\\1", flat)


def code(text: Any) -> str:
    """Inline code span that survives backticks inside the text (not for table cells:
    GFM splits cells on "|" even inside code; report.markdown.cell is for those)."""
    flat = " ".join(str(text).split())
    longest = max((len(run) for run in re.findall(r"`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") or not flat else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def fenced(text: str, lang: str = "") -> str:
    """A fenced block whose fence no line of ``text`` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"
