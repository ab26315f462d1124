"""Processes the script starts itself (``multiprocessing`` / ``torch.multiprocessing``
``Process``, ``torch.multiprocessing.spawn``): seen, named and reported, not followed.

Hogwild-style training (pytorch/examples ``mnist_hogwild``) runs its optimizer steps in
such processes, so without this the parent's own short evaluation would pass for the
whole run. The probe cannot follow them today: a spawn or forkserver child is a fresh
interpreter without the probe (its settings are removed from the environment so the
script's subprocesses see the user's), and a forked child inherits a probe whose channel
thread did not survive the fork and whose pipe is the parent's; following them needs a
channel per child (like the per-rank FIFOs of distributed runs). So each start is an
event, and the run says that training there was not observed.

DataLoader workers are processes too, but the probe accounts for them (data wait, their
memory): they are recognised by their target, ``torch.utils.data``'s worker loop.
"""

from __future__ import annotations

import multiprocessing.process as mp_process
import os
import sys
import sysconfig
from collections.abc import Callable
from typing import Any

from ..events.payloads import ChildFields

WORKER_LOOP = ("torch.utils.data._utils.worker", "_worker_loop")


def install(emit: Callable[..., None], on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    """Wrap ``BaseProcess.start`` (every context's Process class inherits it); returns the
    uninstaller. Costs nothing outside ``start()``."""
    base = mp_process.BaseProcess
    original = base.start
    state = {"failed": False}

    def start(self: Any) -> None:
        info = None
        if not state["failed"]:
            try:
                info = describe(self)  # start() deletes the target once the child runs
            except Exception as exc:
                state["failed"] = True
                on_error(exc)
        original(self)
        if info is None:
            return
        try:
            info["pid"] = getattr(self, "pid", None)
            emit(**info)
        except Exception as exc:
            state["failed"] = True
            on_error(exc)

    start.__wrapped__ = original  # type: ignore[attr-defined]
    base.start = start  # type: ignore[method-assign]

    def uninstall() -> None:
        if base.start is start:
            base.start = original  # type: ignore[method-assign]

    return uninstall


def describe(process: Any) -> ChildFields | None:
    """The event fields for a started process, or None for a DataLoader worker."""
    target = getattr(process, "_target", None)
    module = getattr(target, "__module__", "") or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or type(target).__name__
    if (module, name) == WORKER_LOOP:
        return None
    args = getattr(process, "_args", ()) or ()
    via = "process"
    if module == "torch.multiprocessing.spawn" and args and callable(args[0]):
        via = "spawn"
        # torch.multiprocessing.spawn(fn, nprocs=N): the process runs _wrap(fn, i, ...)
        fn = args[0]
        module = getattr(fn, "__module__", "") or ""
        name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "?")
    method = getattr(process, "_start_method", None)
    if method is None:  # the default context's Process: whatever start method it resolves to
        import multiprocessing

        method = multiprocessing.get_start_method(allow_none=True) or "default"
    fields: ChildFields = {
        "name": str(getattr(process, "name", "")),
        "target": f"{module}.{name}" if module and module != "__main__" else str(name),
        "method": str(method),
        "via": via,
    }
    site = call_site()
    if site is not None:
        fields["file"], fields["line"] = site
    return fields


def _library_dirs() -> tuple[str, ...]:
    """Where code that is not the script's lives: the standard library (multiprocessing,
    concurrent.futures), site-packages (torch, a framework) and mpsprof itself."""
    dirs = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            path = sysconfig.get_paths().get(key)
        except Exception:
            path = None
        if path:
            dirs.add(os.path.abspath(path))
    return tuple(d.rstrip(os.sep) + os.sep for d in dirs)


def call_site() -> tuple[str, int] | None:
    """The script's line that started the process (``mp.spawn(...)``, ``p.start()``): the
    innermost frame outside the standard library, site-packages and mpsprof; None if none."""
    skip = _library_dirs()
    frame = sys._getframe(1)
    for _ in range(64):
        if frame is None:
            return None
        name = os.path.abspath(frame.f_code.co_filename)
        if not name.startswith(skip) and not frame.f_code.co_filename.startswith("<"):
            return name, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None
