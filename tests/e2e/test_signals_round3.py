"""Signals under mpsprof as under python (issue 33, round three), with real processes and
real shells: a signal the script handles reaches it and mpsprof survives; one the shell
ignored stays ignored; the script may call ``os.setsid()``; a signal to mpsprof's group
reaches the script once.

Each test runs a tiny script (no torch) both ways, plain and profiled headless, and
compares what the script saw."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import child_env, read_events

HANDLES = r'''
import os, signal, sys, time
names = sys.argv[1].split(",")
got = []
for name in names:
    sig = getattr(signal, name) if not name.startswith("RT") else signal.SIGRTMIN + int(name[2:])
    signal.signal(sig, lambda s, f, name=name: got.append(name))
print("ready", os.getpid(), flush=True)
for name in names:
    deadline = time.monotonic() + 10
    while name not in got and time.monotonic() < deadline:
        time.sleep(0.01)
    print("got", name, flush=True)
print("done", got, flush=True)
'''


def _cmd(profiled: bool, run_dir: Path, script: Path, *args: str) -> list[str]:
    if profiled:
        return [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir), str(script), *args]
    return [sys.executable, str(script), *args]


def _send_each(cmd: list[str], names: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Start ``cmd`` (a session of its own: no terminal, as in cron or CI), send it each
    signal in turn (waiting for the script's ``got``), return its exit status, stdout and
    stderr. The signal goes to the process we started: mpsprof itself when profiled."""
    # unbuffered: what readline() does not consume must be left for communicate()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env or child_env(), bufsize=0, start_new_session=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline()]
    assert lines[0].startswith(b"ready"), (lines, proc.communicate(timeout=30))
    for name in names:
        sig = getattr(signal, name) if not name.startswith("RT") else signal.SIGRTMIN + int(name[2:])
        proc.send_signal(sig)
        lines.append(proc.stdout.readline())
    out, err = proc.communicate(timeout=60)
    return proc.returncode, (b"".join(lines) + out).decode(), err.decode()


def test_signals_the_script_handles_reach_it_and_mpsprof_survives(tmp_path: Path) -> None:
    """SIGUSR1 (SLURM's --signal=USR1, Lightning's requeue) killed mpsprof itself (exit
    138) and left the training orphaned; USR2, ALRM, VTALRM, PWR, a real-time signal and
    CONT (a script's handler runs under python) did the same or never arrived. Each one
    sent to mpsprof now runs the script's handler, once, and the run ends normally.
    The same run: a PYTORCH_* variable whose name says token is recorded as ***, and the
    printed view/report hints are shell-quoted (the run directory has a space)."""
    script = tmp_path / "handles.py"
    script.write_text(HANDLES)
    names = ["SIGUSR1", "SIGUSR2", "SIGALRM", "SIGVTALRM", "SIGPWR", "RT3", "SIGCONT", "SIGUSR1"]
    names_arg = ",".join(dict.fromkeys(names))
    order = list(dict.fromkeys(names))
    env = child_env(PYTORCH_HF_TOKEN="hf_sekrit_value_123")
    plain = _send_each(_cmd(False, tmp_path, script, names_arg), order, env)
    run_dir = tmp_path / "run dir"
    profiled = _send_each(_cmd(True, run_dir, script, names_arg), order, env)
    assert plain[0] == 0 and plain[1].endswith(f"done {order}\n"), plain
    assert profiled[0] == 0, profiled[2][-3000:]
    assert profiled[1] == plain[1].replace(plain[1].split()[1], profiled[1].split()[1], 1)  # only the pid differs
    exit_event = [e for e in read_events(run_dir) if e["k"] == "exit"][0]
    assert exit_event["returncode"] == 0
    events_text = (run_dir / "events.jsonl").read_text()
    assert "hf_sekrit_value_123" not in events_text and '"PYTORCH_HF_TOKEN":"***"' in events_text
    assert f"mpsprof view {shlex.quote(str(run_dir))} " in profiled[2], profiled[2][-1500:]


def test_a_signal_the_script_does_not_handle_ends_it_as_under_python(tmp_path: Path) -> None:
    """SIGUSR2 at its default: the script dies of it, and so does mpsprof after writing
    the recording (the shell sees 140 both ways); mpsprof used to die first."""
    script = tmp_path / "plain.py"
    script.write_text("import time\nprint('ready', flush=True)\ntime.sleep(20)\nprint('not killed')\n")

    def killed(cmd: list[str]) -> tuple[int, str]:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=child_env(), bufsize=0, start_new_session=True)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGUSR2)
        out, _ = proc.communicate(timeout=60)
        return proc.returncode, out.decode()

    assert killed(_cmd(False, tmp_path, script)) == (-signal.SIGUSR2, "")
    assert killed(_cmd(True, tmp_path / "run", script)) == (-signal.SIGUSR2, "")
    exit_event = [e for e in read_events(tmp_path / "run") if e["k"] == "exit"][0]
    assert exit_event["signal"] == signal.SIGUSR2


IGNORES = r'''
import os, signal, sys, time
print("ready", os.getpid(), signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
      signal.getsignal(signal.SIGINT) == signal.SIG_IGN, flush=True)
deadline = time.monotonic() + 15
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
print("finished", flush=True)
'''


def test_a_signal_ignored_at_start_stays_ignored_for_the_script(tmp_path: Path) -> None:
    """``trap '' INT; nohup mpsprof run --headless s.py`` then SIGHUP and SIGINT: under
    python both stay ignored and the script finishes; mpsprof used to catch them over
    SIG_IGN and forward them (the script died of SIGHUP, rc 129, and got a
    KeyboardInterrupt). Now neither is caught, nor forwarded, and the script inherits
    SIG_IGN. The signals go to mpsprof and to the script (as a hangup reaches a job)."""
    script = tmp_path / "ignores.py"
    script.write_text(IGNORES)

    def run(prefix: str, marker: Path) -> tuple[int, str, str]:
        line = f"trap '' INT; exec nohup {prefix} {shlex.quote(str(script))} {shlex.quote(str(marker))}"
        proc = subprocess.Popen(["bash", "-c", line], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=child_env(), bufsize=0, cwd=tmp_path,
                                start_new_session=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline().decode()
        assert ready.startswith("ready "), (ready, proc.communicate(timeout=30))
        script_pid = int(ready.split()[1])
        for sig in (signal.SIGHUP, signal.SIGINT):
            for pid in {proc.pid, script_pid}:
                os.kill(pid, sig)
        time.sleep(0.3)
        marker.touch()
        out, err = proc.communicate(timeout=60)
        return proc.returncode, ready.split(" ", 2)[2] + out.decode(), err.decode()

    py = shlex.quote(sys.executable)
    plain = run(py, tmp_path / "plain.marker")
    profiled = run(f"{py} -m mpsprofiler run --headless -o {shlex.quote(str(tmp_path / 'run'))}",
                   tmp_path / "profiled.marker")
    assert plain[:2] == (0, "True True\nfinished\n"), plain
    assert profiled[:2] == plain[:2], profiled[2][-3000:]


SETSID = r'''
import os, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
print("ready", flush=True)
deadline = time.monotonic() + 10
while not got and time.monotonic() < deadline:
    time.sleep(0.02)
time.sleep(0.3)  # a second delivery would come now
print("TERM", len(got), flush=True)
try:
    os.setsid()
    print("setsid ok", flush=True)
except OSError as exc:
    print("setsid failed", exc.errno, flush=True)
'''


def test_setsid_works_and_a_group_signal_arrives_once_away_from_a_terminal(tmp_path: Path) -> None:
    """Run from a script's shell (no terminal, the shell leads the group: cron, CI):
    ``os.setsid()`` works under python; under mpsprof it failed with EPERM, the child being
    its group's leader. Now the child is a member of a group of its own (led by a holder
    that has gone), not a leader. And SIGTERM to the shell's whole group (``kill --
    -PGID``, GNU timeout) reaches the script once, not twice (from the sender and from
    mpsprof)."""
    script = tmp_path / "setsid.py"
    script.write_text(SETSID)

    def run(prefix: str) -> tuple[int, str, str]:
        line = f"{prefix} {shlex.quote(str(script))}; echo shell-done"
        proc = subprocess.Popen(["bash", "-c", line], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=child_env(), bufsize=0, cwd=tmp_path,
                                start_new_session=True)
        assert proc.stdout is not None
        ready = proc.stdout.readline().decode()
        assert ready == "ready\n", (ready, proc.communicate(timeout=30))
        os.killpg(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        return proc.returncode, ready + out.decode(), err.decode()

    py = shlex.quote(sys.executable)
    plain = run(f"trap 'echo shell-term' TERM; {py}")
    profiled = run(f"trap 'echo shell-term' TERM; {py} -m mpsprofiler run --headless -o {shlex.quote(str(tmp_path / 'run'))}")
    assert "setsid ok" in plain[1] and "TERM 1" in plain[1], plain
    assert profiled[1] == plain[1], profiled[2][-3000:]
    assert profiled[0] == plain[0] == 0


COUNTS_TERM = r'''
import os, signal, sys, time
got = []
signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
print("ready", os.getpid(), flush=True)
deadline = time.monotonic() + 20
while not got and time.monotonic() < deadline:
    time.sleep(0.01)
time.sleep(0.5)  # a checkpoint; a second SIGTERM meanwhile would count
print("TERM", len(got), flush=True)
'''


def _started(cmd: list[str]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=child_env(), bufsize=0, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(b"ready"), (line, proc.communicate(timeout=30))
    return proc


def test_a_signal_sent_to_mpsprof_and_to_its_group_at_once_reaches_the_script_once(tmp_path: Path) -> None:
    """GNU ``timeout`` signals its command and then its own process group: mpsprof got the
    signal twice and passed on both, and a script that takes a second SIGTERM for "abort now"
    skipped its checkpoint (seen with ``timeout -s TERM 4 mpsprof run ...``); python gets it
    once (the kernel merges a pending signal). Sent 5 ms apart here, so that mpsprof handles
    them one by one, as it did with ``timeout``'s."""
    script = tmp_path / "counts.py"
    script.write_text(COUNTS_TERM)
    proc = _started(_cmd(True, tmp_path / "run", script))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert out.decode() == "TERM 1\n", err.decode()[-2000:]
    assert proc.returncode == 0


def _tgkill(pid: int, tid: int, sig: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    sys_tgkill = {"x86_64": 234, "aarch64": 131}[os.uname().machine]
    assert libc.syscall(sys_tgkill, pid, tid, sig) == 0, ctypes.get_errno()


@pytest.mark.skipif(not sys.platform.startswith("linux") or os.uname().machine not in ("x86_64", "aarch64"),
                    reason="tgkill: Linux x86-64 / arm64")
def test_a_signal_the_kernel_hands_to_another_thread_of_mpsprof_is_passed_on_at_once(tmp_path: Path) -> None:
    """The kernel hands a signal for a process to any of its threads. Python runs the
    handler in the main thread, which sat blocked in ``waitpid()`` until the script ended:
    ``timeout -s TERM`` was lost 2 times in 26 and the training ran on for ten minutes. Here
    the signal goes to one of mpsprof's other threads on purpose (``tgkill``)."""
    script = tmp_path / "counts.py"
    script.write_text(COUNTS_TERM)
    proc = _started(_cmd(True, tmp_path / "run", script))
    others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
    assert others, "mpsprof runs threads beside its main one"
    t0 = time.monotonic()
    _tgkill(proc.pid, others[0], signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert out.decode() == "TERM 1\n" and proc.returncode == 0, err.decode()[-2000:]
    assert time.monotonic() - t0 < 10  # passed on at once, not when the script gave up waiting (20 s)


def test_a_signal_before_the_script_starts_reaches_it_when_it_does(tmp_path: Path) -> None:
    """A signal that comes while mpsprof is starting the script is passed on once the script
    exists, as if it came a moment later under python (here: before the script's handler, so
    it dies of it); the repeat filter above must not swallow it then."""
    from mpsprofiler.launcher.child import RunController, RunSpec
    from mpsprofiler.session.session import Session

    script = tmp_path / "counts.py"
    script.write_text(COUNTS_TERM)
    controller = RunController(RunSpec(target=str(script)), Session().feed_many)
    controller.forward_signal(signal.SIGTERM)
    controller.start()
    t0 = time.monotonic()
    assert controller.wait() == -signal.SIGTERM
    assert time.monotonic() - t0 < 15
