"""The DataLoader iterator hooks: how long each batch took to arrive, and which loader it was.

Split from the probe (``probe/probe.py``) in the style of ``overrides.py``: the hooks are
handed the probe's callables (``emit``, ``fault``, ``fail``, ``check_limit``) and its live
set of switched-off instruments (only read here), never the probe itself.

Every batch request goes through ``_BaseDataLoaderIter.__next__`` (its wrapper is
fetch_path.py's, a steady batch in one frame): the step tracker times the wait (steps.py),
the loader's call site is recorded (loader_sites.py) and pageable batches on CUDA are noted
(copies.py). Each iterator's construction says which loader it
is (``loader_config.py``): a loader is numbered at its first iterator. Some batches'
index draws (``_next_index``: the sampler, in the training process) are timed too, by an
iterator's own attribute that ``sites.on_fetch`` sets for its next batch (loader_sites.py).
"""

from __future__ import annotations

import functools
import operator
import sys
import time
from collections.abc import Callable, Set
from types import FrameType
from typing import Any

from .. import events
from . import loader_sites
from .copies import PinCheck
from .fetch_path import INSTRUMENT, fetch_wrapper
from .frameworks import detect
from .loader_config import loader_config
from .steps import StepTracker
from .transparent import hide_from_warnings
from .weakids import WeakIds


def _caller_module(frame: FrameType | None) -> str:
    """The module of the code that asked the DataLoader iterator for a batch ("" if none)."""
    name = frame.f_globals.get("__name__") if frame is not None else None
    return name if isinstance(name, str) else ""


def install(tracker: StepTracker, disabled: Set[str], emit: Callable[..., None], fault: Callable[[str], None] | None,
            fail: Callable[[str, BaseException], None], check_limit: Callable[[], None] | None,
            device_kind: Callable[[], str]) -> tuple[loader_sites.LoaderSites, PinCheck, Callable[[], None]]:
    """Wrap the DataLoader iterator; returns the call-site record, the pin check (both
    flushed by the probe at exit) and the uninstaller. ``fault`` and ``check_limit`` are
    None when there is nothing to check (as in step_hooks.py)."""
    from torch.utils.data import dataloader as dl

    base = dl._BaseDataLoaderIter
    orig_next = base.__next__
    orig_init = base.__init__
    seen = WeakIds()  # never keeps a loader (and its persistent workers) alive
    # the steps begun, read at every batch: a C callable (no Python frame), see StepTracker.begun
    sites = loader_sites.LoaderSites(lambda d: emit(events.KIND_DATALOADER, **d),
                                     functools.partial(operator.attrgetter("begun"), tracker))
    pins = PinCheck(emit, device_kind)
    __next__ = fetch_wrapper(tracker, sites, pins, orig_next, disabled, fault, fail, check_limit, time.perf_counter,
                             _caller_module)

    def __init__(it: Any, loader: Any, *args: Any, **kwargs: Any) -> None:
        orig_init(it, loader, *args, **kwargs)
        try:
            if INSTRUMENT not in disabled:
                number = seen.add(loader)
                fields: dict[str, Any] | None = None
                if number:
                    fields = {**loader_config(loader, number), **sites.site_fields(loader),
                              "framework": _framework(sys._getframe(1))}
                    emit(events.KIND_DATALOADER, **fields)
                sites.on_iter(it, loader, fields)
                pins.on_iter(it, loader, number)
        except Exception as exc:
            fail(INSTRUMENT, exc)

    # torch's warnings inside them (pin_memory without an accelerator, an
    # IterableDataset's wrong length) must name torch's caller, not these wrappers
    base.__next__ = hide_from_warnings(__next__)  # type: ignore[method-assign,assignment]
    base.__init__ = hide_from_warnings(__init__)  # type: ignore[method-assign,assignment]
    uninstall_sites = loader_sites.install_construction_hook(sites, lambda exc: fail(INSTRUMENT, exc))

    def uninstall() -> None:
        base.__next__ = orig_next  # type: ignore[method-assign]
        base.__init__ = orig_init  # type: ignore[method-assign]
        uninstall_sites()

    return sites, pins, uninstall


def _framework(frame: FrameType | None) -> str | None:
    """The framework iterating this loader (probe/frameworks.py), once per loader: where no
    optimizer ever steps (``Trainer.evaluate()`` alone, ``trainer.validate()``) the first
    step's ``model`` event never names it, and a stall there was told to build a
    ``DataLoader(...)`` a Trainer user never writes."""
    try:
        return detect(frame)
    except Exception:
        return None
