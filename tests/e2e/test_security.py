"""Security: the event channel is private (no socket anywhere, a 0700 run directory),
nothing goes over the network, rule files are never executed, reports escape."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from helpers import REPO, SCRIPTS, child_env, mpsprof_cli, mpsprof_cmd, read_events, read_summary, run_mpsprof

AUDIT_HOOK = '''
import os, sys

def _mpsprof_test_audit(event, args):
    if event.startswith("socket."):
        with open(os.environ["MPSPROF_TEST_AUDIT_LOG"], "a") as fh:
            fh.write(f"{os.getpid()} {sys.argv[:2]} {event} {args!r}\\n")

sys.addaudithook(_mpsprof_test_audit)
'''


@pytest.mark.slow
def test_no_socket_no_network_private_files(tmp_path: Path) -> None:
    """Every Python process of a run (mpsprof, the training, anything they start) logs
    its socket audit events through a sitecustomize: there must be none. Meanwhile the
    parent and the child hold no socket of any family, listening or connected."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(AUDIT_HOOK)
    log = tmp_path / "audit.log"
    env = child_env(MPSPROF_TEST_AUDIT_LOG=str(log), PYTHONPATH=f"{site}{os.pathsep}{REPO}")
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(mpsprof_cmd([str(SCRIPTS / "train_small.py")], run_dir), env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    parent = psutil.Process(proc.pid)
    held: list[str] = []
    samples = 0
    while proc.poll() is None:
        try:
            for p in [parent, *parent.children(recursive=True)]:
                held += [f"{p.pid} {c}" for c in p.net_connections(kind="all")]
            samples += 1
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.05)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert samples >= 5  # the run was watched while it ran
    assert held == []
    assert not log.exists(), log.read_text()  # test_audit_hook_sees_sockets: the hook works
    # the run's files are the user's alone
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE((run_dir / "events.jsonl").stat().st_mode) & 0o077 == 0


def test_audit_hook_sees_sockets(tmp_path: Path) -> None:
    """The check above can fail: the same hook logs a script that does open a socket."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(AUDIT_HOOK)
    (tmp_path / "net.py").write_text("import socket\ns = socket.socket()\ns.close()\n")
    log = tmp_path / "audit.log"
    env = child_env(MPSPROF_TEST_AUDIT_LOG=str(log), PYTHONPATH=f"{site}{os.pathsep}{REPO}")
    proc = subprocess.run(mpsprof_cmd([str(tmp_path / "net.py")], tmp_path / "run"), env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "socket.__new__" in log.read_text()


def test_rule_files_are_never_executed(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    marker = tmp_path / "PWNED"
    (rules / "evil_when.yaml").write_text(
        "rules:\n  - id: evil\n    title: t\n    severity: info\n"
        f"    when: \"__import__('os').system('touch {marker}')\"\n    evidence: e\n    fix: f\n"
    )
    (rules / "evil_tag.yaml").write_text(f"rules: !!python/object/apply:os.system ['touch {marker}']\n")
    (rules / "evil_template.yaml").write_text(
        "rules:\n  - id: evil-template\n    title: t\n    severity: info\n    when: \"steps_count >= 0\"\n"
        f"    evidence: \"{{__import__('os').system('touch {marker}')}}\"\n    fix: \"{{steps_count.__class__}}\"\n"
    )
    result = run_mpsprof([str(SCRIPTS / "exits.py"), "0"], tmp_path / "run", options=["--rules", str(rules)])
    assert result.returncode == 0
    assert not marker.exists()
    problems = [line for line in result.stderr.decode().splitlines() if line.startswith("mpsprof: rule file problem")]
    assert any(f"{rules / 'evil_when.yaml'}:5:" in p for p in problems), problems
    assert any(f"{rules / 'evil_tag.yaml'}:1:" in p for p in problems), problems
    assert any("evil_template.yaml" in p for p in problems), problems


HOSTILE = "<script>alert('x')</script><img src=x onerror=alert(1)>\"'&"


def test_html_report_escapes_recorded_strings(tmp_path: Path) -> None:
    """A cross-check of the HTML report with strings that come from the script."""
    import mpsprofiler.report.html  # noqa: F401 - ships with the package: a missing module fails
    from mpsprofiler import events
    from mpsprofiler.report import render_report
    from mpsprofiler.results import build_results
    from mpsprofiler.session.recording import load_run

    lines = [
        events.encode("run", 0, script=HOSTILE, target=HOSTILE, argv=[HOSTILE], cwd=HOSTILE, mode="headless"),
        events.encode("hello", 0, schema=events.SCHEMA_VERSION, pid=1),
        events.encode("warning", 1, category=HOSTILE, message=HOSTILE, filename=HOSTILE, lineno=1, count=3),
        events.encode("probe_error", 1, instrument=HOSTILE, message=HOSTILE),
        events.encode("exception", 2, type=HOSTILE, module=HOSTILE, message=HOSTILE,
                      frames=[{"file": HOSTILE, "line": 1, "func": HOSTILE, "code": HOSTILE, "user": True}]),
        events.encode("exit", 3, returncode=1, duration=3.0),
    ]
    (tmp_path / "events.jsonl").write_bytes(b"".join(lines))
    loaded = load_run(tmp_path)
    html = render_report("html", loaded.session, build_results(loaded.session))
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "onerror=alert(1)>" not in html
    assert "&lt;script&gt;alert(" in html  # the strings are there, escaped


# -- the run directory: one run each, nothing written through a planted name ----------------
def test_reused_run_directory_is_refused(tmp_path: Path) -> None:
    """``-o`` of an earlier run: refused before the script starts (exit 2), the earlier
    run's files untouched; an empty directory is fine."""
    run_dir = tmp_path / "run"
    first = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / "exits.py"), "0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    again = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(SCRIPTS / "exits.py"), "1", cwd=tmp_path)
    assert again.returncode == 2 and again.stdout == ""  # the script did not run
    assert f"mpsprof: error: the run directory {run_dir} already holds an earlier mpsprof run" in again.stderr
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    other = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "other"), str(SCRIPTS / "exits.py"), "0")
    assert other.returncode == 2 and "already holds 1 file(s)" in other.stderr
    assert [p.name for p in (tmp_path / "other").iterdir()] == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    empty = mpsprof_cli("run", "--headless", "-o", str(tmp_path / "empty"), str(SCRIPTS / "exits.py"), "0")
    assert empty.returncode == 0, empty.stderr
    assert read_summary(tmp_path / "empty")["status"] == "finished"


def test_default_run_directories_never_collide(tmp_path: Path) -> None:
    """Runs started together in one second each claim their own directory."""
    cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", str(SCRIPTS / "exits.py"), "0"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=child_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 4
    dirs = sorted((tmp_path / "mpsprof-runs").iterdir())
    assert len(dirs) == 4
    for run_dir in dirs:
        assert [e["k"] for e in read_events(run_dir)].count("run") == 1


PLANTER = '''
import os, sys, time
run_dir = sys.argv[1]
print("planting", flush=True)
for name, target in [("summary.json", "victim_summary"), ("summary.json.tmp", "victim_tmp"),
                     ("report.md", "victim_report")]:
    os.symlink(os.path.join(os.path.dirname(run_dir), target), os.path.join(run_dir, name))
'''


def test_files_are_never_written_through_symlinks(tmp_path: Path) -> None:
    """A symlink planted in the run directory while the run goes on (here by the script
    itself) is replaced, never written through; a planted events.jsonl makes the run
    directory refused up front."""
    victims = {name: tmp_path / name for name in ("victim_summary", "victim_tmp", "victim_report")}
    for path in victims.values():
        path.write_text("precious\n")
    (tmp_path / "planter.py").write_text(PLANTER)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), "--report", str(run_dir / "report.md"),
                       str(tmp_path / "planter.py"), str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for path in victims.values():
        assert path.read_text() == "precious\n", path
    assert not (run_dir / "summary.json").is_symlink()
    assert read_summary(run_dir)["status"] == "finished"
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "events.jsonl").symlink_to(victims["victim_summary"])
    proc = mpsprof_cli("run", "--headless", "-o", str(planted), str(SCRIPTS / "exits.py"), "0", cwd=tmp_path)
    assert proc.returncode == 2 and "already holds an earlier mpsprof run" in proc.stderr
    assert victims["victim_summary"].read_text() == "precious\n"


def test_safe_file_helpers(tmp_path: Path) -> None:
    from mpsprofiler.rundir import open_new, write_atomic

    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    (tmp_path / "link").symlink_to(victim)
    with pytest.raises(FileExistsError):
        open_new(tmp_path / "link", append=True)
    write_atomic(tmp_path / "link", b"new\n")
    assert victim.read_text() == "precious\n" and (tmp_path / "link").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "victim"]  # no temporary left
    assert stat.S_IMODE((tmp_path / "link").stat().st_mode) == 0o600


# -- secrets in the script's arguments -------------------------------------------------------
SECRET_SCRIPT = '''
import argparse, warnings
p = argparse.ArgumentParser()
for name in ("--password", "--token", "--api-key", "--lr"):
    p.add_argument(name)
a, rest = p.parse_known_args()
print("got", a.password, a.token, a.api_key, a.lr, *rest)
warnings.warn(f"cannot log in with {a.token}")
raise RuntimeError(f"login failed for {a.api_key}")
'''
SECRETS = ("hunter2-pw", "tok-SECRET-1", "sk-abcdef", "dbpass99", "urlpw77")
SECRET_ARGS = ["--password", "hunter2-pw", "--token=tok-SECRET-1", "--api-key", "sk-abcdef", "--lr", "0.1",
               "db.password=dbpass99", "--data", "https://me:urlpw77@example.org/set"]


def _reports(run_dir: Path) -> dict[str, str]:
    out = {}
    for fmt in ("md", "html", "json", "trace"):
        proc = mpsprof_cli("report", str(run_dir), "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        out[fmt] = proc.stdout
    return out


@pytest.mark.slow
def test_secret_arguments_are_never_recorded_or_reported(tmp_path: Path) -> None:
    """The script gets its real argv; events.jsonl, summary.json and every report show
    ``***`` instead of the values of secret-looking arguments, in argv and in the texts
    (exception message, warning) that quote them."""
    script = tmp_path / "login.py"
    script.write_text(SECRET_SCRIPT)
    run_dir = tmp_path / "run"
    proc = mpsprof_cli("run", "--headless", "-o", str(run_dir), str(script), *SECRET_ARGS)
    assert proc.returncode == 1
    assert proc.stdout.startswith("got hunter2-pw tok-SECRET-1 sk-abcdef 0.1 db.password=dbpass99")  # real argv
    recorded = {p.name: p.read_text() for p in run_dir.iterdir()}
    assert set(recorded) == {"events.jsonl", "summary.json"}
    for text in [*recorded.values(), *_reports(run_dir).values(), proc.stderr.split("── mpsprof")[-1]]:
        for secret in SECRETS:
            assert secret not in text
    argv = read_summary(run_dir)["argv"]
    assert argv[1:] == ["--password", "***", "--token=***", "--api-key", "***", "--lr", "0.1", "db.password=***",
                        "--data", "https://me:***@example.org/set"]
    assert "mpsprof run " in _reports(run_dir)["md"] and "--api-key '***' --lr 0.1" in _reports(run_dir)["md"]


@pytest.mark.slow
def test_old_recordings_with_secrets_are_masked_when_shown(tmp_path: Path) -> None:
    """A recording made before redaction at the source: the reports mask it too."""
    from mpsprofiler import events

    lines = [
        events.encode("run", 0, script="login.py", target="login.py", argv=["login.py", *SECRET_ARGS], mode="headless"),
        events.encode("hello", 0, schema=events.SCHEMA_VERSION, pid=1),
        events.encode("warning", 1, category="UserWarning", message="cannot log in with tok-SECRET-1", count=1),
        events.encode("exception", 2, type="RuntimeError", module="builtins", message="login failed for sk-abcdef",
                      frames=[]),
        events.encode("exit", 3, returncode=1, duration=3.0),
    ]
    (tmp_path / "events.jsonl").write_bytes(b"".join(lines))
    for fmt, text in _reports(tmp_path).items():
        for secret in SECRETS:
            assert secret not in text, (fmt, secret)
    assert "login failed for ***" in _reports(tmp_path)["md"]
