"""Builtin analyzers; importing this package registers them (see ``..facts``).

Each module computes one family of facts. Modules owned elsewhere (the op-level facts
in ``..ops_facts``, the cross-rank facts in ``.ranks``) are registered here when they
exist, so one of them missing or broken never hides the others.
"""

from __future__ import annotations

from typing import Any

from ...session.session import Session
from ..facts import analyzer
from . import capacity, crash, dataloader, environment, leaks, loops, memory, threads, warmup  # noqa: F401

try:
    from . import ranks  # noqa: F401 - distributed jobs
except ImportError:
    pass

try:
    from ..ops_facts import ops_facts as _ops_facts
except ImportError:  # not written yet, or removed: the other analyzers still work
    _ops_facts = None

if _ops_facts is not None:

    @analyzer("ops")
    def op_facts(session: Session) -> dict[str, Any]:
        return dict(_ops_facts(session.ops, session.device_kind, session.env))
