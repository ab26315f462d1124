"""The recording the screenshot scripts open: a script run headless through this checkout's
CLI (``make_try_screenshot.py``, ``make_patch_screenshot.py``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def record(run_dir: Path, script_args: list[str], max_steps: int = 40) -> None:
    """``mpsprof run --headless --max-steps N`` of ``script_args`` in the current directory,
    one torch thread; this checkout's mpsprofiler goes on PYTHONPATH, for this process too
    (the A/B runs the screenshots show start from it)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    os.environ["PYTHONPATH"] = env["PYTHONPATH"]
    cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir), "--max-steps", str(max_steps),
           *script_args]
    print("$ python", " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
