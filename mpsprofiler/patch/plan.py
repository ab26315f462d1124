"""From a run's findings to edits of the user's files: which line, which change.

Every place comes from the recording (the probe's file:line of a DataLoader's
construction, of a ``set_num_threads`` call, of the line adding to a growing container,
of a ``+=`` that keeps a graph; the crash's own frame), every value from the finding's
fix (the same ``--set`` change ``mpsprof try`` would make: :mod:`..experiment.candidates`).
A place that is not in the user's own files, or whose construct is no longer at the line,
is a :attr:`Fix.not_patched` sentence, never a guess.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..diagnosis.findings import Finding
from ..experiment.candidates import candidate_for
from ..session.session import Session
from . import cst

KEEP_LAST = 100
"""Items a bounded container keeps (the last ones; the rest were never read back)."""
GUARD_START_METHODS = ("spawn", "forkserver")
"""Start methods whose workers re-import the script (macOS and Windows: spawn; Linux from
Python 3.14: forkserver; ``multiprocessing`` docs, "Contexts and start methods")."""


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


# -- the rules ---------------------------------------------------------------------------
DATALOADER_POSITIONAL = ("dataset", "batch_size", "shuffle", "sampler", "batch_sampler", "num_workers", "collate_fn",
                         "pin_memory", "drop_last", "timeout", "worker_init_fn", "multiprocessing_context",
                         "generator")
"""``torch.utils.data.DataLoader``'s parameters that may be passed by position, in order
(the same from torch 1.7 on; ``prefetch_factor``, ``persistent_workers`` and later ones are
keyword-only)."""


def dataloader_positional() -> tuple[str, ...]:
    """DataLoader's positional parameters: from its own signature where torch is imported
    in this process already (no cost), else :data:`DATALOADER_POSITIONAL`."""
    torch = sys.modules.get("torch")
    loader = getattr(getattr(getattr(torch, "utils", None), "data", None), "DataLoader", None)
    if loader is not None:
        import inspect

        try:
            params = inspect.signature(loader).parameters.values()
        except (TypeError, ValueError):
            return DATALOADER_POSITIONAL
        names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        if names and names[0] == "dataset":
            return names
    return DATALOADER_POSITIONAL


def _workers(d: dict[str, Any] | Any) -> int | None:
    n = d.get("num_workers") if isinstance(d, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def _loaders(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    candidate = candidate_for(f, facts)
    per = (candidate.settings.get("dataloader") if candidate else None) or {}
    if f.rule == "spawn-bootstrap-crash":
        _guard(e, "spawned DataLoader workers re-import the script")
        return
    if not per:
        e.fix.not_patched.append(f"not patched: the fix of {f.rule} names no DataLoader argument to set")
        return
    loaders = e.session.dataloaders
    positional = dataloader_positional()
    for key, fields in per.items():
        targets = list(loaders.values()) if key == "*" else [d for d in loaders.values() if str(d.get("created")) == key]
        named = facts.get("loader_created")
        if key == "*" and fields.get("persistent_workers") and named is not None:
            # the loader whose workers restart (the finding's), not every loader of the script
            targets = [d for d in targets if str(d.get("created")) == str(named)] or targets
        if not targets:
            e.fix.not_patched.append(f"not patched: the run recorded no place for DataLoader {key}; set "
                                     f"{_args(fields)} where it is built, by hand")
        done: set[tuple[str, int]] = set()
        for d in targets:
            changes = {k: repr(v) for k, v in fields.items()}
            n = fields.get("num_workers")
            if isinstance(n, int) and n > 0 and not d.get("persistent_workers"):
                changes["persistent_workers"] = "True"  # workers kept across epochs, not re-spawned
            file, line = str(d.get("file") or ""), int(d.get("line") or 0)
            workers = n if isinstance(n, int) else _workers(d)
            if changes.get("persistent_workers") == "True" and not (workers and workers > 0):
                # torch refuses it without workers ("persistent_workers option needs num_workers > 0")
                if key != "*":
                    e.fix.not_patched.append(f"not patched: DataLoader {d.get('created')} runs with num_workers="
                                             f"{workers}, and persistent_workers needs workers")
                continue
            if not file or not line:
                e.fix.not_patched.append(f"not patched: the run recorded no line for DataLoader {d.get('created')}; "
                                         f"set {_args(changes)} where it is built, by hand")
                continue
            if (file, line) in done:
                continue
            done.add((file, line))
            if changes.get("persistent_workers") == "True" and "num_workers" not in changes:
                others = [_workers(o) for o in loaders.values() if str(o.get("file") or "") == file
                          and int(o.get("line") or 0) == line]
                if any(not w or w <= 0 for w in others):
                    e.fix.not_patched.append(
                        f"not patched: edit {e.short(file)}:{line} by hand ({_args(changes)}): the line also built a "
                        "DataLoader with num_workers=0 in this run, where persistent_workers=True is a ValueError")
                    continue

            def change(s: str, ln: int, c: dict[str, str] = changes) -> str:
                return cst.set_keywords(s, ln, ("DataLoader",), c, positional)

            ok = e.edit(file, _args(changes), change, line)
            start = str(d.get("multiprocessing_context") or "") or default_start_method(e.session)
            if ok and isinstance(n, int) and n > 0 and start in GUARD_START_METHODS:
                _guard(e, f"workers started by {start} re-import the script")
        if key == "*" and fields.get("persistent_workers") and targets and not done:
            e.fix.not_patched.append("not patched: no DataLoader of the run has workers (num_workers > 0), and "
                                     "persistent_workers needs them; nothing to change")


def default_start_method(session: Session) -> str:
    """multiprocessing's default where the run ran (its docs, "Contexts and start methods")."""
    platform = str(session.env.get("platform") or sys.platform)
    if platform.startswith(("darwin", "win")):
        return "spawn"
    version = tuple(int(p) for p in str(session.env.get("python") or "3.0").split(".")[:2] if p.isdigit())
    return "forkserver" if version >= (3, 14) else "fork"


def _guard(e: _Edits, why: str) -> None:
    script = main_script(e.session)
    if script is None:
        e.fix.not_patched.append("not patched: the run was a module (-m); guard its start with "
                                 "`if __name__ == \"__main__\":` by hand")
        return
    try:
        if cst.has_main_guard(e.current(script)):
            return
    except (cst.NotFound, OSError, UnicodeDecodeError):
        pass  # said by the edit below
    e.edit(script, f'the training under `if __name__ == "__main__":` ({why})', lambda s, _: cst.add_main_guard(s))


def _args(fields: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in fields.items())


def _threads(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    candidate = candidate_for(f, facts)
    n = ((candidate.settings.get("torch") or {}).get("num_threads") if candidate else None)
    if not isinstance(n, int):
        e.fix.not_patched.append("not patched: the finding suggests no thread count")
        return
    calls = [c for c in e.session.model.get("threads_set") or [] if isinstance(c, dict) and c.get("file")]
    if calls:  # the last call made is the one in force
        last = calls[-1]
        line = int(last.get("line") or 0)
        e.edit(str(last["file"]), f"torch.set_num_threads({n})",
               lambda s, ln: cst.set_first_argument(s, ln, ("set_num_threads",), str(n)), line)
        return
    script = main_script(e.session)
    if script is None:
        e.fix.not_patched.append(f"not patched: the run was a module (-m); call torch.set_num_threads({n}) by hand")
        return
    e.edit(script, f"torch.set_num_threads({n}) after `import torch`",
           lambda s, _: cst.insert_after_import(s, "torch", "{name}.set_num_threads(" + str(n) + ")"))


def _watermark(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    candidate = candidate_for(f, facts)
    env = (candidate.settings.get("env") if candidate else None) or {}
    script = main_script(e.session)
    if not env or script is None:
        e.fix.not_patched.append("not patched: no watermark ratio suggested, or the run was a module (-m)")
        return
    e.edit(script, " and ".join(f"{k}={v}" for k, v in env.items()) + " before `import torch`",
           lambda s, _: cst.set_environ_first(s, dict(env)))


def _carry(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    file, line = str(facts.get("graph_carry_file") or ""), _line_of(facts.get("graph_carry_line"))
    if not file or not line:
        e.fix.not_patched.append("not patched: the run recorded no line for the kept graph")
        return
    chosen: list[str] = []

    def change(s: str, ln: int) -> str:
        text, method = cst.augassign_detached(s, ln)
        chosen.append(method)
        return text

    if e.edit(file, "add the value without its graph (`.item()`, or `.detach()` where the sum is used as a tensor)",
              change, line):
        what = ("add a number (`.item()`), not the tensor and its graph" if chosen[0] == "item" else
                "add the tensor without its graph (`.detach()`: the sum is used as a tensor later)")
        head = e.fix.changes[-1].split(": ", 1)[0]
        e.fix.changes[-1] = f"{head}: {what}"


def _container(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    sites = [s for s in e.session.leaks.sites if s.holder and s.holder_file and s.holder_line
             and len(s.steps) >= 2 and s.alive >= 2]
    if not sites:
        e.fix.not_patched.append("not patched: the run found no line that keeps the tensors "
                                 "(see the finding for what grows)")
        return
    site = sites[0]
    if site.grad:  # the graph is what grows: keep the tensor without it
        e.edit(site.holder_file, f"keep `.detach()`ed tensors in `{site.holder}` (no autograd graph)",
               lambda s, ln: cst.added_value_detached(s, ln), site.holder_line)
        return
    made: list[int] = []

    def bound(s: str, _: int) -> str:
        text, line = cst.bounded_container(s, site.holder, KEEP_LAST)
        made.append(line)
        return text

    if e.edit(site.holder_file, f"`{site.holder}` keeps the last {KEEP_LAST} only (collections.deque)", bound):
        e.fix.changes[-1] = e.fix.changes[-1].replace(e.short(site.holder_file) + ":",
                                                      f"{e.short(site.holder_file)}:{made[0]}:", 1)


def _float64(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    if f.rule == "float64-mps-crash":
        file, line = str(facts.get("crash_file") or ""), facts.get("crash_line")
        file = _abs(e.session, file) if file else ""
    else:
        sites = e.session.ops.top_float64(1)
        file, line = (sites[0].file, sites[0].line) if sites else ("", None)
    if not file or not isinstance(line, int):
        e.fix.not_patched.append("not patched: the run recorded no line that makes the float64 tensor")
        return
    made: list[int] = []

    def change(s: str, ln: int) -> str:
        text, lines = cst.float32_at(s, ln)
        made.extend(lines)
        return text

    if e.edit(file, f"float64 made float32 where it is made (for the float64 ops at line {line})", change, line):
        e.fix.changes[-1] = e.fix.changes[-1].replace(f":{e.last_line}:", ":" + ",".join(map(str, made)) + ":", 1)


PLANNERS: dict[str, Callable[[_Edits, Finding, dict[str, Any]], None]] = {
    "dataloader-stall": _loaders,
    "dataloader-stall-critical": _loaders,
    "worker-respawn": _loaders,
    "pin-memory-mps": _loaders,
    "spawn-bootstrap-crash": _loaders,
    "thread-oversubscription": _threads,
    "memory-pressure": _watermark,
    "cache-growth": _watermark,
    "graph-kept-across-steps": _carry,
    "leak-site-container": _container,
    "leak-site-graph": _container,
    "tensor-leak": _container,
    "float64-mps": _float64,
    "float64-mps-crash": _float64,
}
"""The rules whose fix is an edit of the script, and who writes it."""


def plan(session: Session, findings: list[Finding], facts: dict[str, Any], rule: str | None = None) -> list[Fix]:
    """One :class:`Fix` per finding with a code fix (only ``rule`` when given).

    Fixes of one file are planned in turn, each on the text the ones before it left (its
    ``before``), so their patches apply one after the other (:attr:`Fix.after` names the
    ones it needs first); two findings whose fix is the same edit (a leak and its line)
    get the same patch."""
    out: list[Fix] = []
    state: dict[str, str] = {}  # path -> its text after the fixes planned so far
    rules: dict[str, list[str]] = {}  # path -> the rules whose fixes edit it, in order
    alone: list[tuple[dict[str, tuple[str, str]], Fix]] = []  # (a fix's files as if it were the only one, it)
    for f in findings:
        if (rule is not None and f.rule != rule) or f.rule not in PLANNERS:
            continue
        fix = _plan_one(session, f, facts, {}, {})
        same = next((done for files, done in alone if files and files == fix.files), None)
        if same is not None:
            out.append(Fix(rule=f.rule, title=f.title, key=f.key, files=dict(same.files), changes=list(same.changes),
                           not_patched=list(fix.not_patched), after=list(same.after)))
            continue
        files = fix.files
        if any(p in state for p in fix.files):
            fix = _plan_one(session, f, facts, state, rules)
            fix.after = sorted({r for p in fix.files for r in rules.get(p, [])}, key=[x.rule for x in out].index)
        alone.append((files, fix))
        for p, (_, text) in fix.files.items():
            state[p] = text
            rules.setdefault(p, []).append(f.rule)
        out.append(fix)
    return out


def _plan_one(session: Session, f: Finding, facts: dict[str, Any], base: dict[str, str],
              rules: dict[str, list[str]]) -> Fix:
    fix = Fix(rule=f.rule, title=f.title, key=f.key)
    try:
        PLANNERS[f.rule](_Edits(session, fix, base, rules), f, {**facts, **f.facts})
    except (OSError, UnicodeDecodeError) as exc:
        fix.not_patched.append(f"not patched: {exc}")
    fix.files = {p: (b, a) for p, (b, a) in fix.files.items() if a != b}
    return fix


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0
