"""Regenerate ``screenshots/13-patch-prove.svg``: the TUI's ``p`` key on a finding, then
``P``: the patch of the script proven by A/B runs, the verdict under the diff.

Copies ``examples/slow_dataloader.py`` to ``<tmp>/mpsprof-demo/train.py`` (short paths on
screen, as a user's project), records it through the real CLI (``mpsprof run --headless
--max-steps``), opens the recording in the app headlessly, selects the data-loader
finding, presses ``p`` and ``P`` and saves the screen once the proof has its verdict::

    OMP_NUM_THREADS=1 python scripts/make_patch_screenshot.py [--steps 10] [--pairs 3] [--size 100x30]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from screenshot_run import record

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "screenshots"
NAME = "13-patch-prove.svg"
ARGS = ["--batch-size", "4", "--delay", "0.01"]
"""Fewer, longer sleeps than the example's defaults (as make_try_screenshot.py): on a busy
machine every short sleep also waits for a core."""


async def shoot(run_dir: Path, size: tuple[int, int], steps: int, pairs: int) -> Path:
    sys.path.insert(0, str(REPO))
    from mpsprofiler.experiment.trial import TrialConfig
    from mpsprofiler.session.recording import load_run
    from mpsprofiler.tui.app import recorded_app

    app = recorded_app(load_run(run_dir))
    app.prove_config = TrialConfig(steps=steps, pairs=pairs, budget_s=600, min_pairs=min(3, pairs))
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.press("2")
        stall = next(f.rule for f in app.state.findings if f.rule.startswith("dataloader-stall"))
        app.query_one("FindingsPanel").select_rule(stall)  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause(0.5)
        await pilot.press("P")
        while app._trial is not None:
            await asyncio.sleep(0.5)
        await pilot.pause(0.5)
        for toast in app.query("Toast"):
            toast.remove()
        await pilot.pause(0.2)
        return Path(app.save_screenshot(path=str(OUT), filename=NAME))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="steps per proof run")
    parser.add_argument("--pairs", type=int, default=3, help="A/B pairs")
    parser.add_argument("--size", default="100x30", help="terminal size, COLUMNSxROWS")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    project = Path(tempfile.gettempdir()) / "mpsprof-demo"
    shutil.rmtree(project, ignore_errors=True)
    project.mkdir()
    shutil.copy(REPO / "examples" / "slow_dataloader.py", project / "train.py")
    os.chdir(project)
    run_dir = Path("mpsprof-runs") / "demo"  # relative: paths on screen as a user sees them
    record(run_dir, ["train.py", *ARGS])  # the proof's runs import this mpsprofiler too
    started = time.monotonic()
    path = asyncio.run(shoot(run_dir, (width, height), args.steps, args.pairs))
    print(f"wrote {path.relative_to(REPO)} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
