"""The mpsprof TUI: live panels around a running script, and ``mpsprof view`` of a recording.

Data flow (one way, one thread owns each thing):

* the controller's reader thread gets event batches (~250 ms) and puts them in an
  :class:`~.inbox.EventInbox`, posting one :class:`~.messages.EventsArrived` at a time;
* thread workers wait for the child (``RunStarted`` / ``RunEnded``) and tail its
  ``output.log`` (``OutputArrived``, ~250 ms); they only post messages;
* the UI thread drains the inbox into the :class:`~mpsprofiler.session.Session`, re-runs
  the diagnosis about once a second and redraws once a second (``REDRAW_EVERY``; a key
  redraws at once), only what changed and only the visible panel.

A recorded run goes through the same session and the same panels, without the workers.
A distributed run has one session per rank: ``r`` / ``R`` (or a click on the rank badge
in the header) pick the rank every per-run panel draws; findings stay job-wide, and the
Ranks panel (``9``, distributed runs only) compares the ranks.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from ..launcher.child import RunSpec
from ..results import Finished, Results, build_results, finish_run
from ..rundir import OUTPUT_FILE
from ..session.session import Session
from .experiment import TryFixMixin
from .live import STOP_GRACE, LiveRun, outlive_app_crash
from .navigation import NavigationMixin
from .panels import (
    DISTRIBUTED_ONLY,
    FOCUS_TARGET,
    KEY_RANGE,
    PANEL_IDS,
    PANEL_KEYS,
    PANELS,
    tab_label,
    tab_labels,
)
from .patch_key import PatchFixMixin
from .screens.confirm import ConfirmQuitScreen
from .screens.help import HelpScreen
from .state import RunState
from .widgets.findings import FindingsPanel
from .widgets.header import RunHeader
from .widgets.log_panel import LogPanel

if TYPE_CHECKING:
    from ..diagnosis.findings import Finding
    from ..diagnosis.rules import RuleError
    from ..session.recording import LoadedRun

REDRAW_EVERY = 1.0
"""Seconds between redraws of the header and the visible panel while live: each redraw
costs the terminal a screen update, and the figures need no more (keys redraw at once)."""
PANEL_EVERY = REDRAW_EVERY
DIAGNOSE_EVERY = 1.0
DIAGNOSE_SHARE = 0.015
"""Share of one core the live diagnosis may take: it re-runs after DIAGNOSE_EVERY, or
after its own CPU time / DIAGNOSE_SHARE when that is longer. Early on (few samples) it
takes milliseconds and runs every second, so first findings come as soon as before; on
a long run its trend statistics (pairwise over up to a few hundred samples) cost tens
of ms and it backs off to every few seconds, while the figures change as slowly."""
DIAGNOSE_MAX_EVERY = 10.0
SCROLL_KEYS = (("pagedown", "page_down"), ("pageup", "page_up"), ("home", "home"), ("end", "end"),
               ("down", "down"), ("up", "up"), ("j", "down"), ("k", "up"))
"""Keys that scroll the shown panel's pane (see ``panels.SCROLL_TARGET``)."""
RANK_ACTIONS = frozenset({"next_rank", "previous_rank", "show_rank"})
PANEL_ACTIONS = frozenset({"panel", "next_panel", "previous_panel", "copy_fix", "export", "stop", "explain",
                           "try_fix", "patch_fix", "scroll_panel"}) | RANK_ACTIONS


class MpsprofApp(NavigationMixin, PatchFixMixin, TryFixMixin, LiveRun, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "mpsprof"
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    BINDINGS = [
        Binding(PANEL_KEYS[PANELS[0].id], f"panel('{PANELS[0].id}')", "Panels", key_display=KEY_RANGE),
        *(Binding(PANEL_KEYS[p.id], f"panel('{p.id}')", p.label, show=False) for p in PANELS[1:]),
        Binding("tab", "next_panel", "Next panel", show=False, priority=True),
        Binding("shift+tab", "previous_panel", "Previous panel", show=False, priority=True),
        Binding("r", "next_rank", "Rank"),
        Binding("R", "previous_rank", "Previous rank", show=False),
        Binding("c", "copy_fix", "Copy fix"),
        Binding("e", "export", "Export"),
        Binding("t", "try_fix", "Try fix"),
        Binding("p", "patch_fix", "Patch", show=False),  # in the palette and the README (footer kept)
        Binding("s", "stop", "Stop"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark", "help", "Help", key_display="?"),
        # scrolling: tried when the widget with the keyboard does not take the key itself
        # (the Findings list keeps ↑ ↓ for picking; its detail pane scrolls)
        *(Binding(key, f"scroll_panel('{how}')", show=False) for key, how in SCROLL_KEYS),
        # tried only when the binding of the same key above cannot run now: say why
        *(Binding(key, f"explain('{action}')", show=False) for key, action in (("r", "rank"), ("R", "rank"), ("s", "stop"))),
    ]

    def __init__(
        self,
        session: Session,
        rule_dirs: Iterable[Path] = (),
        *,
        spec: RunSpec | None = None,
        run_dir: Path | None = None,
        notes: str = "",
        results: Results | None = None,
    ) -> None:
        super().__init__()
        self.rule_dirs = [Path(d) for d in rule_dirs]
        self.session = session
        self.spec = spec
        self.state = RunState(session, live=spec is not None, run_dir=run_dir, notes=notes)
        torchrun = getattr(spec, "torchrun", None) if spec is not None else None
        self.state.expected_ranks = int(getattr(torchrun, "nproc", 0) or 0)
        self.results = results
        self._init_live()
        self._tracker: Any = None
        self._drawn: dict[str, tuple[object, ...]] = {}
        self._last_panel_draw = 0.0
        self._last_diagnosis = 0.0
        self._diagnose_every = DIAGNOSE_EVERY
        self._diagnose_cost = 0.0
        self._diagnosed_version = -1
        self._hidden_panels: set[str] = set()
        self._panel_errors: set[str] = set()
        if results is not None:
            self._set_findings(results.findings, results.rule_errors)

    # -- layout -------------------------------------------------------------------
    def get_driver_class(self) -> Any:
        """Textual's own driver, except on Linux / macOS: there one whose screen writes
        survive a closed terminal (see :mod:`.driver`)."""
        driver = super().get_driver_class()
        from textual.drivers.linux_driver import LinuxDriver

        if driver is LinuxDriver:
            from .driver import SafeLinuxDriver

            return SafeLinuxDriver
        return driver

    def compose(self) -> ComposeResult:
        yield RunHeader()
        with TabbedContent(id="panels", initial="overview"):
            for panel in PANELS:
                with TabPane(tab_label(panel), id=panel.id):
                    yield panel.widget(id=f"panel-{panel.id}")
        yield Footer()

    def on_mount(self) -> None:
        self.state.output = self.query_one(LogPanel).output.buffer
        self._sync_panel_tabs()
        self._install_signal_handlers()
        if self.state.live:
            self._tick_timer = self.set_interval(REDRAW_EVERY, self._tick)
            self._run_child()
        else:
            self._open_recorded_log()
            if self.state.notes:
                self.notify(f"Recording: {self.state.notes}; showing what is valid.", severity="warning", timeout=8)
            self.show_stored_experiments()
        self._redraw(force=True)

    def _open_recorded_log(self) -> None:
        panel = self.query_one(LogPanel)
        run_dir = self.state.run_dir
        if run_dir is None or not panel.load_file(run_dir / OUTPUT_FILE):
            panel.show_missing(self.state)

    # -- redrawing ------------------------------------------------------------------
    def _tick(self) -> None:
        now = time.monotonic()
        if self.session.version != self._diagnosed_version and now - self._last_diagnosis >= self._diagnose_every:
            cpu = time.thread_time()
            self._diagnose()
            self._last_diagnosis = now
            # the lower of the last two costs: the first one also loads and compiles the rules
            cost, self._diagnose_cost = min(self._diagnose_cost, time.thread_time() - cpu), time.thread_time() - cpu
            self._diagnose_every = min(DIAGNOSE_MAX_EVERY, max(DIAGNOSE_EVERY, cost / DIAGNOSE_SHARE))
        # the timer fires every REDRAW_EVERY with some jitter: a strict ">=" would skip
        # every other tick and halve the panel's rate
        self._redraw(force=now - self._last_panel_draw >= 0.8 * PANEL_EVERY)

    def _diagnose(self) -> None:
        from ..diagnosis import diagnose

        self._diagnosed_version = self.session.version
        try:
            diagnosis = diagnose(self.session, self.rule_dirs, provisional=self.state.running)
        except Exception as exc:  # noqa: BLE001 - a rule bug must not take the view down
            self.log.error(f"diagnosis failed: {exc!r}")
            return
        if self._tracker is None:
            from ..diagnosis.findings import FindingTracker

            self._tracker = FindingTracker()
        self._tracker.update(diagnosis.findings)
        self._set_findings(self._tracker.findings, diagnosis.rule_errors)

    def _set_findings(self, findings: Sequence[Finding], rule_errors: Sequence[RuleError | str]) -> None:
        self.state.findings = list(findings)  # a crash no rule explains is one (diagnosis/crash_finding.py)
        self.state.rule_errors = list(rule_errors)
        self.state.findings_version += 1

    def _sync_panel_tabs(self) -> None:
        """Distributed-only panels: hidden until a second rank reports (or torchrun is
        asked for several), then shown for good."""
        tabs = self.query_one(TabbedContent)
        hide = set() if self.state.distributed else set(DISTRIBUTED_ONLY)
        if hide == self._hidden_panels:
            return
        for pid in hide - self._hidden_panels:
            tabs.hide_tab(pid)
        for pid in self._hidden_panels - hide:
            tabs.show_tab(pid)
        self._hidden_panels = hide
        self.refresh_bindings()

    def _redraw(self, force: bool = False) -> None:
        """Header always (cheap); the visible panel when its data changed."""
        title = f"mpsprof · {self.session.script}"
        if self.title != title:
            self.title = title
        self._sync_panel_tabs()
        self.query_one(RunHeader).update_state(self.state)
        tabs = self.query_one(TabbedContent)
        self._sync_tab_labels()
        if force:
            self._draw_panel(tabs.active)
            self._last_panel_draw = time.monotonic()

    def _sync_tab_labels(self) -> None:
        """Tab labels that fit the terminal's width (short ones at 80 columns)."""
        tabs = self.query_one(TabbedContent)
        shown = [pid for pid in PANEL_IDS if pid not in self._hidden_panels]
        for pid, label in tab_labels(self.size.width, shown, {"findings": len(self.state.findings)}).items():
            tab = tabs.get_tab(pid)
            if str(tab.label) != label:
                tab.label = label

    def on_resize(self) -> None:
        self._sync_tab_labels()

    def _draw_panel(self, pid: str) -> None:
        if not pid:
            return
        output = self.state.output.changes if self.state.output is not None else 0
        key = (self.session.version, self.state.view_key, self.state.findings_version, output)
        if self._drawn.get(pid) == key:
            return
        self._drawn[pid] = key
        try:
            self.query_one(f"#panel-{pid}").update_state(self.state)  # type: ignore[attr-defined]
        except Exception as exc:  # noqa: BLE001 - a value a panel cannot draw must not end the app
            self.log.error(f"panel {pid} failed: {exc!r}")
            if pid not in self._panel_errors:
                self._panel_errors.add(pid)
                self.notify(f"The {pid} panel cannot draw a recorded value ({type(exc).__name__}: {exc}); "
                            "the rest of the app works.", severity="warning", timeout=10)

    def notify(self, message: str, *, title: str = "", severity: Any = "information", timeout: float | None = None,
               markup: bool = False) -> None:
        """Notifications quote the script's text (crash messages, paths): never markup."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        pid = event.pane.id or ""
        self._draw_panel(pid)
        target = FOCUS_TARGET.get(pid)
        if target:
            self.query_one(target).focus()

    # -- actions ----------------------------------------------------------------------
    def selected_finding(self) -> Finding | None:
        return self.query_one(FindingsPanel).selected if self.state.findings else None

    def action_copy_fix(self) -> None:
        finding = self.selected_finding()
        if finding is None:
            self.notify("No finding to copy a fix from.", severity="warning")
            return
        from .copy_fix import copy_message, fix_to_copy, save_fix

        text = fix_to_copy(finding.fix)  # the code blocks: what is pasted into the script
        self.copy_to_clipboard(text)
        saved, error = save_fix(self.state.run_dir, finding.rule, text)
        self.notify(copy_message(finding.title, text.strip() != finding.fix.strip(), saved, error),
                    title="Sent to the terminal's clipboard (OSC 52)", timeout=10)

    def action_export(self) -> None:
        from .export import export_reports

        results = self.results if self.results is not None and not self.state.running else None
        if results is None:
            results = build_results(self.session, self.rule_dirs, self.state.run_dir)
        run_dir = self.state.run_dir or (self.spec.run_dir if self.spec is not None else None)
        written, error = export_reports(self.session, results, run_dir)
        if error:
            self.notify(error, severity="error", title="Export failed", timeout=10)
        if written:
            self.notify("\n".join(str(p) for p in written), title="Report written", timeout=10)

    def action_explain(self, action: str) -> None:
        """A key whose action cannot run now: a note instead of silence."""
        if action == "rank":
            self.notify("Single process: there is only one rank (r and R switch ranks of a distributed run).",
                        severity="warning")
        elif action == "stop":
            self.action_stop()

    def action_stop(self) -> None:
        if self.controller is None:
            self.notify("A recorded run: there is no script to stop.", severity="warning")
            return
        if not self.state.running:
            self.notify(f"Nothing to stop: the script has already {self.state.status_text()}.", severity="warning")
            return
        if self.state.stopping:
            self.notify("Already stopping: q twice kills it at once.", severity="warning")
            return
        self._stop_child()

    def _stop_child(self) -> None:
        assert self.controller is not None
        self.state.stopping = True
        self.controller.stop(grace=STOP_GRACE)
        self.notify("Stopping the script (Ctrl-C; terminate after 5 s)…", title="stopping…")
        self._redraw()

    async def action_quit(self) -> None:
        self.stop_experiment()
        if self.controller is None or not self.state.running:
            self.exit()
            return
        if self._quit_when_ended:
            self.notify("Killing the script now.", severity="warning")
            self.controller.send_signal(signal.SIGKILL)
            return
        self.push_screen(ConfirmQuitScreen(self.session.script), self._confirmed_quit)

    def _confirmed_quit(self, yes: bool | None) -> None:
        if not yes:
            return
        if not self.state.running:
            self.exit()
            return
        self._quit_when_ended = True
        if not self.state.stopping:
            self._stop_child()

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out what cannot be done now (the footer shows it dimmed); over a dialog
        (help, quit, the command palette) the panel keys belong to the dialog."""
        if action in PANEL_ACTIONS and self.screen is not self.screen_stack[0]:
            return False
        if action == "stop":
            return True if (self.controller is not None and self.state.running) else None
        if action in ("copy_fix", "patch_fix"):
            return True if self.state.findings else None
        if action == "try_fix":  # dimmed while the script runs (the experiment runs it again)
            return True if self.state.findings and not self.state.running else None
        if action in RANK_ACTIONS:
            return self.state.distributed  # False: not even shown in the footer
        return True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for panel in PANELS:
            if panel.id not in self._hidden_panels:
                yield SystemCommand(f"Panel: {panel.label}", f"Show the {panel.label} panel (key {PANEL_KEYS[panel.id]})",
                                    lambda p=panel.id: self.action_panel(p))
        if self.state.distributed:
            primary = self.session.primary_rank
            yield SystemCommand(f"Rank: job (rank {primary})", f"Every panel shows the job: rank {primary}'s figures, any rank's crash (r)",
                                lambda: self.action_show_rank(None))
            for rank in sorted(self.session.ranks):
                if rank != primary:
                    yield SystemCommand(f"Rank: {rank}", f"Every per-run panel shows rank {rank} (r / R cycle)",
                                        lambda r=rank: self.action_show_rank(r))
        yield SystemCommand("Copy fix", "Copy the selected finding's fix to the clipboard (c)", self.action_copy_fix)
        yield SystemCommand("Try fix", "A/B runs of the script with the selected finding's fix (t)",
                            self.action_try_fix)
        yield SystemCommand("Patch fix", "The selected finding's fix as a diff of the script (p)", self.action_patch_fix)
        yield SystemCommand("Export report", "Write report.md and report.html into the run directory (e)", self.action_export)
        if self.controller is not None and self.state.running:
            yield SystemCommand("Stop the script", "Ctrl-C the script, terminate it after 5 s (s)", self.action_stop)
        yield SystemCommand("Help", "Keys and panels (?)", self.action_help)

# -- entry points (called by the CLI) ---------------------------------------------------
def run_tui(spec: RunSpec, rule_dirs: list[Path]) -> tuple[int, Session, Finished]:
    """Run the script under the live TUI; returns its exit status, the session, the finished
    run (the caller prints its summary once the terminal is back)."""
    # a copy: the caller's spec is left as it is. At a terminal, input() and breakpoint()
    # borrow it (probe/terminal.py)
    spec = dataclasses.replace(spec, capture_output=True,
                               options=spec.options.with_changes(terminal_loan=_at_terminal()))
    session = Session()
    app = MpsprofApp(session, rule_dirs, spec=spec, run_dir=spec.run_dir)
    try:
        app.run()
        outlive_app_crash(app)
    finally:
        if app.controller is not None and not app.ended.is_set():
            app.controller.stop(grace=STOP_GRACE)
        app.ended.wait(timeout=30.0)
    leftover = app.inbox.drain()  # events that arrived after the app closed
    if leftover:
        session.feed_many(leftover)
    finished = app.finished
    if finished is None or leftover:  # the app left early, or events came after its last look
        finished = finish_run(session, rule_dirs, spec.run_dir, app.recording_error())
    code = app.returncode if app.returncode is not None else 1
    return code, session, finished


def _at_terminal() -> bool:
    import os
    import sys

    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False


def view_tui(loaded: LoadedRun, rule_dirs: list[Path]) -> None:
    """Open a recorded run (``mpsprof view``) in the same app."""
    app = recorded_app(loaded, rule_dirs)
    try:
        app.run()
    finally:
        app.stop_experiment()


def recorded_app(loaded: LoadedRun, rule_dirs: Iterable[Path] = ()) -> MpsprofApp:
    results = build_results(loaded.session, list(rule_dirs), loaded.run_dir)
    return MpsprofApp(loaded.session, rule_dirs, run_dir=loaded.run_dir, notes=loaded.notes, results=results)
