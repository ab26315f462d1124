"""Where the bundled example scripts are: inside the wheel, or the repo's ``examples/``."""

from __future__ import annotations

from pathlib import Path

DEMO = "slow_dataloader.py"


def examples_dir() -> Path:
    packaged = Path(__file__).parent / "_examples"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[1] / "examples"


def demo_script() -> Path:
    return examples_dir() / DEMO
