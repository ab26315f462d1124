"""The files a fix edits, and the record of what was changed and what could not be.

Apart from the planners (:mod:`.plan`) because every planner shares it: :class:`_Edits`
reads each file once, applies one edit after another on top of the fixes planned before,
finds a recorded line again after earlier edits moved it, and refuses, with the reason, a
file that is not the user's own (a library), gone, or edited since the run. A refusal is a
:attr:`Fix.not_patched` sentence, never a guess.
"""

from __future__ import annotations

import os
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..session.session import Session
from . import cst


@dataclass
class Fix:
    """One finding's patch: new text per file, what was changed, and what could not be."""

    rule: str
    title: str
    key: str | None = None
    """The finding's cause (its rule when it names none): what must be gone after the fix."""
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Absolute path -> (text at the run, patched text)."""
    changes: list[str] = field(default_factory=list)
    not_patched: list[str] = field(default_factory=list)
    planned: bool = True
    """False where the rule has no planner: ``not_patched`` holds its one line."""
    after: list[str] = field(default_factory=list)
    """Rules whose patches this one is made on top of (the same file, planned before it):
    it applies after them, in order."""


class _Edits:
    """The files a fix edits, each read once and edited in turn (on top of ``base``: the
    texts the fixes planned before this one left)."""

    def __init__(self, session: Session, fix: Fix, base: dict[str, str] | None = None,
                 base_rules: dict[str, list[str]] | None = None) -> None:
        self.session, self.fix = session, fix
        self.base = base or {}
        self.base_rules = base_rules or {}
        started = session.run.get("started")
        self.started = float(started) if isinstance(started, (int, float)) else None
        self.last_line: int | None = None
        self.guard_place: str | None = None
        """``file:first to line last`` of the top-level code a guard edit could not move."""

    def current(self, path: str) -> str:
        """``path``'s text with the edits planned so far (this fix's and the earlier ones')."""
        path = os.path.realpath(path) if path else path
        done = self.fix.files.get(path)
        return done[1] if done else self.base[path] if path in self.base else self._read(path)

    def edit(self, path: str, what: str, change: Callable[[str, int], str], line: int | None = None) -> bool:
        """``change(text, line)`` on ``path``: ``line`` the recorded line where the text has
        not moved since the run, else where that line is now (the edits planned before
        this one may have added lines above it), never a guess: a line an earlier edit
        rewrote into more or fewer lines is refused."""
        path = os.path.realpath(path) if path else path  # one key per file (macOS: /tmp is /private/tmp)
        why = self._refuse(path)
        if why is None and line is not None and self.started is not None and _mtime(path) > self.started:
            # the line the run recorded may hold something else now (a line added above it):
            # the run recorded no hash of the file, so nothing tells what moved where
            why = ("the file was edited since the run, so line numbers may have moved; profile the "
                   "script again for a patch")
        at, text = line, ""
        if why is None:
            text = self.current(path)
            if line is not None:
                at = moved_line(self._read(path), text, line)
                if at is None:
                    by = ("an earlier edit of this fix" if path in self.fix.files
                          else "the patch for " + ", ".join(self.base_rules.get(path) or ["another finding"]))
                    why = f"line {line} was rewritten by {by}; apply that patch first and profile the script again"
        where = f"{self.short(path)}:{at or line}" if line else self.short(path)
        if why is None:
            before = self.fix.files[path][0] if path in self.fix.files else self.base.get(path, self._read(path))
            try:
                after = change(text, at or 0)
            except cst.NotFound as exc:
                why = str(exc)
            else:
                self.fix.files[path] = (before, after)
                self.fix.changes.append(f"{where}: {what}")
                self.last_line = at
                return True
        self.fix.not_patched.append(f"not patched: edit {where} by hand ({what}): {why}")
        return False

    def _read(self, path: str) -> str:
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()

    def _refuse(self, path: str) -> str | None:
        """Why ``path`` is not the user's own file to edit (None: it is)."""
        if not path or not os.path.isfile(path):
            return "the file is not there any more"
        real = os.path.realpath(path)
        libs = {os.path.realpath(p) for p in (sysconfig.get_paths().get("purelib"), sysconfig.get_paths().get("platlib"),
                                              sysconfig.get_paths().get("stdlib")) if p}
        if any(real.startswith(lib + os.sep) for lib in libs) or "site-packages" in real.split(os.sep):
            return "it is built inside a library, not in your code"
        if not real.startswith(self.root() + os.sep):
            return f"the file is outside the script's directory {self.root()}"
        try:
            self._read(path)
        except (OSError, UnicodeDecodeError) as exc:
            return f"cannot read it ({exc})"
        return None

    def root(self) -> str:
        return os.path.dirname(main_script(self.session) or os.path.join(os.getcwd(), "x"))

    def short(self, path: str) -> str:
        return os.path.relpath(path, self.root()) if path.startswith(self.root() + os.sep) else path


def main_script(session: Session) -> str | None:
    """The absolute path of the script the run ran (None: a module, or unknown)."""
    target = session.run.get("target")
    if not target or session.run.get("module"):
        return None
    path = str(target)
    return os.path.realpath(path if os.path.isabs(path) else os.path.join(str(session.run.get("cwd") or ""), path))


def moved_line(before: str, after: str, line: int) -> int | None:
    """Where ``before``'s ``line`` is in ``after`` (the same text with edits: lines added,
    one line rewritten in place, code indented under a guard); None where that line was
    rewritten into more or fewer lines, or removed."""
    if before == after:
        return line
    import difflib

    a = [x.strip() for x in before.splitlines()]
    b = [x.strip() for x in after.splitlines()]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if i1 <= line - 1 < i2:
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                return j1 + (line - 1 - i1) + 1
            return None
    return None


def _abs(session: Session, path: str) -> str:
    return os.path.realpath(path if os.path.isabs(path) else os.path.join(str(session.run.get("cwd") or ""), path))


def _line_of(where: Any) -> int | None:
    try:
        return int(str(where).rsplit(":", 1)[1])
    except (IndexError, ValueError):
        return None


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
