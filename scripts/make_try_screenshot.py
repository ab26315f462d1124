"""Regenerate ``screenshots/11-try.svg``: the TUI's ``t`` key proving a finding's fix.

Records ``examples/slow_dataloader.py`` through the real CLI (``mpsprof run --headless
--max-steps``), opens the recording in the app headlessly, selects the data-loader
finding, presses ``t`` and saves the screen once the A/B experiment has its verdict::

    OMP_NUM_THREADS=1 python scripts/make_try_screenshot.py [--steps 40] [--pairs 3]

The run is recorded into ``mpsprof-runs/screenshots-try`` (ignored by git; replaced).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
from pathlib import Path

from screenshot_run import record

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "screenshots"
EXAMPLE = ["examples/slow_dataloader.py", "--batch-size", "4", "--delay", "0.01"]
"""Fewer, longer sleeps than the example's defaults: on a busy machine every short sleep
also waits for a core, which would make each run much longer."""


async def shoot(run_dir: Path, size: tuple[int, int], steps: int, pairs: int) -> Path:
    sys.path.insert(0, str(REPO))
    from mpsprofiler.experiment.trial import TrialConfig
    from mpsprofiler.session.recording import load_run
    from mpsprofiler.tui.app import recorded_app

    app = recorded_app(load_run(run_dir))
    app.try_config = TrialConfig(steps=steps, pairs=pairs, budget_s=600)
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.press("2")
        stall = next(f.rule for f in app.state.findings if f.rule.startswith("dataloader-stall"))
        app.query_one("FindingsPanel").select_rule(stall)  # type: ignore[attr-defined]
        await pilot.pause()
        await pilot.press("t")
        while app._trial is not None:
            await asyncio.sleep(0.5)
        await pilot.pause(0.5)
        for toast in app.query("Toast"):
            toast.remove()
        await pilot.pause(0.2)
        return Path(app.save_screenshot(path=str(OUT), filename="11-try.svg"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20, help="steps per experiment run")
    parser.add_argument("--pairs", type=int, default=5, help="A/B pairs")
    parser.add_argument("--size", default="150x42", help="terminal size, COLUMNSxROWS")
    parser.add_argument("--script", nargs="+", default=EXAMPLE, metavar="ARG",
                        help="the script and its arguments (default: the bundled slow-DataLoader example)")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    os.chdir(REPO)
    run_dir = Path("mpsprof-runs") / "screenshots-try"
    shutil.rmtree(run_dir, ignore_errors=True)
    record(run_dir, args.script)  # the experiment's runs import this mpsprofiler too
    started = time.monotonic()
    path = asyncio.run(shoot(run_dir, (width, height), args.steps, args.pairs))
    print(f"wrote {path.relative_to(REPO)} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
