"""The run mode and the TUI at a real terminal (issue 33, round three): a background job
or a redirected stderr runs headless; under the TUI a signal the script handles reaches
it and its secrets stay masked in ``output.log`` and on the screen."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from helpers import read_events, read_summary
from tui_pty import TuiProcess

QUICK = "import os, sys, time\nprint('script ran', flush=True)\nopen(sys.argv[1], 'w').close()\ntime.sleep(0.3)\n"


@pytest.fixture
def term(tmp_path: Path):
    from tmux import Tmux

    t = Tmux(tmp_path)
    yield t
    t.close()


def _mode(run_dir: Path) -> str:
    return [e for e in read_events(run_dir) if e["k"] == "run"][0]["mode"]


@pytest.mark.slow  # the real CLI at a terminal (tmux or a pty)
def test_a_background_start_at_an_interactive_shell_runs_headless(term, tmp_path: Path) -> None:
    """``mpsprof run s.py &`` at an interactive shell: the TUI's first terminal call
    stopped the whole job (SIGTTOU: "Stopped", the script never started until ``fg``),
    where ``python s.py &`` runs. A background job now runs headless, at once."""
    from tmux import mpsprof_line

    script, marker, run_dir = tmp_path / "quick.py", tmp_path / "ran.marker", tmp_path / "run"
    script.write_text(QUICK)
    term.send(mpsprof_line("run", "-o", str(run_dir), str(script), str(marker), echo=False) + " &", enter=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert time.monotonic() < deadline, term.screen()
        assert "Stopped" not in term.screen(), term.screen()
        time.sleep(0.2)
    term.send("wait; echo EXIT=$?", enter=True)
    code, screen = term.wait_for_exit()
    assert code == 0 and "Stopped" not in screen, screen
    assert _mode(run_dir) == "headless"


@pytest.mark.slow  # the real CLI at a terminal (tmux or a pty)
def test_stderr_redirected_at_a_terminal_runs_headless(term, tmp_path: Path) -> None:
    """``mpsprof run s.py 2>err.log`` at a terminal: the TUI was drawn into err.log
    (hundreds of KB of escape codes) and the terminal stayed blank. The TUI needs stdin,
    stdout and stderr on a terminal; here the run is headless and err.log holds the
    summary as plain text."""
    from tmux import mpsprof_line

    script, run_dir, err = tmp_path / "quick.py", tmp_path / "run", tmp_path / "err.log"
    script.write_text(QUICK)
    line = mpsprof_line("run", "-o", str(run_dir), str(script), str(tmp_path / "m"), echo=False)
    term.send(f"{line} 2>{err}; echo EXIT=$?", enter=True)
    code, screen = term.wait_for_exit()
    assert code == 0 and "script ran" in screen, screen
    text = err.read_text()
    assert "\x1b[?1049h" not in text and "── mpsprof" in text, text[:500]
    assert _mode(run_dir) == "headless"


SECRET = "sk-live-abcdef0123456789"
HANDLER = r'''
import signal, sys, time
key = sys.argv[sys.argv.index("--api-key") + 1]
got = []
signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
print("the key is", key, flush=True)
print("ready", flush=True)
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    time.sleep(0.05)
print("got usr1" if got else "no usr1", flush=True)
raise ValueError(f"bad key {key}")
'''


@pytest.mark.slow  # the real CLI at a terminal (tmux or a pty)
def test_tui_passes_usr1_on_and_masks_secrets_in_output_log_and_on_screen(tmp_path: Path) -> None:
    """Under the TUI: SIGUSR1 to mpsprof killed it (the app died, the script ran on
    orphaned); now the script's handler runs and mpsprof stays to record the end. And the
    script's ``--api-key`` value, printed and quoted in its exception, was written in clear
    to output.log and shown in the Log panel; the README promises ``***`` everywhere."""
    run_dir = tmp_path / "run"
    script = tmp_path / "handler.py"
    script.write_text(HANDLER)
    tui = TuiProcess(["run", "-o", str(run_dir), str(script), "--api-key", SECRET], size=(120, 40))
    log = run_dir / "output.log"
    try:
        tui.wait_for(lambda: log.exists() and b"ready" in log.read_bytes(), timeout=90, what="the script's ready")
        os.kill(tui.proc.pid, signal.SIGUSR1)
        tui.wait_for(lambda: (run_dir / "summary.json").exists(), timeout=60, what="the end of the script")
        tui.wait_output(b"bad key", timeout=30)  # the Log panel drew the traceback
        tui.send("q")
        assert tui.finish() == 1
    finally:
        if tui.proc.poll() is None:
            tui.kill()
    text = log.read_text()
    assert "got usr1" in text and "the key is ***" in text and "ValueError: bad key ***" in text, text
    assert SECRET not in text
    assert SECRET.encode() not in tui.output
    assert read_summary(run_dir)["status"] == "crashed"


IGNORED = r'''
import signal
print("ignored", signal.getsignal(signal.SIGINT) == signal.SIG_IGN, signal.getsignal(signal.SIGHUP) == signal.SIG_IGN,
      flush=True)
'''


@pytest.mark.slow  # the real CLI at a terminal (tmux)
def test_signals_ignored_at_start_stay_ignored_under_the_tui(term, tmp_path: Path) -> None:
    """``trap '' INT HUP`` at an interactive shell, then the TUI: the app used to put its
    handlers over SIG_IGN, so the script started with SIGINT and SIGHUP at their defaults
    (a hangup killed it, Ctrl-C interrupted it); under python both stay ignored."""
    from tmux import mpsprof_line

    script, run_dir = tmp_path / "ignored.py", tmp_path / "run"
    script.write_text(IGNORED)
    term.send(f"(trap '' INT HUP; exec {mpsprof_line('run', '-o', str(run_dir), str(script), echo=False)})", enter=True)
    deadline = time.monotonic() + 60
    while not (run_dir / "summary.json").exists():
        assert time.monotonic() < deadline, term.screen()
        time.sleep(0.2)
    term.send("q")
    term.wait_for("run saved in")  # the app has left: the shell reads again
    term.send("echo EXIT=$?", enter=True)
    code, _ = term.wait_for_exit()
    assert code == 0
    assert _mode(run_dir) == "tui"
    assert (run_dir / "output.log").read_text() == "ignored True True\n"


def test_a_secret_cut_by_a_pipe_read_is_still_masked() -> None:
    """The relay reads the script's output in chunks of any size: a secret split across
    two reads is masked all the same, and nothing else is held back at the end."""
    from mpsprofiler.redact import StreamScrubber

    data = f"key={SECRET} and again {SECRET[:7]}".encode() + SECRET[7:].encode() + b" end sk-"
    for size in (1, 3, 7, len(data)):
        scrubber = StreamScrubber([SECRET])
        out = b"".join(scrubber.feed(data[i:i + size]) for i in range(0, len(data), size)) + scrubber.flush()
        assert out == b"key=*** and again *** end sk-", (size, out)


TICKS = r'''
import time
for i in range(30):
    print("tick", i, flush=True)
    time.sleep(0.1)
print("finished ticking", flush=True)
'''
IGNORING_HUP = ("import runpy, signal, sys; signal.signal(signal.SIGHUP, signal.SIG_IGN); "
                "sys.argv = ['mpsprof', *sys.argv[3:]]; runpy.run_module('mpsprofiler', run_name='__main__')")


@pytest.mark.slow  # the real TUI in a pty
def test_terminal_closed_with_sighup_ignored_the_script_finishes_and_mpsprof_leaves(tmp_path: Path) -> None:
    """``nohup``-like (SIGHUP ignored when mpsprof starts), then the TUI's terminal closes
    mid-run: under python the script ignores the hangup and finishes. The script now does
    (the app no longer hangs it up), and mpsprof leaves once it has ended instead of
    waiting for ever for a key on a terminal that is gone (the app's hang-up was a SIGHUP
    to itself, which it ignores)."""
    run_dir = tmp_path / "run"
    script = tmp_path / "ticks.py"
    script.write_text(TICKS)
    # python -c IGNORING_HUP -m mpsprofiler run ...: mpsprof started with SIGHUP at SIG_IGN
    tui = TuiProcess(["run", "-o", str(run_dir), str(script)], size=(100, 30), python_args=["-c", IGNORING_HUP])
    log = run_dir / "output.log"
    try:
        tui.wait_for(lambda: log.exists() and b"tick 3" in log.read_bytes(), timeout=90, what="the script's ticks")
        tui.close_terminal()
        code = tui.proc.wait(timeout=30)
    finally:
        if tui.proc.poll() is None:
            tui.kill()
    assert code == 0
    assert "finished ticking" in log.read_text()
    assert read_summary(run_dir)["status"] == "finished"
