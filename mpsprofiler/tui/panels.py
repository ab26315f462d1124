"""The panels in tab order: (id, title, widget class). Number keys follow this order."""

from __future__ import annotations

from .widgets.data import DataPanel
from .widgets.environment import EnvironmentPanel
from .widgets.findings import FindingsPanel
from .widgets.log_panel import LogPanel
from .widgets.memory import MemoryPanel
from .widgets.ops import OpsPanel
from .widgets.overview import OverviewPanel
from .widgets.ranks import RanksPanel
from .widgets.warnings import WarningsPanel

PANELS = (
    ("overview", "Overview", OverviewPanel),
    ("findings", "Findings", FindingsPanel),
    ("ops", "Ops", OpsPanel),
    ("memory", "Memory", MemoryPanel),
    ("data", "Data", DataPanel),
    ("log", "Log", LogPanel),
    ("environment", "Environment", EnvironmentPanel),
    ("warnings", "Warnings", WarningsPanel),
    ("ranks", "Ranks", RanksPanel),
)
PANEL_IDS = tuple(p[0] for p in PANELS)
DISTRIBUTED_ONLY = frozenset({"ranks"})
"""Panels hidden for a single-process run (their tab shows once a second rank reports)."""

FOCUS_TARGET = {
    "findings": "#fd-list",
    "ops": "#ops-table",
    "data": "#data-steps",
    "log": "#log-output",
    "ranks": "#ranks-table",
}
"""The widget that takes the keyboard when a panel opens (the rest need no focus)."""
