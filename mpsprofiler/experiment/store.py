"""Experiments live beside the run they tried to fix: ``RUN_DIR/experiments.json``.

A list of result documents (see :meth:`Trial.result`), newest last, written atomically;
each experiment's own runs are in ``RUN_DIR/experiments/<n>-<name>/``. Reports read the
list back to say what was proven ("proven: 2.9x faster with num_workers=4 ...").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..rundir import EXPERIMENTS_DIR, EXPERIMENTS_FILE, append_experiment, read_experiments, write_text_atomic
from ..settings import label

__all__ = [
    "EXPERIMENTS_DIR", "EXPERIMENTS_FILE", "ExperimentDirError", "TryUsageError", "check_experiments_root",
    "experiment_dir", "folder_label", "folder_slug", "load_experiments", "save_experiment", "save_result",
]

RESULT_FILE = "experiment.json"

load_experiments = read_experiments
"""The stored results (the run directory's owner reads them: :func:`rundir.read_experiments`)."""
save_experiment = append_experiment
"""Append one result (:func:`rundir.append_experiment`)."""


class TryUsageError(Exception):
    """What ``mpsprof try`` cannot do as asked (said as a usage error; the TUI shows it)."""


class ExperimentDirError(TryUsageError):
    """``RUN_DIR/experiments`` is not a directory of the run's own (a planted symlink)."""


def save_result(out_dir: Path, result: dict[str, Any]) -> str | None:
    """``OUT_DIR/experiment.json``: the experiment's own record, beside its runs."""
    try:
        Path(out_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        return f"cannot write {out_dir}: {exc.strerror or exc}"
    return write_text_atomic(Path(out_dir) / RESULT_FILE, json.dumps(result, indent=2, default=str))


def experiment_dir(run_dir: Path, label: str) -> Path:
    """A fresh ``RUN_DIR/experiments/<n>-<label>`` (not created here; ``RUN_DIR/experiments``
    is). Raises :class:`ExperimentDirError` when ``RUN_DIR/experiments`` is a symlink or not
    a directory: the runs must land inside the run directory, never where a link points."""
    root = Path(run_dir) / EXPERIMENTS_DIR
    check_experiments_root(root)
    slug = folder_slug(label)
    n = 1
    while (root / f"{n}-{slug}").exists():
        n += 1
    return root / f"{n}-{slug}"


FOLDER_CHARS = 80
"""The longest folder name made of a change's title (``num_workers_4_persistent_workers_true_``
and the loader's name fit)."""


def folder_slug(text: str) -> str:
    """``text`` as a folder name: letters, digits, ``-``, ``.`` and single ``_`` (for every
    run of other characters), at most :data:`FOLDER_CHARS`."""
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)
    while "__" in slug:
        slug = slug.replace("__", "_")
    return slug.strip("_")[:FOLDER_CHARS].strip("_") or "change"


def folder_label(settings: dict[str, Any], loader: str | None = None) -> str:
    """The folder name of an experiment of ``settings``: its title as ``try`` and the TUI
    show it (:func:`settings.label`, the loader named as the finding names it), as a
    folder name (:func:`folder_slug`): ``num_workers_4_the_Trainer_s_training_DataLoader``."""
    return folder_slug(label(settings, loader).replace(", ", "_"))


def check_experiments_root(root: Path) -> None:
    """Create ``root`` (0700) or accept it only as a real directory (``lstat``: a symlink
    is not followed). Raises :class:`ExperimentDirError`."""
    import os
    import stat

    try:
        os.mkdir(root, 0o700)
        return
    except FileExistsError:
        pass
    except OSError as exc:
        raise ExperimentDirError(f"cannot create {root}: {exc.strerror or exc}") from None
    st = os.lstat(root)
    if stat.S_ISLNK(st.st_mode):
        raise ExperimentDirError(f"{root} is a symbolic link; the experiment's runs go inside the run directory, "
                                 "never where a link points. Remove the link or use -o DIR")
    if not stat.S_ISDIR(st.st_mode):
        raise ExperimentDirError(f"{root} exists and is not a directory; remove it or use -o DIR")
