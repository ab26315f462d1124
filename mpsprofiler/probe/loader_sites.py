"""Which DataLoader is which: where the script built each one, and each one's own fetch times.

A script with several loaders (a zipped pair, a training and a validation loader) needs
findings that name the loader to change and quote that loader's figures, and ``mpsprof
try`` must change that one alone. So the probe records, per loader:

* ``created``: its construction number, counted in the training process like the
  ``--set dataloader.N.*`` overrides count them (1 is the first DataLoader built);
* ``file``/``line``: the script's line that built it (the first frame outside torch and
  mpsprofiler), which the parent reads to rewrite that very call;
* ``fetches``/``fetch_s``: batches taken from it and the training's wall time waiting for
  them (an iterator's first batch is left out: it includes starting the workers).

Records live in weak dictionaries keyed by the loader and its iterators: the probe keeps
nothing alive that the script dropped. Updates go out as the loader's ``dataloader``
event again, with more fetches each time (doubling), so the recording stays small.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_SKIP = tuple(
    os.path.dirname(p) + os.sep
    for p in (os.path.dirname(os.path.abspath(__file__)),)  # mpsprofiler/
)
FIRST_UPDATE = 16
"""The first per-loader update after this many timed fetches; then at 2x, 4x, ..."""


@dataclass
class Site:
    created: int
    file: str | None
    line: int | None
    fetches: int = 0
    fetch_s: float = 0.0
    next_update: int = FIRST_UPDATE
    sent: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


class LoaderSites:
    """Construction sites and per-loader fetch sums (all methods are called guarded)."""

    def __init__(self, emit: Callable[..., None]) -> None:
        self._emit = emit
        self._pid = os.getpid()
        self._created = 0
        self._sites: weakref.WeakKeyDictionary[Any, Site] = weakref.WeakKeyDictionary()
        self._iters: weakref.WeakKeyDictionary[Any, tuple[Site, list[int]]] = weakref.WeakKeyDictionary()
        self._torch_dir: str | None = None

    def on_created(self, loader: Any) -> None:
        """At ``DataLoader.__init__``: number it and find the script's line that built it."""
        if os.getpid() != self._pid:
            return
        self._created += 1
        file, line = self._caller()
        self._sites[loader] = Site(self._created, file, line)

    def site_fields(self, loader: Any) -> dict[str, Any]:
        site = self._sites.get(loader)
        if site is None:
            return {}
        out: dict[str, Any] = {"created": site.created}
        if site.file:
            out["file"], out["line"] = site.file, site.line
        return out

    def on_iter(self, it: Any, loader: Any, fields: dict[str, Any] | None) -> None:
        """At an iterator's start: its fetches count for ``loader`` (the first one excepted)."""
        site = self._sites.get(loader)
        if site is None:
            return
        if fields is not None:
            site.fields = dict(fields)
        self._iters[it] = (site, [0])

    def on_fetch(self, it: Any, seconds: float) -> None:
        entry = self._iters.get(it)
        if entry is None:
            return
        site, count = entry
        count[0] += 1
        if count[0] == 1:
            return  # the first batch waits for the workers to start
        site.fetches += 1
        site.fetch_s += seconds
        if site.fetches >= site.next_update and site.fields:
            site.next_update *= 2
            self.update(site)

    def update(self, site: Site) -> None:
        site.sent = site.fetches
        self._emit({**site.fields, "fetches": site.fetches, "fetch_s": round(site.fetch_s, 6)})

    def flush(self) -> None:
        """At the end: the last sums of every loader that was timed since its last update."""
        for site in list(self._sites.values()):
            if site.fields and site.fetches > site.sent:
                self.update(site)

    def _caller(self) -> tuple[str | None, int | None]:
        if self._torch_dir is None:
            import torch

            self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        skip = (*_SKIP, self._torch_dir)
        frame = sys._getframe(2)
        for _ in range(64):
            if frame is None:
                break
            name = os.path.abspath(frame.f_code.co_filename)
            if not name.startswith(skip) and not name.startswith("<"):
                return name, frame.f_lineno
            frame = frame.f_back  # type: ignore[assignment]
        return None, None


def install_construction_hook(sites: LoaderSites, on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    """Wrap ``DataLoader.__init__`` (whatever wraps it already) to record each construction.

    The loader is built first, exactly as the script asked; a failure to record leaves it
    untouched.
    """
    from torch.utils.data import DataLoader

    from .transparent import hide_from_warnings

    original = DataLoader.__init__

    def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
        original(loader, *args, **kwargs)
        try:
            sites.on_created(loader)
        except Exception as exc:
            on_error(exc)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    DataLoader.__init__ = hide_from_warnings(__init__)  # type: ignore[method-assign,assignment]

    def uninstall() -> None:
        DataLoader.__init__ = original  # type: ignore[method-assign]

    return uninstall
