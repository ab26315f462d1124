"""JSON report: the ``summary.json`` document, stamped with its schema, for tools and CI.

The document is exactly :meth:`Results.document` (what ``summary.json`` holds) plus
``mpsprof`` (the writing version); ``schema`` says which version of
``report/schema.json`` describes it. Values JSON cannot hold (NaN, infinities, odd
objects in a finding's facts) are written as ``null`` or text, never as invalid JSON.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Any

from .. import __version__
from ..events import json_safe
from ..resources import report_schema_text
from ..results import Results
from ..session.session import Session
from ..session.summary import SUMMARY_SCHEMA


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The JSON Schema of the document (shipped inside the package)."""
    schema: dict[str, Any] = json.loads(report_schema_text())
    return schema


def report_document(results: Results) -> dict[str, Any]:
    doc: dict[str, Any] = _clean(results.document())
    doc.setdefault("schema", SUMMARY_SCHEMA)
    doc["mpsprof"] = __version__
    return doc


class JsonRenderer:
    name = "json"
    extension = ".json"

    def render(self, session: Session, results: Results) -> str:
        return json.dumps(json_safe(report_document(results)), indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
