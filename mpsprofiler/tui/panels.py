"""The one registry of panels, in tab order; everything else is derived from it.

The app's number keys and tab labels (``1 Overview`` ...), the command palette, the help
screen's key table and panel notes, and the tests' panel lists all read :data:`PANELS`. A new
panel is one widget module under ``widgets/`` plus one :class:`Panel` line here; its number
key is its position (``1`` ... ``9``, then ``0``).
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.widget import Widget

from .widgets.data import DataPanel
from .widgets.environment import EnvironmentPanel
from .widgets.findings import FindingsPanel
from .widgets.log_panel import LogPanel
from .widgets.memory import MemoryPanel
from .widgets.ops import OpsPanel
from .widgets.overview import OverviewPanel
from .widgets.ranks import RanksPanel
from .widgets.warnings import WarningsPanel

NUMBER_KEYS = "1234567890"
"""Panel keys in tab order: a tenth panel gets ``0``."""


@dataclass(frozen=True)
class Panel:
    """One tab: ``id`` (also the TabPane id), ``label``, the widget class, the help screen's
    note about its keys (Markdown; empty: none), the widget that takes the keyboard when it
    opens, and whether it shows only for distributed runs."""

    id: str
    label: str
    widget: type[Widget]
    help: str = ""
    focus: str | None = None
    distributed_only: bool = False


_PANELS = (
    Panel("overview", "Overview", OverviewPanel),
    Panel("findings", "Findings", FindingsPanel, focus="#fd-list",
          help="**Findings:** `↑` `↓` pick a finding; its evidence and fix show on the right."),
    Panel("ops", "Ops", OpsPanel, focus="#ops-table",
          help="**Ops:** click a column header or press `o` to sort; `f` shows problems only / all ops."),
    Panel("memory", "Memory", MemoryPanel),
    Panel("data", "Data", DataPanel, focus="#data-steps"),
    Panel("log", "Log", LogPanel, focus="#log-output",
          help="**Log:** scroll up to stop following; `end` follows again. The mouse works everywhere."),
    Panel("environment", "Environment", EnvironmentPanel),
    Panel("warnings", "Warnings", WarningsPanel),
    Panel("ranks", "Ranks", RanksPanel, focus="#ranks-table", distributed_only=True,
          help="**Ranks** (distributed runs only): every rank side by side, the straggler marked; `enter`\n"
               "on a row shows that rank. The header's rank badge says which rank the panels show (click\n"
               "it for the next); findings and the Log are always the whole job's."),
)  # fmt: skip
if len(_PANELS) > len(NUMBER_KEYS):
    raise ValueError(f"{len(_PANELS)} panels but only {len(NUMBER_KEYS)} number keys")

PANELS: tuple[Panel, ...] = _PANELS
PANEL_IDS = tuple(p.id for p in PANELS)
PANEL_KEYS: dict[str, str] = {p.id: NUMBER_KEYS[i] for i, p in enumerate(PANELS)}
"""Panel id -> its number key."""
KEY_RANGE = f"{NUMBER_KEYS[0]}-{NUMBER_KEYS[len(PANELS) - 1]}"
"""What the footer shows for the number keys (``1-9``)."""
DISTRIBUTED_ONLY = frozenset(p.id for p in PANELS if p.distributed_only)
"""Panels hidden for a single-process run (their tab shows once a second rank reports)."""
FOCUS_TARGET = {p.id: p.focus for p in PANELS if p.focus}
"""The widget that takes the keyboard when a panel opens (the rest need no focus)."""


def tab_label(panel: Panel) -> str:
    return f"{PANEL_KEYS[panel.id]} {panel.label}"


def help_keys_row() -> str:
    """The help screen's table row for the number keys."""
    first, last = NUMBER_KEYS[0], NUMBER_KEYS[len(PANELS) - 1]
    return f"| `{first}` … `{last}` | switch panel: {', '.join(p.label for p in PANELS)} |"


def help_notes() -> str:
    """The help screen's notes on each panel's own keys, one paragraph line per panel."""
    return "\n".join(p.help for p in PANELS if p.help)
