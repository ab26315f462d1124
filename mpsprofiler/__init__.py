"""mpsprof: a terminal profiler and troubleshooting assistant for PyTorch training.

Scripts run under ``mpsprof run`` unchanged. The one call a script may add is
:func:`step`, to mark step boundaries in loops that use neither ``torch.optim`` nor a
DataLoader; outside mpsprof it does nothing.
"""

from __future__ import annotations

import sys

__version__ = "0.1.0"

__all__ = ["__version__", "step"]


def step() -> None:
    """Mark the end of a training step (custom loops). A no-op when not profiled.

    The probe is looked up, not imported: a profiled run loaded it before the script's first
    line, and a plain run has none (and need not pay for importing it)."""
    module = sys.modules.get("mpsprofiler.probe.probe")
    probe = module.active() if module is not None else None
    if probe is not None:
        probe.mark_step()
