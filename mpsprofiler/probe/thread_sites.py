"""Where the script sets torch's thread count: ``torch.set_num_threads(N)`` calls, with file:line.

A fix that says "call torch.set_num_threads(1) at the start" changes nothing when the
script's own line sets 16 later: the finding must name that line and rewrite it. The
wrapper records the call (training process only: DataLoader workers set their own
count inside torch) and passes it on unchanged, to whatever ``set_num_threads`` was
there before (the ``--set torch.num_threads`` override, or torch's).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

MAX_CALLS = 8
_OURS = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class ThreadSites:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self._pid = os.getpid()

    def record(self, nthreads: Any) -> None:
        if os.getpid() != self._pid or len(self.calls) >= MAX_CALLS:
            return
        site = user_site(3)
        if site is not None:
            n = int(nthreads) if isinstance(nthreads, int) and not isinstance(nthreads, bool) else None
            self.calls.append({"file": site[0], "line": site[1], "n": n})


def user_site(depth: int) -> tuple[str, int] | None:
    """The first frame from ``depth`` frames up (``sys._getframe(depth)`` as this function's
    caller would count it, plus one) that is neither torch's nor mpsprof's: the script's line
    that called into a wrapped torch function."""
    frame: Any = sys._getframe(depth)
    torch_dir = os.path.dirname(os.path.abspath(sys.modules["torch"].__file__ or "")) + os.sep
    for _ in range(32):
        if frame is None:
            return None
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith((_OURS, torch_dir)) and not name.startswith("<"):
            return name, frame.f_lineno
        frame = frame.f_back
    return None


def install(sites: ThreadSites, on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    import torch

    original = torch.set_num_threads

    def set_num_threads(nthreads: int) -> None:  # torch's own parameter name
        try:
            sites.record(nthreads)
        except Exception as exc:
            on_error(exc)
        return original(nthreads)

    torch.set_num_threads = set_num_threads

    def uninstall() -> None:
        torch.set_num_threads = original

    return uninstall
