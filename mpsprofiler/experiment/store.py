"""Experiments live beside the run they tried to fix: ``RUN_DIR/experiments.json``.

A list of result documents (see :meth:`Trial.result`), newest last, written atomically;
each experiment's own runs are in ``RUN_DIR/experiments/<n>-<name>/``. Reports read the
list back to say what was proven ("proven: 2.9x faster with num_workers=4 ...").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..rundir import write_text_atomic

EXPERIMENTS_FILE = "experiments.json"
EXPERIMENTS_DIR = "experiments"
RESULT_FILE = "experiment.json"
MAX_KEPT = 100


def load_experiments(run_dir: Path | None) -> list[dict[str, Any]]:
    """The stored results; [] when there are none or the file is unreadable."""
    if run_dir is None:
        return []
    try:
        data = json.loads((Path(run_dir) / EXPERIMENTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    items = data.get("experiments") if isinstance(data, dict) else None
    return [d for d in items if isinstance(d, dict)] if isinstance(items, list) else []


def save_experiment(run_dir: Path, result: dict[str, Any]) -> str | None:
    """Append one result; returns an error message instead of raising."""
    items = load_experiments(run_dir) + [result]
    text = json.dumps({"schema": 1, "experiments": items[-MAX_KEPT:]}, indent=2, default=str)
    return write_text_atomic(Path(run_dir) / EXPERIMENTS_FILE, text)


def save_result(out_dir: Path, result: dict[str, Any]) -> str | None:
    """``OUT_DIR/experiment.json``: the experiment's own record, beside its runs."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        return f"cannot write {out_dir}: {exc.strerror or exc}"
    return write_text_atomic(Path(out_dir) / RESULT_FILE, json.dumps(result, indent=2, default=str))


def experiment_dir(run_dir: Path, label: str) -> Path:
    """A fresh ``RUN_DIR/experiments/<n>-<label>`` (not created here)."""
    root = Path(run_dir) / EXPERIMENTS_DIR
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in label)[:50] or "change"
    n = 1
    while (root / f"{n}-{slug}").exists():
        n += 1
    return root / f"{n}-{slug}"
