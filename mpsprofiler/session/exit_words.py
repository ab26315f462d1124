"""How a run that ended with a non-zero status ended, in words every view shares.

A non-zero status with an uncaught exception (Python exits with 1 and prints its traceback)
is a crash. One without, and without a signal, is the script's own ``sys.exit(N)`` (or
``os._exit``): argparse's usage error (status 2) in the first hour, an early stop in a
training loop. Calling those "crashed" sent users looking for a traceback there is none of.
"""

from __future__ import annotations


def exited_by_itself(returncode: object, signal: object, crash: object) -> bool:
    """A non-zero exit status, no signal, no uncaught exception recorded."""
    return (isinstance(returncode, int) and not isinstance(returncode, bool) and returncode > 0
            and not signal and crash is None)


def exit_words(status: str, returncode: object, signal: object, crash: object) -> str:
    """``crashed (exit status 1)``, ``crashed (killed by SIGKILL)``, or, for the script's
    own ``sys.exit(3)``, ``exited with status 3 (no exception)``; ``status`` as given when
    the status is 0."""
    if signal:
        return f"{status} (killed by {signal})"
    if exited_by_itself(returncode, signal, crash):
        return f"exited with status {returncode} (no exception)"
    if returncode:
        return f"{status} (exit status {returncode})"
    return status
