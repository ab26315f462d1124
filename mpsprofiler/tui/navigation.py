"""The TUI's moves between panels and ranks: number keys, tab, ``r`` / ``R``, scrolling.

Split from the app (``tui/app.py``) as a mixin, in the style of :mod:`.patch_key` and
:mod:`.experiment`: these actions only choose *what* is shown (the active tab, the rank in
``RunState``) and ask the app to redraw; drawing stays the app's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TabbedContent

from .messages import ShowFinding, ShowRank
from .panels import PANEL_IDS, SCROLL_TARGET
from .widgets.findings import FindingsPanel

if TYPE_CHECKING:
    from textual.app import App

    from .state import RunState

    _AppBase = App[None]
else:
    _AppBase = object


class NavigationMixin(_AppBase):
    """Mixed into the app: panel and rank actions (needs ``state``, ``_hidden_panels`` and
    ``_redraw`` of :class:`~mpsprofiler.tui.app.MpsprofApp`)."""

    state: RunState
    _hidden_panels: set[str]

    if TYPE_CHECKING:  # the app's own, used here

        def _redraw(self, force: bool = False) -> None: ...

    def on_show_finding(self, message: ShowFinding) -> None:
        self.action_panel("findings")
        self.query_one(FindingsPanel).select_rule(message.rule)

    def on_show_rank(self, message: ShowRank) -> None:
        self.action_show_rank(message.rank)

    # -- panels -----------------------------------------------------------------------
    def action_panel(self, pid: str) -> None:
        if pid in self._hidden_panels:
            self.notify("Single process: no ranks to compare (run with --nproc-per-node N).", severity="warning")
            return
        self.query_one(TabbedContent).active = pid

    def _step_panel(self, delta: int) -> None:
        tabs = self.query_one(TabbedContent)
        shown = [pid for pid in PANEL_IDS if pid not in self._hidden_panels]
        index = shown.index(tabs.active) if tabs.active in shown else 0
        tabs.active = shown[(index + delta) % len(shown)]

    def action_next_panel(self) -> None:
        self._step_panel(1)

    def action_previous_panel(self) -> None:
        self._step_panel(-1)

    def action_scroll_panel(self, how: str) -> None:
        """Scroll the shown panel's pane (the finding's detail, the log, a table)."""
        pid = self.query_one(TabbedContent).active
        selector = SCROLL_TARGET.get(pid)
        if not selector:
            return
        pane = self.query_one(f"#panel-{pid}").query(selector).first()
        scroll = {"page_down": pane.scroll_page_down, "page_up": pane.scroll_page_up, "home": pane.scroll_home,
                  "end": pane.scroll_end, "down": pane.scroll_down, "up": pane.scroll_up}.get(how)
        if scroll is not None:
            scroll(animate=False)

    # -- ranks ------------------------------------------------------------------------
    def action_next_rank(self) -> None:
        self._step_rank(1)

    def action_previous_rank(self) -> None:
        self._step_rank(-1)

    def _step_rank(self, delta: int) -> None:
        if not self.state.distributed:
            self.notify("Single process: there is only one rank.", severity="warning")
            return
        self.state.step_rank(delta)
        self._redraw(force=True)

    def action_show_rank(self, rank: int | None) -> None:
        """Every per-run panel draws ``rank`` (None or the primary rank: the job view)."""
        if not self.state.select_rank(rank):
            self.notify(f"Rank {rank} has not reported yet.", severity="warning")
            return
        self._redraw(force=True)
