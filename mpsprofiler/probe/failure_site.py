"""Where a probe instrument failed, for its one ``probe_error`` (issue 27).

"The step counter was switched off: TypeError: 'NoneType' object is not callable" says
what, not where: the place to fix is mpsprof's own frame the exception passed through
last (the innermost of ours in its traceback: our line, or our call into torch that
raised). It is written as ``mpsprofiler/probe/backward.py:79 in _hook``, a path inside
the package, so it reads the same on every machine and names no user folder.
"""

from __future__ import annotations

import os

from ..resources import PACKAGE_DIR, is_own_file

_ROOT = os.path.dirname(str(PACKAGE_DIR))


def failure_site(exc: BaseException) -> str:
    """``FILE:LINE in FUNC`` of the innermost frame of mpsprof's that ``exc`` passed
    through; "" when none did (never raises)."""
    try:
        tb, last = exc.__traceback__, None
        while tb is not None:
            if is_own_file(tb.tb_frame.f_code.co_filename):
                last = tb
            tb = tb.tb_next
        if last is None:
            return ""
        code = last.tb_frame.f_code
        name = code.co_filename
        shown = os.path.relpath(name, _ROOT) if name.startswith(_ROOT + os.sep) else os.path.basename(name)
        return f"{shown}:{last.tb_lineno} in {code.co_name}"
    except Exception:  # noqa: BLE001 - a report of a failure must not fail
        return ""


def failure_fields(exc: BaseException) -> dict[str, str]:
    """The ``probe_error`` fields for ``exc``: ``message`` (the exception's type and text)
    and, where known, ``where`` (the views print it after the message)."""
    where = failure_site(exc)
    fields = {"message": f"{type(exc).__name__}: {exc}"}
    if where:
        fields["where"] = where
    return fields
