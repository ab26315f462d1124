"""What the probe says about the process it runs in: ``hello``, ``env`` and ``model``.

Split from the probe (``probe/probe.py``) in the style of ``overrides.py``: these functions
build the fields and are handed ``emit`` / ``fault`` where they send, never the probe.
When each is sent stays the probe's decision:

* ``hello`` first, before any instrument;
* ``env`` twice: at start without torch's facts (the script has not imported torch yet,
  and the probe must not import it for the script), then with them at the first step or
  at exit, whichever comes first (``cuda.is_available()`` reads ``CUDA_VISIBLE_DEVICES``
  once: a script that picks its devices after ``import torch`` gets the ones it picked);
* ``model`` at the first optimizer step, which says the device the training really uses.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .. import events
from ..devices import DeviceBackend
from ..events.payloads import HelloFields, ModelFields
from ..redact import redact_env
from .import_watch import IMPORT_CPU_S


def int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def hello_fields() -> HelloFields:
    """The first event: who is talking (pid, ranks) and in which wire format."""
    return {
        "schema": events.SCHEMA_VERSION,
        "pid": os.getpid(),
        "wall": time.time(),
        "rank": int_env("RANK"),
        "local_rank": int_env("LOCAL_RANK"),
        "world_size": int_env("WORLD_SIZE"),
        "version": _version(),
    }


def emit_environment(emit: Callable[..., None], fault: Callable[[str], None], with_torch: bool) -> None:
    """Send the ``env`` event; without torch's facts unless ``with_torch`` (see above)."""
    from ..environment import collect_environment

    fault("env")
    if with_torch:
        facts = collect_environment()
        facts["pytorch_env"] = redact_env(facts.get("pytorch_env"))  # PYTORCH_HF_TOKEN=*** (redact.py)
        imported = IMPORT_CPU_S.get("torch")
        if imported is not None:  # None: torch was imported before the probe could watch it
            facts["torch_import_cpu_s"] = round(imported, 4)
        emit(events.KIND_ENV, **facts)
        return
    # before the script imports torch: the same facts, torch's left unknown for now
    blocked = "torch" not in sys.modules
    if blocked:
        sys.modules["torch"] = None  # type: ignore[assignment]  # `import torch` fails fast
    try:
        facts = collect_environment()
    finally:
        if blocked and sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]
    facts["pytorch_env"] = redact_env(facts.get("pytorch_env"))
    emit(events.KIND_ENV, **facts)


def model_fields(optimizer: Any, params: list[Any], backend: DeviceBackend, fetched_ahead: int,
                 threads_set: list[Any] | None) -> ModelFields:
    """The ``model`` event of the first optimizer step: ``params`` are the optimizer's
    (not empty), ``backend`` the one of the first parameter's device."""
    device = params[0].device
    dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
    devices = sorted({str(p.device) for p in params})
    model: ModelFields = {
        "device": str(device),
        "device_kind": device.type,
        "device_name": backend.name(),
        "devices": devices,
        "dtypes": dtypes,
        "parameters": int(sum(p.numel() for p in params)),
        "optimizer": type(optimizer).__name__,
        "torch_threads": _torch_threads(),
        "default_dtype": _default_dtype(),
        "framework": _framework(),
        "fetched_ahead": fetched_ahead,
    }
    if threads_set:
        model["threads_set"] = threads_set
    return model


def _version() -> str:
    try:
        from .. import __version__

        return __version__
    except Exception:
        return "?"


def _framework() -> str | None:
    try:
        from .frameworks import detect

        return detect()
    except Exception:
        return None


def _default_dtype() -> str | None:
    """torch's default floating dtype at the first step (``float64`` after the script's
    ``torch.set_default_dtype(torch.float64)``: every new float tensor is float64 then)."""
    try:
        import torch

        return str(torch.get_default_dtype()).replace("torch.", "")
    except Exception:
        return None


def _torch_threads() -> int | None:
    """Threads at the first step: the script may have called torch.set_num_threads."""
    try:
        import torch

        return int(torch.get_num_threads())
    except Exception:
        return None
