"""The live half of the app: start the script, read its events and output, end cleanly.

Three threads feed the UI and touch nothing of it: the controller's reader (events, in
~250 ms batches, through the :class:`~.inbox.EventInbox`), the child waiter and the
output tail (thread workers). Each only posts a message from :mod:`.messages`; the
handlers here run on the UI thread and are the only code that feeds the session.
"""

from __future__ import annotations

import asyncio
import codecs
import signal
import threading
import time
from typing import TYPE_CHECKING, Any

from textual import work
from textual.worker import get_current_worker

from ..launcher.child import RunController
from ..launcher.output import OutputRelay
from ..launcher.signals import catchable, forwardable, install
from ..results import Finished, Results, finish_run
from .driver import TerminalGone
from .inbox import EventInbox
from .messages import EventsArrived, OutputArrived, OutputCopyFailed, RunEnded, RunFailed, RunStarted, TerminalWanted
from .state import RunState
from .terminal_loan import TerminalLender
from .widgets.log_panel import LogPanel

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from textual.app import App

    from ..diagnosis.findings import Finding
    from ..diagnosis.rules import RuleError
    from ..launcher.child import RunSpec
    from ..session.session import Session

    _AppBase = App[None]  # the app this is mixed into, for the type checker only
    from ..events import Event
else:
    _AppBase = object

TICK = 0.25
"""Seconds between the controller's event batches and between output reads (the view
itself redraws every ``app.REDRAW_EVERY``)."""
STOP_GRACE = 5.0
EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)
"""Signals to mpsprof itself (``kill PID``): passed on to the script, as headless mode
does; the app leaves once the script has ended. SIGINT is passed on once per signal and
never escalated (under python, ``kill -INT`` is one KeyboardInterrupt the script may
catch); SIGTERM / SIGHUP are followed by SIGKILL if the script outlives them by 10 s."""


class LiveRun(_AppBase):
    """Mixed into :class:`~.app.MpsprofApp`; inert for a recorded run (no controller)."""

    spec: RunSpec | None
    controller: RunController | None
    state: RunState
    results: Results | None
    finished: Finished | None
    session: Session
    rule_dirs: list[Path]

    if TYPE_CHECKING:  # the app's own, used here

        def _set_findings(self, findings: Sequence[Finding], rule_errors: Sequence[RuleError | str]) -> None: ...

        def _redraw(self, force: bool = False) -> None: ...

    def _init_live(self) -> None:
        self.inbox: EventInbox[Event] = EventInbox()
        self.controller = None
        self.lender = TerminalLender(self)
        if self.spec is not None:
            self.controller = RunController(self.spec, self._on_controller_events, batch_interval=TICK)
            self.controller.on_terminal = lambda want: self.post_message(TerminalWanted(want))
        self.returncode: int | None = None
        self.ended = threading.Event()
        """Set once the child has exited (or could not start): safe to read from any thread."""
        self.finished = None
        """Set by :meth:`_finish_run` once the script has ended."""
        self._quit_when_ended = False
        self._tail_done = threading.Event()
        """Set once the output tail should read what is left and stop (it also wakes it)."""
        self._tick_timer: Any = None
        self._signals: list[int] = []

    # -- live run: workers (they only post messages) ---------------------------------
    def _on_controller_events(self, batch: list[Event]) -> None:
        """Called on the controller's reader thread."""
        if self.inbox.put(batch):
            self.post_message(EventsArrived())

    @work(thread=True, exclusive=True, exit_on_error=False, group="child")
    def _run_child(self) -> None:
        controller = self.controller
        assert controller is not None
        try:
            controller.start()
        except OSError as exc:
            self.returncode = 1
            self.ended.set()
            self.post_message(RunFailed(f"{exc.strerror or exc}"))
            return
        assert controller.process is not None
        if controller.output is not None:
            controller.output.on_error = lambda error: self.post_message(OutputCopyFailed(error))
        self.post_message(RunStarted(controller.output_path))
        code = controller.wait()
        self.returncode = code
        self.ended.set()
        self.post_message(RunEnded(code))

    @work(thread=True, exclusive=True, exit_on_error=False, group="tail")
    def _tail_output(self, relay: OutputRelay) -> None:
        """Hand what the relay read to the view, at most every TICK."""
        worker = get_current_worker()
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        while not worker.is_cancelled:
            finishing = self._tail_done.is_set()
            if finishing:
                relay.wait(1.0)  # the last bytes of a script that just ended
            data, skipped = relay.take()
            text = decoder.decode(data, final=finishing)
            if text or skipped:
                self.post_message(OutputArrived(text, skipped))
            if finishing:
                return
            self._tail_done.wait(TICK)

    # -- live run: message handlers (UI thread) ------------------------------------
    def on_events_arrived(self, message: EventsArrived) -> None:
        batch = self.inbox.drain()
        if batch:
            self.session.feed_many(batch)

    def on_run_started(self, message: RunStarted) -> None:
        self.state.started_at = time.monotonic()
        relay = self.controller.output if self.controller is not None else None
        if message.output_path is not None and relay is not None:
            self.query_one(LogPanel).set_path(message.output_path)
            self._tail_output(relay)

    def on_terminal_wanted(self, message: TerminalWanted) -> None:
        self.lender.request(message.want)

    def on_output_copy_failed(self, message: OutputCopyFailed) -> None:
        self.query_one(LogPanel).copy_failed(message.error)
        self.notify(f"{message.error}. The training goes on.", severity="warning", timeout=15)

    def on_output_arrived(self, message: OutputArrived) -> None:
        self.query_one(LogPanel).write(message.text, message.skipped)

    def on_run_failed(self, message: RunFailed) -> None:
        self.state.failed = message.error
        self.notify(f"The script could not be started: {message.error}", severity="error", timeout=10)
        self._finish_run()

    def on_run_ended(self, message: RunEnded) -> None:
        self.lender.take_back()
        self.on_events_arrived(EventsArrived())  # the exit event is in the inbox already
        self._tail_done.set()
        ex = self.session.exit
        if ex is not None and ex.duration is not None:
            self.state.ended_after = float(ex.duration)  # what `mpsprof view` will show
        elif self.state.started_at is not None:
            self.state.ended_after = time.monotonic() - self.state.started_at
        self._finish_run()
        status = self.state.status_text()
        if self._quit_when_ended:
            self.exit()
            return
        crash = self.session.crash
        if self.state.status == "crashed":
            detail = f": {crash.type}: {crash.message[:120]}" if crash else ""
            self.notify(f"The script {status}{detail}", severity="error", timeout=10)
        else:
            self.notify(f"The script {status}. e exports a report, q quits.", timeout=8)

    def _finish_run(self) -> None:
        """Final findings (the same as summary.json and the reports), once."""
        if self._tick_timer is not None:
            self._tick_timer.stop()
        self.finished = finish_run(self.session, self.rule_dirs, self.spec.run_dir if self.spec else None,
                                   self.recording_error())
        self.results = self.finished.results
        self._set_findings(self.results.findings, self.results.rule_errors)
        for problem in (self.finished.diagnosis_error, self.finished.write_error):
            if problem:
                self.notify(problem, severity="error")
        self._redraw(force=True)
        self.refresh_bindings()

    def recording_error(self) -> str | None:
        """Why this live run's recording stopped (then no ``summary.json`` is written)."""
        return self.controller.recorder.error if self.controller is not None else None


    # -- signals to mpsprof itself ------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        """SIGTERM / SIGHUP (a closed terminal) end the app; a running script gets the same
        signal first, as in headless mode, and the app leaves once it has ended."""
        # the others a script may handle (USR1 ...) are passed on and the app stays; one
        # ignored when mpsprof started stays ignored, for the script too (signals.py)
        try:
            loop = asyncio.get_running_loop()
            for sig in [*EXIT_SIGNALS, *(s for s in forwardable() if s not in EXIT_SIGNALS)]:
                if not catchable(sig):
                    continue
                if sig in EXIT_SIGNALS:
                    loop.add_signal_handler(sig, self._on_signal, sig)
                else:
                    loop.add_signal_handler(sig, self._pass_on, sig)
                self._signals.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread
            pass

    def on_terminal_gone(self, message: TerminalGone) -> None:
        """No terminal, SIGHUP ignored: leave once the script has ended (now if it has)."""
        if self.controller is None or not self.state.running:
            self.exit()
        else:
            self._quit_when_ended = True

    def _pass_on(self, signum: int) -> None:
        if self.controller is not None and self.state.running:
            self.controller.forward_signal(signum)

    def _on_signal(self, signum: int) -> None:
        if self.controller is None or not self.state.running:
            self.exit()
            return
        self._quit_when_ended = True
        self.controller.send_signal(signum)
        if signum != signal.SIGINT:
            self.set_timer(2 * STOP_GRACE, lambda: self.controller.send_signal(signal.SIGKILL) if self.controller else None)


    def on_unmount(self) -> None:
        """Leaving for any reason: never leave the script running behind us."""
        try:
            loop = asyncio.get_running_loop()
            for sig in self._signals:
                loop.remove_signal_handler(sig)
        except (RuntimeError, ValueError):
            pass
        self._tail_done.set()
        self.lender.take_back()
        if self.controller is not None and not self.ended.is_set() and self._exception is None:
            self.controller.stop(grace=STOP_GRACE)  # what the dialog says; a crash of the app itself leaves the script running


def outlive_app_crash(app: LiveRun) -> None:
    """The app died of its own bug while the script runs: a bug in mpsprof must not stop
    the training. Say so, show the script's output from here on as plain text, pass on
    every signal headless mode passes on (Ctrl-C, SIGTERM, USR1 ...), and wait for the end."""
    import sys

    controller = app.controller
    if controller is None or app.ended.is_set() or app._exception is None:
        return
    relay = controller.output
    sys.stderr.write(f"mpsprof: the live view failed ({type(app._exception).__name__}); the script goes on, "
                     f"its output follows (also in {controller.output_path}); Ctrl-C stops it\n")
    sys.stderr.flush()
    restore = install(forwardable(), controller.forward_signal)
    try:
        if relay is not None:
            relay.take()  # shown already (or lost with the view); from here on it is echoed
            relay.echo = True
        while not app.ended.wait(0.5):
            pass
    finally:
        restore()
