"""Regenerate the TUI screenshots in ``screenshots/`` (one SVG per panel, plus help and the
``p`` key's patch of the top finding).

Runs a real example through the real CLI (``mpsprof run --headless``: the recording is
what ``mpsprof view`` opens), opens the recording in the app headlessly and saves what
each panel looks like; the Ranks panel comes from a 2-rank torchrun (gloo) run of
``tests/scripts_dist/ddp_straggler.py``, whose rank 1 is slow to load its data::

    OMP_NUM_THREADS=1 python scripts/make_screenshots.py [--steps 200] [--size 140x42]

The runs are recorded into ``mpsprof-runs/screenshots`` and ``screenshots-ddp`` (ignored
by git; replaced each time). A headless run prints to the terminal instead of
``output.log``; its standard output is saved there so the Log panel has the script's
real output to show.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "screenshots"
EXAMPLE = "examples/slow_dataloader.py"
DDP_SCRIPT = "tests/scripts_dist/ddp_straggler.py"


def record(run_dir: Path, steps: int, ranks: int = 0) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", STEPS=str(steps))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "mpsprofiler", "run", "--headless", "-o", str(run_dir)]
    cmd += ["--nproc-per-node", str(ranks), DDP_SCRIPT] if ranks else [EXAMPLE, "--steps", str(steps)]
    print("$ python", " ".join(cmd[1:]), flush=True)
    proc = subprocess.run(cmd, cwd=REPO, env=env, check=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    (run_dir / "output.log").write_bytes(proc.stdout)


async def shoot(run_dir: Path, size: tuple[int, int], ddp_dir: Path) -> list[Path]:
    sys.path.insert(0, str(REPO))
    from mpsprofiler.session.recording import load_run
    from mpsprofiler.tui.app import recorded_app
    from mpsprofiler.tui.panels import DISTRIBUTED_ONLY, PANELS

    written: list[Path] = []
    app = recorded_app(load_run(run_dir))
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for number, pid in enumerate((p.id for p in PANELS), start=1):
            if pid in DISTRIBUTED_ONLY:
                continue
            await pilot.press(str(number))
            await pilot.pause(0.2)
            written.append(Path(app.save_screenshot(path=str(OUT), filename=f"{number}-{pid}.svg")))
        await pilot.press("question_mark")
        await pilot.pause(0.2)
        written.append(Path(app.save_screenshot(path=str(OUT), filename=f"{len(PANELS) + 1}-help.svg")))
        await pilot.press("escape", "2", "p")  # the selected finding's fix as a diff (mpsprof patch)
        await pilot.pause(0.5)
        written.append(Path(app.save_screenshot(path=str(OUT), filename="12-patch.svg")))
    app = recorded_app(load_run(ddp_dir))
    app.animation_level = "none"
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        for number, pid in enumerate((p.id for p in PANELS), start=1):
            if pid in DISTRIBUTED_ONLY:
                await pilot.press(str(number))
                await pilot.pause(1.2)  # charts redraw at most once a second
                written.append(Path(app.save_screenshot(path=str(OUT), filename=f"{number}-{pid}.svg")))
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="steps of the example run")
    parser.add_argument("--size", default="140x42", help="terminal size, COLUMNSxROWS")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.lower().split("x"))
    OUT.mkdir(exist_ok=True)
    run_dir = Path("mpsprof-runs") / "screenshots"  # relative: paths on screen as a user sees them
    ddp_dir = Path("mpsprof-runs") / "screenshots-ddp"
    os.chdir(REPO)
    for stale in (run_dir, ddp_dir):
        shutil.rmtree(stale, ignore_errors=True)
    record(run_dir, args.steps)
    record(ddp_dir, args.steps, ranks=2)
    for path in asyncio.run(shoot(run_dir, (width, height), ddp_dir)):
        print("wrote", path.relative_to(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
