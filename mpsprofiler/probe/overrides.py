"""Apply ``--set`` changes inside the training process, and say what was changed.

The settings were validated by the parent (:mod:`mpsprofiler.settings`);
environment variables were set by the launcher before the interpreter started. Here
the rest is done where the script does it:

* DataLoader arguments are rewritten as the script constructs each loader (a patched
  ``DataLoader.__init__``), so torch validates the result exactly as if the script had
  written it. Loader IDs count constructions: 1 is the first DataLoader created.
* ``torch.set_num_threads(N)`` runs right after the script's ``import torch``; the
  script's own later calls in this process are kept at N (worker processes still set
  their own thread count).
* ``empty_cache()`` runs on the training device every N steps.
* Autograd's anomaly detection stays off (``torch.detect_anomaly=false``): the script's
  ``set_detect_anomaly(True)`` / ``detect_anomaly()`` are passed on as off.

One thing is refused rather than applied: worker processes (``num_workers > 0``) started
by *spawn* or *forkserver* (macOS and Windows default) import the script again as a
module; a script without an ``if __name__ == "__main__":`` guard would then start its
training again inside every worker and die (the "bootstrapping phase" RuntimeError of
Python's multiprocessing docs, "Safe importing of main module"). mpsprof leaves
``num_workers`` as the script wrote it there and records why.

Every change and every refusal is one ``override`` event, so summaries and reports
always say what differed from the script as written.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
from collections.abc import Callable
from typing import Any

from .. import events
from ..events.payloads import OverrideFields
from .transparent import hide_from_warnings

SPAWNING = ("spawn", "forkserver")


class Overrides:
    def __init__(self, settings: dict[str, Any], emit: Callable[..., None], on_error: Callable[[BaseException], None]) -> None:
        self.settings = settings
        self._emit = emit
        self._on_error = on_error
        self._created = 0
        self._pid = os.getpid()
        self._guard_cache: dict[str, bool | None] = {}

    def _override(self, target: str, applied: dict[str, list[Any]], skipped: list[dict[str, str]]) -> None:
        """Say what a ``--set`` change did: ``applied`` name -> [before, after], ``skipped``
        the settings refused and why."""
        fields: OverrideFields = {"target": target, "applied": applied, "skipped": skipped}
        self._emit(events.KIND_OVERRIDE, **fields)

    # -- DataLoader -------------------------------------------------------------
    def loader_fields(self, number: int) -> dict[str, Any]:
        loaders = self.settings.get("dataloader") or {}
        fields = dict(loaders.get("*") or {})
        fields.update(loaders.get(str(number)) or {})
        return fields

    def install_dataloader(self) -> Callable[[], None] | None:
        if not self.settings.get("dataloader"):
            return None
        from torch.utils.data import DataLoader

        original = DataLoader.__init__
        signature = inspect.signature(original)
        overrides = self

        def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
            try:
                args, kwargs = overrides._rewrite(signature, loader, args, kwargs)
            except Exception as exc:  # the loader is built as the script wrote it
                overrides._on_error(exc)
            original(loader, *args, **kwargs)

        __init__.__wrapped__ = original  # type: ignore[attr-defined]
        # torch's stacklevel=2 warnings in DataLoader.__init__ keep naming the script's line
        DataLoader.__init__ = hide_from_warnings(__init__)  # type: ignore[method-assign,assignment]

        def uninstall() -> None:
            DataLoader.__init__ = original  # type: ignore[method-assign]

        return uninstall

    def _rewrite(self, signature: inspect.Signature, loader: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
                 ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if os.getpid() != self._pid:
            return args, kwargs
        self._created += 1
        number = self._created
        wanted = self.loader_fields(number)
        if not wanted:
            return args, kwargs
        bound = signature.bind(loader, *args, **kwargs)
        params = dict(bound.arguments)
        params.pop(next(iter(signature.parameters)))  # self
        defaults = {name: p.default for name, p in signature.parameters.items()}
        had_workers = params.get("num_workers", defaults.get("num_workers")) or 0
        applied: dict[str, list[Any]] = {}
        skipped: list[dict[str, str]] = []
        workers = wanted.get("num_workers", had_workers)
        if workers > 0 and had_workers == 0:
            # the script never started workers: it may not be ready for spawn's re-import
            reason = self._spawn_refusal(params.get("multiprocessing_context"))
            if reason:
                skipped.append({"setting": f"num_workers={workers}", "reason": reason})
                wanted = {k: v for k, v in wanted.items() if k != "num_workers"}
                workers = had_workers
        for name, value in wanted.items():
            if name in ("persistent_workers", "prefetch_factor") and workers == 0 and value not in (False, None):
                skipped.append({"setting": f"{name}={value}", "reason": "needs num_workers > 0"})
                continue
            if params.get(name, defaults.get(name)) != value:
                applied[name] = [params.get(name, defaults.get(name)), value]
            params[name] = value
        if workers == 0:
            # torch refuses these without workers: a script that set them for its workers
            # keeps running when the change takes the workers away
            for name, off in (("prefetch_factor", None), ("persistent_workers", False)):
                if params.get(name, defaults.get(name)) not in (off, None, False):
                    applied[name] = [params[name], off]
                    params[name] = off
        self._override(f"dataloader {number}", applied, skipped)
        return (), params

    def _spawn_refusal(self, context: Any) -> str | None:
        method = _context_name(context)
        if method not in SPAWNING:
            return None
        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None)
        if not path:
            return None
        guarded = self._has_main_guard(str(path))
        if guarded is False:
            return (f"worker processes started by {method} import the script again, and it has no "
                    "`if __name__ == \"__main__\":` guard: every worker would re-run the training. "
                    "Add the guard, then try again")
        return None

    def _has_main_guard(self, path: str) -> bool | None:
        if path not in self._guard_cache:
            self._guard_cache[path] = has_main_guard(path)
        return self._guard_cache[path]

    # -- threads -----------------------------------------------------------------
    def install_threads(self) -> Callable[[], None] | None:
        threads = (self.settings.get("torch") or {}).get("num_threads")
        if not threads:
            return None
        import torch

        original = torch.set_num_threads
        before = torch.get_num_threads()
        original(threads)
        self._override("torch.num_threads", {"num_threads": [before, threads]}, [])
        overrides = self
        told: list[int] = []

        def set_num_threads(nthreads: int) -> None:  # torch's own parameter name
            if os.getpid() != overrides._pid:
                return original(nthreads)  # DataLoader workers set their own: leave them
            if nthreads != threads and not told:
                told.append(nthreads)
                overrides._override("torch.num_threads", {},
                                    [{"setting": f"the script's set_num_threads({nthreads})",
                                      "reason": f"kept at {threads} (--set torch.num_threads)"}])
            return original(threads)

        torch.set_num_threads = set_num_threads

        def uninstall() -> None:
            torch.set_num_threads = original

        return uninstall

    # -- anomaly detection -------------------------------------------------------
    def install_anomaly(self) -> Callable[[], None] | None:
        """``--set torch.detect_anomaly=false``: the script's calls that turn autograd's
        anomaly detection on are passed on as off (both of torch's switches call
        ``torch.set_anomaly_enabled``, torch/autograd/anomaly_mode.py), and it is turned
        off now if the script turned it on before torch was watched. What ``try`` runs to
        prove the finding ``anomaly-detection-on``; the script is not edited."""
        if (self.settings.get("torch") or {}).get("detect_anomaly") is not False:
            return None
        import torch

        from .anomaly import wrap_switch

        told: list[bool] = []
        if torch.is_anomaly_enabled():
            torch.set_anomaly_enabled(False)

        def always_off(enabled: bool, check_nan: bool) -> bool:
            if enabled and not told:
                told.append(True)
                try:
                    self._override("torch.detect_anomaly", {"detect_anomaly": [True, False]}, [])
                except Exception as exc:
                    self._on_error(exc)
            return False

        return wrap_switch(always_off)

    # -- empty_cache -------------------------------------------------------------
    def cache_listener(self, backend: Callable[[], Any]) -> Callable[[int, float], None] | None:
        every = (self.settings.get("memory") or {}).get("empty_cache_every")
        if not every:
            return None
        self._override("memory.empty_cache_every", {"empty_cache_every": [None, every]}, [])

        def listener(next_step: int, last: float) -> None:
            if next_step % every == 0 and os.getpid() == self._pid:
                try:
                    backend().empty_cache()
                except Exception as exc:
                    self._on_error(exc)

        return listener


def has_main_guard(path: str) -> bool | None:
    """Does the module at ``path`` have a top-level ``if __name__ == "__main__":``?
    None when it cannot be read or parsed."""
    try:
        with open(path, "rb") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_test(node.test):
            return True
    return False


def _is_main_test(test: ast.expr) -> bool:
    if not isinstance(test, ast.Compare) or len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return bool(names and consts)


def _context_name(context: Any) -> str | None:
    """The start method DataLoader workers will use, without fixing the default context."""
    if context is not None:
        if isinstance(context, str):
            return context
        return getattr(context, "_name", None)
    try:
        import multiprocessing

        method = multiprocessing.get_start_method(allow_none=True)
        if method:
            return method
        default = getattr(multiprocessing.context._default_context, "_default_context", None)
        return getattr(default, "_name", None)
    except Exception:
        return None
