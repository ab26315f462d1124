"""Start the training script in a child process with the probe, and watch it.

The child is the same interpreter running the script compiled to start the probe itself
(start_code.py), or :mod:`mpsprofiler.probe.boot` through a start program. Its events come
back over a private pipe (an inherited fd: nothing is listening on any port), which a
reader thread (:mod:`.reader`) decodes, records and hands to ``on_events`` in batches. The child's
stdin/stdout/stderr are the parent's own in headless mode (output passes through
untouched, and a dead parent cannot block it); in TUI mode stdout and stderr are a pipe
that :class:`~.output.OutputRelay` copies to ``RUN_DIR/output.log`` and to the view (a
full disk costs the copy, never the script's prints).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .. import events
from ..events.payloads import ExitFields, RunFields
from ..redact import is_secret_name, redact_argv, secret_values
from ..rundir import OUTPUT_FILE, open_new
from . import env_digest
from .distributed import FifoChannels, TorchrunPlan
from .exit_wait import wait_awake
from .foreground import ForegroundTerminal
from .group import holder_or_none, inherited_fds, leader_kwargs, pgid_of
from .options import ProbeOptions
from .others import OtherPrograms
from .output import OutputRelay
from .reader import EventReader
from .recorder import Recorder
from .signals import JOB_SIGNALS, TERMINAL_SIGNALS, forwardable
from .start_code import compile_script, remove_compiled, start_program

EventSink = Callable[[list[events.Event]], None]


@dataclass
class RunSpec:
    """What to run and how."""

    target: str
    args: list[str] = field(default_factory=list)
    module: bool = False
    run_dir: Path | None = None
    capture_output: bool = False
    options: ProbeOptions = field(default_factory=ProbeOptions)
    torchrun: TorchrunPlan | None = None
    """Distributed: launch through torch.distributed.run with the probe in every rank."""
    env: dict[str, str] = field(default_factory=dict)
    """``--set env.NAME=VALUE``: variables set for the script (validated names only)."""
    cwd: Path | None = None
    """Where the script runs (``--cwd``); None: the current directory."""

    def display_name(self) -> str:
        return ("-m " + self.target) if self.module else self.target

    def child_argv(self, compiled: str | None = None) -> list[str]:
        """``python COMPILED ARGS`` (start_code.py), else ``python START_PROGRAM [-m] TARGET ARGS``;
        torchrun gets the same words after its options: ranks start as a single run does."""
        target = [compiled] if compiled else [start_program(), *(["-m", self.target] if self.module else [self.target])]
        if self.torchrun is not None:
            return self.torchrun.argv(target)
        return [sys.executable, *target, *self.args]


CLOSED_BEFORE_EXIT_S = 0.25
"""An event pipe that ended this long before the process did was closed by the script,
which ran on (``os.closerange``). One that ends as the process exits is the exit itself:
``os._exit(0)`` skips the probe's atexit flush and the kernel closes the pipe a moment
before the exit status can be read (the reader saw the process still alive). Telling that
run "the script closed mpsprof's event channel" blamed something the script never did.
The wait sees the exit at once (``exit_wait.py``; where it polls, within 50 ms); a script
that closes the channel and still has a step to run lives on far longer."""

REPEAT_WINDOW_S = 0.1
"""The same signal again within this is the same event: GNU ``timeout`` sends its signal to
mpsprof and then to mpsprof's process group, 0.3 ms apart. The kernel merges the two for
python (a standard signal pending once), so ``timeout -s TERM 60 python train.py`` gets one
SIGTERM; passed on one by one, the script got two, and a script that takes a second SIGTERM
for "abort now" skipped its checkpoint."""


class RunController:
    """One profiled run: start, read events, stop on request, wait for the end."""

    def __init__(self, spec: RunSpec, on_events: EventSink, batch_interval: float = 0.05) -> None:
        self.spec = spec
        self._on_events = on_events
        self.recorder = Recorder(spec.run_dir)
        self.process: subprocess.Popen[bytes] | None = None
        self.output_path: Path | None = None
        self.output: OutputRelay | None = None
        self.on_terminal: Callable[[bool], object] | None = None
        """TUI mode: the script asks for the terminal (True) or is done with it (False)."""
        self._reader: threading.Thread | None = None
        self._fifos: FifoChannels | None = None
        self._exited = threading.Event()
        self._started_at = 0.0
        self._own_group = False
        self._early: list[int] = []
        self._last_forward: tuple[int, float] | None = None
        """The signal passed on last, and when (see :meth:`forward_signal`)."""
        self.pgid = 0
        """The script's process group (its own, a holder's, or ours)."""
        self._terminal: ForegroundTerminal | None = None
        self._stop_requested = False
        self._spill_dir: str | None = None
        self._compiled: str | None = None  # the script compiled to start the probe (start_code.py)
        self._others = OtherPrograms()
        """The busiest programs outside the training's tree (``others`` events, see others.py)."""
        self._events = EventReader(self.recorder, self._deliver, self._control, self._others, self._exited,
                                   batch_interval)
        """The probe's channels, read on the reader thread (reader.py)."""

    # -- start ------------------------------------------------------------------
    def start(self) -> None:
        spec = self.spec
        env = dict(os.environ)
        env.update(spec.env)
        pass_fds: tuple[int, ...] = ()
        write_fd = None
        if spec.torchrun is not None:
            self._fifos = FifoChannels(spec.torchrun.nproc)
            env["MPSPROF_CHANNEL"] = self._fifos.spec
            self._events.open(list(self._fifos.fds.values()), self._fifos)
        else:
            read_fd, write_fd = os.pipe()
            env["MPSPROF_CHANNEL"] = f"fd:{write_fd}"
            pass_fds = (write_fd,)
            self._events.open([read_fd], None)
        options = spec.options.with_changes(line_buffered=True) if spec.capture_output else spec.options
        env["MPSPROF_OPTIONS"] = json.dumps(options.to_wire())
        try:  # where the probe puts what the pipe cannot take (see probe/channel.py)
            self._spill_dir = tempfile.mkdtemp(prefix="mpsprof-spill-")
            env["MPSPROF_SPILL"] = self._spill_dir
        except OSError:
            self._spill_dir = None
        pass_fds = (*pass_fds, *inherited_fds())
        stdin = stdout = stderr = None
        relay = None
        if spec.capture_output:
            stdin = subprocess.DEVNULL
            opened: tuple[IO[bytes], Path] | None = None
            if spec.run_dir is not None and self.recorder.active:
                try:  # a new file, never one planted in the directory (or a symlink)
                    opened = (open_new(spec.run_dir / OUTPUT_FILE, append=True), spec.run_dir / OUTPUT_FILE)
                except OSError:
                    opened = None
            if opened is None:
                fd, name = tempfile.mkstemp(prefix="mpsprof-output-", suffix=".log")
                opened = (os.fdopen(fd, "ab"), Path(name))
            out_file, self.output_path = opened
            relay = self.output = OutputRelay(opened[1], out_file, self._secrets())
            stdout = stderr = relay.write_fd
        # A terminal delivers Ctrl-C to its whole foreground group, the child included:
        # then the child shares our group and we do not forward SIGINT (it would arrive
        # twice). Otherwise the child gets its own group and we forward signals to it.
        # With mpsprof the foreground job of its terminal, the script becomes that job
        # instead (see foreground.py): its own group, and every signal we get is passed on.
        # Headless away from a terminal the group is led by a holder (group.py): the
        # script is no group leader there, as under python, so os.setsid() works.
        self._terminal = None if spec.capture_output else ForegroundTerminal.claim()
        terminal = self._terminal is None and _isatty(0) and not spec.capture_output
        self._own_group = not terminal
        holder = holder_or_none() if self._own_group and self._terminal is None and not spec.capture_output else None
        group: dict[str, Any]
        if self._terminal is not None:
            group = {"preexec_fn": self._terminal.preexec()}
        elif holder is not None:
            group = holder.join_kwargs()
        else:
            group = leader_kwargs(self._own_group)
        self._emit_parent(events.KIND_RUN, **self._run_fields())
        self._started_at = time.monotonic()

        def popen(group: dict[str, Any]) -> subprocess.Popen[bytes]:
            return subprocess.Popen(spec.child_argv(self._compiled), env=env, stdin=stdin, stdout=stdout, stderr=stderr,
                                    pass_fds=pass_fds, cwd=spec.cwd, **group)

        try:
            self._compiled = None if spec.module else compile_script(
                spec.target, str(spec.cwd) if spec.cwd else None, env, keep=spec.torchrun is not None)
            try:
                self.process = popen(group)
            except (OSError, subprocess.SubprocessError):
                if holder is None:
                    raise
                holder.release()  # the holder went early (killed): the script leads its group
                holder = None
                self.process = popen(leader_kwargs(True))
        except BaseException:
            remove_compiled(self._compiled)
            if self._terminal is not None:
                self._terminal.take_back()
            if relay is not None:
                relay.close_unstarted()
            raise
        finally:
            if write_fd is not None:
                os.close(write_fd)
            if holder is not None:
                holder.release()
        self.pgid = holder.pgid if holder is not None else (self.process.pid if self._own_group else os.getpgrp())
        early, self._early = self._early, []
        for sig in early:
            self._pass_on(sig)
        if relay is not None:
            relay.start()
        self._others.start(self.process.pid)
        self._reader = self._events.start(self.process, self._started_at)

    def _secrets(self) -> list[str]:
        """Values never to show: secret-looking arguments, and ``--set env.NAME=VALUE``
        values whose name says token, key, password ..."""
        spec = self.spec
        found = secret_values([spec.target, *spec.args])
        found += [v for k, v in spec.env.items() if is_secret_name(k) and len(v) >= 4]
        return found

    def _run_fields(self) -> RunFields:
        spec = self.spec
        return {
            "script": spec.display_name(),
            "target": spec.target,
            "module": spec.module,
            "argv": redact_argv([spec.target, *spec.args]),  # the script gets the real one
            "cwd": os.path.abspath(spec.cwd) if spec.cwd is not None else os.getcwd(),
            "run_dir": str(spec.run_dir) if spec.run_dir else None,
            "mode": "tui" if spec.capture_output else "headless",
            "started": time.time(),
            "python": sys.executable,
            "mpsprof": _version(),
            # what a later `try` / `patch --prove` compares its own shell with (env_digest.py)
            "env_digest": env_digest.digest(os.environ),
            **_experiment_fields(spec.options),
        }

    def _emit_parent(self, kind: str, **fields: object) -> None:
        """Events the parent itself knows (how the run was started and how it ended)."""
        ts = time.monotonic() - self._started_at if self._started_at else 0.0
        line = events.encode(kind, ts, **fields)
        self.recorder.write(line)
        self._deliver([events.decode(line)])

    def _deliver(self, batch: list[events.Event]) -> None:
        try:
            self._on_events(batch)
        except Exception as exc:  # a view bug must not stop the recording
            sys.stderr.write(f"mpsprof: internal error while handling events: {exc!r}\n")

    def _control(self, event: events.Event) -> None:
        """A ``terminal`` event: the script asks for the terminal (see ``on_terminal``)."""
        handler = self.on_terminal
        if handler is not None:
            try:
                handler(bool(event.get("want")))
            except Exception:  # noqa: BLE001 - a view bug must not stop the recording
                pass

    # -- control ----------------------------------------------------------------
    def send_signal(self, sig: int) -> None:
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            if not self._own_group:
                proc.send_signal(sig)
                return
            pgid = self.pgid or proc.pid
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                pass
            if pgid_of(proc.pid) != pgid:  # the script left the group (os.setsid()): it still gets it
                proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def forwarded_signals(self) -> list[int]:
        """What to catch and pass on (see signals.py); SIGCONT only where no terminal or
        job-control shell sends it to the script's group itself."""
        return forwardable(with_cont=self._own_group and self._terminal is None and not self.spec.capture_output)

    def forward_signal(self, sig: int) -> None:
        """A signal the parent received: pass it on as python would have got it. A
        terminal's Ctrl-C / Ctrl-\\ reached a child sharing our group already; the job
        signals (INT, TERM, HUP) go to the script's group as a shell's would, every
        other one (USR1, ALRM ...) to the script's process only, as ``kill PID`` does
        (a spawned DataLoader worker at SIG_DFL would die of a USR1 meant for its parent)."""
        now = time.monotonic()
        last, self._last_forward = self._last_forward, (sig, now)
        if last is not None and last[0] == sig and now - last[1] < REPEAT_WINDOW_S:
            return  # one signal sent twice at once (see REPEAT_WINDOW_S): python gets it once
        if self.process is None:  # not started yet: it gets it as soon as it is
            self._early.append(sig)
            return
        self._pass_on(sig)

    def _pass_on(self, sig: int) -> None:
        if sig in TERMINAL_SIGNALS and not self._own_group:
            return  # the terminal sent it to the child already
        if sig in JOB_SIGNALS:
            self.send_signal(sig)
            return
        proc = self.process
        if proc is None or proc.poll() is not None:
            return
        try:
            proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, grace: float = 5.0) -> None:
        """SIGINT (the script sees KeyboardInterrupt), then SIGTERM, then SIGKILL."""
        self._stop_requested = True
        proc = self.process
        if proc is None:
            return

        def escalate() -> None:
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
                if proc.poll() is not None:
                    return
                self.send_signal(sig)
                try:
                    proc.wait(timeout=grace)
                    return
                except subprocess.TimeoutExpired:
                    continue

        threading.Thread(target=escalate, name="mpsprof-stop", daemon=True).start()

    def poll(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def wait(self) -> int:
        """Wait for the child and the last events; write the ``exit`` event."""
        assert self.process is not None
        while True:
            try:
                code = self._terminal.wait(self.process) if self._terminal is not None else wait_awake(self.process)
                break
            except KeyboardInterrupt:  # pragma: no cover - parent got Ctrl-C outside handlers
                continue
        exited_at = time.monotonic() - self._started_at
        if self._terminal is not None:
            self._terminal.close()
        self._exited.set()
        if self._reader is not None:
            self._reader.join(timeout=10.0)
        folder, self._spill_dir = self._spill_dir, None
        self._events.read_spills(folder)
        remove_compiled(self._compiled)
        last = self._others.stop()
        if last is not None:
            self._emit_parent(events.KIND_OTHERS, **last)
        fields: ExitFields = {"returncode": code, "duration": time.monotonic() - self._started_at}
        if code < 0:
            fields["signal"] = -code
            try:
                fields["signal_name"] = signal.Signals(-code).name
            except ValueError:
                pass
        fields["stopped_by_user"] = self._stop_requested
        reader = self._events
        if reader.bad_lines:
            fields["bad_lines"] = reader.bad_lines
        closed_at = reader.channel_closed_at
        if closed_at is not None and not reader.bye_seen and exited_at - closed_at > CLOSED_BEFORE_EXIT_S:
            # the pipe ended while the script ran on, and its last line never came. A pipe
            # that ends as the process does is its exit (os._exit, a signal): probe_done says so
            fields["channel_closed_at"] = round(closed_at, 3)
        if reader.spilled_lines:
            fields["spilled_lines"] = reader.spilled_lines
        if reader.hello_seen and self._fifos is None:  # torchrun ranks: their own bye events
            fields["probe_done"] = reader.bye_seen
        self._emit_parent(events.KIND_EXIT, **fields)
        self.recorder.close()
        return code


def _experiment_fields(options: ProbeOptions) -> RunFields:
    """What ``--set`` / ``--max-steps`` asked for: the run's record says what differed."""
    out: RunFields = {}
    if options.settings:
        from ..settings import describe, shell_replaced

        out["settings"] = describe(dict(options.settings))
        replaced = shell_replaced(dict(options.settings))
        if replaced:
            out["settings_replaced"] = replaced
    if options.max_steps:
        out["max_steps"] = options.max_steps
    if options.max_seconds:
        out["max_seconds"] = options.max_seconds
    return out


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def _version() -> str:
    from .. import __version__

    return __version__
