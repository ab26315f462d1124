"""Call back once a module has been imported: how the probe learns that the script imported torch."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

IMPORT_CPU_S: dict[str, float] = {}
"""The CPU seconds the watched modules' imports took this process (the script's own import
statement, its submodules included): what a DataLoader worker started with spawn spends
again, since it imports torch and the script anew (probe.py sends torch's in its ``env``)."""


class ImportWatcher:
    """A ``sys.meta_path`` finder that calls back once a module has finished importing.

    It finds nothing itself: it asks the other finders, and wraps the found loader's
    ``exec_module`` (on that loader object only) so the callback runs right after the
    module's code, inside the script's own import statement.
    """

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        spec = None
        for finder in list(sys.meta_path):
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        watcher = self

        def exec_module(module: Any) -> None:
            started = time.process_time()
            original(module)
            IMPORT_CPU_S.setdefault(fullname, time.process_time() - started)
            try:
                del loader.exec_module  # back to the class's method
            except AttributeError:
                pass
            watcher.remove()
            watcher.callback()

        try:
            loader.exec_module = exec_module
        except AttributeError:  # a loader that takes no attributes: no lazy hooks
            return spec
        return spec

    def remove(self) -> None:
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass


def when_imported(name: str, callback: Callable[[], None]) -> Callable[[], None] | None:
    """Call ``callback`` once module ``name`` has been imported: now if it already is
    (returns None), else right after the script's own import (returns the uninstaller).

    The probe never imports torch itself: a script that sets ``PYTORCH_ENABLE_MPS_FALLBACK``
    or ``OMP_NUM_THREADS`` before its own ``import torch`` must see them take effect, and a
    script without torch must not pay for it.
    """
    if name in sys.modules:
        callback()
        return None
    watcher = ImportWatcher(name, callback)
    sys.meta_path.insert(0, watcher)
    return watcher.remove
