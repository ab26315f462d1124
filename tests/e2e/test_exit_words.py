"""A script's own non-zero exit is not called a crash (session/exit_words.py).

argparse's usage error (status 2) is what a newcomer meets first when ``mpsprof run
train.py`` leaves out an argument; an early stop by ``sys.exit(3)`` is a training loop's.
Neither has a traceback. An uncaught exception (status 1, its traceback printed) is a crash.
"""

from __future__ import annotations

from pathlib import Path

from helpers import mpsprof_cli

USAGE_ERROR = '''import argparse
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.parse_args()
'''
RAISES = '''def load(path):
    raise FileNotFoundError(path)
load("missing.csv")
'''


def _run(tmp_path: Path, name: str, code: str) -> tuple[str, str]:
    script = tmp_path / f"{name}.py"
    script.write_text(code)
    proc = mpsprof_cli("run", "--headless", "-o", str(tmp_path / name), str(script), cwd=tmp_path)
    report = mpsprof_cli("report", str(tmp_path / name), "--format", "md")
    return proc.stderr, report.stdout.splitlines()[0]


def test_sys_exit_is_an_exit_with_its_status_and_an_exception_is_a_crash(tmp_path: Path) -> None:
    stderr, title = _run(tmp_path, "usage", USAGE_ERROR)
    assert "the following arguments are required: --data" in stderr  # argparse's own words, as under python
    assert "usage.py: exited with status 2 (no exception) after" in stderr, stderr
    assert "crashed" not in stderr
    assert title.endswith("usage.py exited with status 2 (no exception)"), title
    stderr, title = _run(tmp_path, "raises", RAISES)
    assert "FileNotFoundError: missing.csv" in stderr
    assert "raises.py: crashed (exit status 1) after" in stderr, stderr
    assert title.endswith("raises.py crashed (exit status 1)"), title
