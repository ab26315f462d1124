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
    short: str = ""
    """The tab's label where the full ones do not fit (80 columns); empty: the label."""
    tiny: str = ""
    """Shorter still, where the short ones do not fit either (80 columns and the Ranks tab)."""
    scroll: str | None = None
    """The pane the scrolling keys move (PageUp/PageDown/Home/End, arrows, j/k) when the
    widget with the keyboard does not take them itself; None: nothing scrolls."""


_PANELS = (
    Panel("overview", "Overview", OverviewPanel, tiny="Over"),
    Panel("findings", "Findings", FindingsPanel, focus="#fd-list", scroll="#fd-detail", tiny="Find",
          help="**Findings:** `↑` `↓` pick a finding; its evidence and fix show on the right: `pgdn` `pgup`\n"
               "`home` `end` `j` `k` scroll it, `→` moves the arrows into it and `←` back to the list."),
    Panel("ops", "Ops", OpsPanel, focus="#ops-table", scroll="#ops-table",
          help="**Ops:** click a column header or press `o` to sort; `f` shows problems only / all ops."),
    Panel("memory", "Memory", MemoryPanel, short="Mem"),
    Panel("data", "Data", DataPanel, focus="#data-steps", scroll="#data-steps"),
    Panel("log", "Log", LogPanel, focus="#log-output", scroll="#log-output",
          help="**Log:** scroll up to stop following; `end` follows again. The mouse works everywhere."),
    Panel("environment", "Environment", EnvironmentPanel, short="Env", scroll="VerticalScroll"),
    Panel("warnings", "Warnings", WarningsPanel, short="Warn", scroll="VerticalScroll"),
    Panel("ranks", "Ranks", RanksPanel, focus="#ranks-table", distributed_only=True, scroll="#ranks-table",
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
SCROLL_TARGET = {p.id: p.scroll for p in PANELS if p.scroll}
"""The pane of each panel that the scrolling keys move (see :attr:`Panel.scroll`)."""
FOCUS_TARGET = {p.id: p.focus for p in PANELS if p.focus}
"""The widget that takes the keyboard when a panel opens (the rest need no focus)."""


def tab_label(panel: Panel) -> str:
    return f"{PANEL_KEYS[panel.id]} {panel.label}"


TAB_PADDING = 2
"""Cells around each tab's label (Textual's ``Tab { padding: 0 1 }``)."""


def tab_labels(width: int, shown: list[str], counts: dict[str, int]) -> dict[str, str]:
    """Each shown panel's tab label for a terminal ``width`` columns wide: the full labels
    when they fit, else the short ones (``4 Mem``, ``7 Env``), else the tiny ones (``1 Over``),
    then with the counts cut to the number. Nothing is cut mid-word ("8 Wa" at 80 columns)."""
    panels = [p for p in PANELS if p.id in shown]

    def label(p: Panel, name: str, count: bool) -> str:
        n = counts.get(p.id)
        suffix = (f" ({n})" if count else f" {n}") if n else ""
        return f"{PANEL_KEYS[p.id]} {name}{suffix}"

    choices = [{p.id: label(p, p.label, True) for p in panels},
               {p.id: label(p, p.short or p.label, True) for p in panels},
               {p.id: label(p, p.tiny or p.short or p.label, True) for p in panels},
               {p.id: label(p, p.tiny or p.short or p.label, False) for p in panels}]
    for labels in choices:
        if sum(len(text) + TAB_PADDING for text in labels.values()) <= width:
            return labels
    return choices[-1]


def help_keys_row() -> str:
    """The help screen's table row for the number keys."""
    first, last = NUMBER_KEYS[0], NUMBER_KEYS[len(PANELS) - 1]
    return f"| `{first}` … `{last}` | switch panel: {', '.join(p.label for p in PANELS)} |"


def help_notes() -> str:
    """The help screen's notes on each panel's own keys, one paragraph line per panel."""
    return "\n".join(p.help for p in PANELS if p.help)
