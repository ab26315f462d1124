"""The script's os.close never waits forever on the probe's descriptor lock (probe/fdguard.py).

Seen in CI: a crash ended the script while the probe's channel thread (a daemon) held the
lock in a sample; the interpreter's shutdown stopped that thread, the lock stayed held, and
the DataLoader iterator freed with the crash's traceback closed its workers' pipes in
``__del__``: the training process hung at exit instead of exiting with the crash's status.
"""

import subprocess
import sys
import textwrap

from tests.helpers import REPO

# a thread takes the lock and ends holding it (as a daemon thread stopped at shutdown
# does); an object freed at the interpreter's shutdown then closes a descriptor
LEFT_HELD = textwrap.dedent("""
    import os, sys, threading
    from mpsprofiler.probe import fdguard
    fdguard.install()
    t = threading.Thread(target=fdguard.held().acquire)
    t.start(); t.join()
    r, w = os.pipe()

    class ClosesAtShutdown:
        def __del__(self):
            os.close(w)
            print("closed at shutdown", flush=True)

    keep = ClosesAtShutdown()  # a module global: freed while the interpreter finalizes
    {during}
    raise SystemExit(3)
""")


def _run(during: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LEFT_HELD.format(during=during)], cwd=REPO,
                          capture_output=True, text=True, timeout=60)


def test_a_close_at_shutdown_does_not_wait_for_a_lock_left_held() -> None:
    proc = _run("")
    assert proc.returncode == 3, proc.stderr
    assert "closed at shutdown" in proc.stdout


def test_a_close_while_running_gives_up_waiting_and_closes() -> None:
    from mpsprofiler.probe.fdguard import GIVE_UP_S

    proc = _run("import time; s = time.monotonic(); os.close(r); "
                "print('waited', round(time.monotonic() - s, 1), flush=True)")
    assert proc.returncode == 3, proc.stderr
    waited = float(proc.stdout.split("waited ")[1].split()[0])
    assert GIVE_UP_S - 0.5 <= waited < GIVE_UP_S + 30  # it gave up (a bound, not a timing claim)
    assert "closed at shutdown" in proc.stdout
