"""The unified diff of a :class:`~.plan.Fix`, and where it is written.

Paths are relative to the script's directory with ``a/`` and ``b/`` prefixes, so the file
applies with ``git apply`` and ``patch -p1`` run there.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ..rundir import fix_file
from .edits import Fix

NO_NEWLINE = "\\ No newline at end of file\n"


def unified(fix: Fix, root: str) -> str:
    """The diff of every file the fix edits ("" when it edits none)."""
    out: list[str] = []
    for path in sorted(fix.files):
        before, after = fix.files[path]
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        lines = difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                     f"a/{rel}", f"b/{rel}", n=3)
        out.append(f"diff --git a/{rel} b/{rel}\n")
        for line in lines:
            out.append(line if line.endswith("\n") else line + "\n" + NO_NEWLINE)
    return "".join(out)


def patch_file(run_dir: Path, rule: str) -> Path:
    """``RUN_DIR/fix-<rule>.patch`` (the rule id kept to safe file-name characters, as the
    TUI's ``fix-<rule>.txt``)."""
    return fix_file(run_dir, rule, ".patch")


def write_patch(run_dir: Path | None, fix: Fix, root: str) -> tuple[str, Path | None, str | None]:
    """(the diff, the file it was written to, why not): one place for the CLI and the TUI."""
    from ..rundir import write_text_atomic

    text = unified(fix, root)
    if not text:
        return text, None, None
    if run_dir is None:
        return text, None, "this run has no run directory"
    path = patch_file(run_dir, fix.rule)
    error = write_text_atomic(path, text)
    return text, (None if error else path), error


def describe(fix: Fix, text: str, path: Path | None, error: str | None, root: str) -> str:
    """What the command prints (and the TUI shows) for one fix, the diff last."""
    out = [f"── {fix.rule}: {fix.title} ──"]
    out += [f"  {line}" for line in fix.not_patched]
    if not text:
        if not fix.not_patched:
            out.append("  nothing to change: the files already have the fix")
        return "\n".join(out) + "\n"
    out += [f"  {line}" for line in fix.changes]
    if fix.after:
        out.append(f"  made on top of the patch for {', '.join(fix.after)} (the same file): apply that one first")
    if path is not None:
        out.append(f"  patch: {path}")
        # the command runs in ``root``: the patch's path as seen from there (a relative
        # path printed from the working directory would name another file)
        there = _from(root, path)
        out.append(f"  apply it from {root}:  git apply {there}   (or: patch -p1 < {there})")
    else:
        out.append(f"  patch not written: {error}")
    return "\n".join(out) + "\n\n" + text


def _from(root: str, path: Path) -> str:
    """``path`` as a command run in ``root`` must name it: relative to ``root`` when that
    is short (inside it or one level up), else absolute; shell-quoted."""
    import shlex

    absolute = os.path.abspath(path)
    try:
        rel = os.path.relpath(absolute, os.path.abspath(root))
    except ValueError:  # another drive (Windows)
        rel = absolute
    return shlex.quote(rel if not rel.startswith(os.pardir + os.sep + os.pardir) else absolute)
