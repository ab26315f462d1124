"""The probe's descriptors and the script's stay apart (mpsprofiler/probe/fdguard.py).

CI once saw ``tests/scripts/closes_fds.py`` crash under mpsprof with ``EBADF`` on the
script's own ``fh.close()``: the memory sampler had a ``/proc`` file open when the script
called ``os.closerange``, the script's next file took that number, and the sampler's close
closed the script's file. These tests run that race for real, in child processes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import REPO, compare

RACE = textwrap.dedent("""
    import os, sys, threading, time, tempfile
    from mpsprofiler.probe import fdguard
    fdguard.install()
    stop = False
    def probe_thread():
        # what the sampler does: open, read and close /proc files, under the lock
        while not stop:
            with fdguard.held():
                try:
                    with open("/proc/self/statm", "rb") as fh:
                        fh.read()
                except OSError:
                    pass
    threading.Thread(target=probe_thread, daemon=True).start()
    folder = tempfile.mkdtemp()
    failures = rounds = 0
    end = time.monotonic() + 1.5
    while time.monotonic() < end:
        os.closerange(3, 64)   # the script's daemonizing code, as closes_fds.py
        try:
            files = [open(os.path.join(folder, f"f{n}"), "w") for n in range(4)]
            for fh in files:
                fh.write("x")
                fh.close()
        except OSError:
            failures += 1
        rounds += 1
    stop = True
    print(failures, rounds)
""")


def test_the_scripts_closerange_never_meets_a_probe_descriptor_in_use() -> None:
    """Without the lock this fails within milliseconds (EBADF on the script's open or close:
    the probe thread closed the script's file); with it, never."""
    done = subprocess.run([sys.executable, "-c", RACE], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    failures, rounds = map(int, done.stdout.split())
    assert rounds > 10  # the point is no failure; a loaded machine runs fewer rounds
    assert failures == 0


def test_a_fork_while_a_probe_thread_holds_the_lock_does_not_hang_the_child() -> None:
    """multiprocessing's forked child calls os.close at once: the lock must be fresh there."""
    code = textwrap.dedent("""
        import os, threading, time
        from mpsprofiler.probe import fdguard
        fdguard.install()
        held = threading.Event(); release = threading.Event()
        def hold():
            with fdguard.held():
                held.set(); release.wait(10)
        threading.Thread(target=hold, daemon=True).start()
        held.wait(5)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r); os.close(w)   # would wait forever on an inherited held lock
            os._exit(7)
        for _ in range(200):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                print("child", os.waitstatus_to_exitcode(status)); break
            time.sleep(0.025)
        else:
            os.kill(pid, 9); print("child hung")
        release.set()
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "child 7", (done.stdout, done.stderr)


def test_a_closed_kept_descriptor_is_never_read_or_closed_again() -> None:
    """The run-queue clock keeps /proc/thread-self/schedstat open; after the script's
    closerange the number may be the script's file, which the clock must leave alone."""
    code = textwrap.dedent("""
        import os, tempfile
        from mpsprofiler.probe import fdguard
        from mpsprofiler.probe.cputime import ThreadClock
        fdguard.install()
        clock = ThreadClock()
        first = clock.runq()
        os.closerange(3, 256)
        fh = open(os.path.join(tempfile.mkdtemp(), "mine"), "w")
        print(first is not None or not os.path.exists("/proc/thread-self/schedstat"), clock.runq())
        clock.close()
        fh.write("still open"); fh.close()
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "None", "ok"]


@pytest.mark.slow
def test_a_profiled_script_closing_descriptors_in_a_loop_keeps_its_files(tmp_path: Path) -> None:
    """The real probe (sampler, channel, clock) beside a script that closes every inherited
    descriptor again and again: its output and exit status are as without mpsprof."""
    script = tmp_path / "daemonish.py"
    script.write_text(textwrap.dedent("""
        import os, shutil, tempfile, time
        folder = tempfile.mkdtemp(prefix="closes-fds-loop-")
        failures = 0
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            os.closerange(3, 256)
            files = [open(os.path.join(folder, f"f{n}"), "w") for n in range(8)]
            time.sleep(0.002)
            for fh in files:
                try:
                    fh.write("x"); fh.close()
                except OSError:
                    failures += 1
        shutil.rmtree(folder)
        print("failures", failures)
    """))
    plain, _ = compare([str(script)], tmp_path / "run")
    assert plain.stdout == b"failures 0\n"
    assert os.path.isdir(tmp_path / "run")
