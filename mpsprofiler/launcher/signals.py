"""Which signals sent to mpsprof are passed on to the script, and which stay as they were.

Under ``python train.py`` every signal sent to the process reaches the script: SLURM's
``--signal=USR1`` and Lightning's requeue handler, a scheduler's SIGTERM, an ``alarm``.
Under mpsprof the sender only knows mpsprof's pid, so mpsprof catches each signal whose
default action would end it (and which a script may handle) and passes it on; mpsprof
survives and, once the script has ended, leaves the way the script did.

Passed on (:func:`forwardable`): HUP, INT, QUIT, TERM, USR1, USR2, ALRM, VTALRM, PROF,
IO/POLL, PWR and the real-time signals; CONT only where no terminal or job-control shell
delivers it to the script's group already (see :meth:`RunController.forward_signal`).
Left alone, on purpose:

* **ignored when mpsprof started** (``nohup``, ``trap '' INT``, a non-interactive shell's
  ``cmd &``): never caught, so the script inherits ``SIG_IGN`` through ``exec`` and
  ignores it as under python (a handler installed over it would turn a signal the user
  asked to ignore into one that kills the training);
* PIPE and XFSZ: python ignores them at start-up, and the kernel sends them for
  mpsprof's *own* writes (a closed pipe, a file-size limit): passing them on would kill a
  script that never wrote to that pipe;
* XCPU: mpsprof's own CPU limit, not the script's;
* WINCH: the terminal sends it to its foreground job (the script, when it has the
  terminal); under the TUI the script has no terminal;
* SEGV, BUS, ILL, FPE, TRAP, ABRT, SYS: a handler would hide mpsprof's own crash;
* CHLD, URG (ignored by default), STOP/KILL (cannot be caught), TSTP/TTIN/TTOU (job
  control: see ``foreground.py``).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterable
from typing import Any

_NAMES = ("SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPROF",
          "SIGIO", "SIGPWR")

JOB_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
"""What terminals, shells and ``timeout`` send to a whole job: passed to the script's whole
process group (its DataLoader workers get them too, as they would from the shell)."""

TERMINAL_SIGNALS = frozenset({signal.SIGINT, signal.SIGQUIT})
"""Sent by a terminal (Ctrl-C, Ctrl-\\) to its foreground group: a child sharing mpsprof's
group at a terminal has had them already."""


def forwardable(with_cont: bool = False) -> list[int]:
    """The signals mpsprof passes on, on this platform (``with_cont``: SIGCONT too)."""
    found: list[int] = []
    for name in _NAMES:
        sig = getattr(signal, name, None)
        if sig is not None and int(sig) not in found:
            found.append(int(sig))
    low, high = getattr(signal, "SIGRTMIN", None), getattr(signal, "SIGRTMAX", None)
    if low is not None and high is not None:
        found += range(int(low), int(high) + 1)
    if with_cont and hasattr(signal, "SIGCONT"):
        found.append(int(signal.SIGCONT))
    return found


def ignored(sig: int) -> bool:
    """The signal is ``SIG_IGN`` for us now (and so for the script after ``exec``)."""
    try:
        return signal.getsignal(sig) == signal.SIG_IGN
    except (ValueError, OSError):
        return False


def catchable(sig: int) -> bool:
    """Ours to catch: anything but ``SIG_IGN`` (a handler installed before us, e.g. by a
    program embedding mpsprof, is replaced for the run and put back after it)."""
    try:
        signal.getsignal(sig)
    except (ValueError, OSError):
        return False
    return not ignored(sig)


def install(signals: Iterable[int], handler: Callable[[int], object]) -> Callable[[], None]:
    """``handler(signum)`` for each of ``signals`` that is :func:`catchable`; returns the
    function that puts the previous handlers back. Outside the main thread: nothing."""
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        handler(signum)

    for sig in signals:
        if not catchable(sig):
            continue
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError, RuntimeError):  # not the main thread, or not catchable here
            continue

    def restore() -> None:
        for signum, old in previous.items():
            try:
                signal.signal(signum, old if old is not None else signal.SIG_DFL)
            except (ValueError, OSError, RuntimeError):
                pass

    return restore
