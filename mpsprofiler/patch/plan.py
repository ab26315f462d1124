"""From a run's findings to edits of the user's files: which line, which change.

Every place comes from the recording (the probe's file:line of a DataLoader's
construction, of a ``set_num_threads`` call, of the line adding to a growing container,
of a ``+=`` that keeps a graph; the crash's own frame), every value from the finding's
fix (the same ``--set`` change ``mpsprof try`` would make: :mod:`..experiment.candidates`).
A place that is not in the user's own files, or whose construct is no longer at the line,
is a :attr:`Fix.not_patched` sentence, never a guess. A finding whose rule has no planner
gets a :class:`Fix` too, with no files and its one "not patched" line (:mod:`.unplanned`).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libcst

from ..diagnosis.analyzers import anomaly
from ..diagnosis.analyzers.cli_option import Option, call_option
from ..diagnosis.analyzers.float64_fix import default_setter, other_maker_lines
from ..diagnosis.analyzers.framework_place import (
    ARGUMENT_CALLS,
    TRAINER_LOADER_ARGUMENTS,
    arguments_line,
    command_line_fix,
    guard_span,
)
from ..diagnosis.analyzers.leaks import grown_most
from ..diagnosis.analyzers.loader_loop import conditional, loop_of, same_call
from ..diagnosis.analyzers.loader_place import LOADER_CALLS, option_text, shared_line, user_label
from ..diagnosis.analyzers.loader_role import single_pass, trainer_keeps
from ..diagnosis.analyzers.sync_fix import FILTER_SETTING, VALIDATE, distribution_classes
from ..diagnosis.findings import Finding
from ..experiment.candidates import candidate_for
from ..session.loaders import rebuilt_count
from ..session.session import Session
from . import cst
from .edits import Fix as Fix
from .edits import _abs, _Edits, _line_of
from .edits import main_script as main_script
from .unplanned import unplanned_line

KEEP_LAST = 100
"""Items a bounded container keeps (the last ones; the rest were never read back)."""
GUARD_START_METHODS = ("spawn", "forkserver")
"""Start methods whose workers re-import the script (macOS and Windows: spawn; Linux from
Python 3.14: forkserver; ``multiprocessing`` docs, "Contexts and start methods")."""
PREFETCH = re.compile(r"(?<![\w.])prefetch_factor\s*=\s*(\d+)")
"""``prefetch_factor=N`` in a stall finding's fix text (not a Trainer's ``dataloader_prefetch_factor``)."""
STALLS = ("dataloader-stall", "dataloader-stall-critical")


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


def loader_settings(f: Finding, facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The DataLoader arguments the finding's fix sets, per loader (its construction number,
    ``*``: all): those of ``mpsprofiler try``; for pageable-copies ``pin_memory=True`` on the
    loader it names (the rule's fix; ``try`` sets it with ``--set dataloader.N.pin_memory=true``)."""
    if f.rule == "pageable-copies":
        n = facts.get("pageable_loader")
        return {str(n): {"pin_memory": True}} if isinstance(n, int) and not isinstance(n, bool) else {}
    candidate = candidate_for(f, facts)
    return dict((candidate.settings.get("dataloader") if candidate else None) or {})


def prefetch_factor(f: Finding) -> int | None:
    """``prefetch_factor=N`` where a stall finding's fix names it (None: it does not)."""
    m = PREFETCH.search(f.fix or "") if f.rule in STALLS else None
    return int(m.group(1)) if m and int(m.group(1)) >= 1 else None


def _loaders(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    per = loader_settings(f, facts)
    prefetch = prefetch_factor(f)
    if f.rule == "spawn-bootstrap-crash":
        _guard(e, "spawned DataLoader workers re-import the script")
        return
    if not per and facts.get("stall_advice") == "restarts" and facts.get("respawn_fix") != "rebuilt":
        # the stall is the workers' start-up at every epoch: its fix is worker-respawn's, the
        # loader's persistent_workers=True at its line (the finding's own code says so)
        per = {"*": {"persistent_workers": True}}
    if not per:
        reason = facts.get("num_workers_reason")
        n = facts.get("suggested_num_workers")
        if facts.get("respawn_fix") == "rebuilt":  # no candidate then either
            e.fix.not_patched.append(
                f"not patched: the script builds the DataLoader anew every epoch (at {facts.get('loader_place')}): "
                "build it once, before the epoch loop, with persistent_workers=True, by hand")
            return
        e.fix.not_patched.append(
            f"not patched: the loader iterates an IterableDataset: each of {n} workers would yield the whole "
            f"stream (every sample {n} times) unless its __iter__ takes its share with "
            f"torch.utils.data.get_worker_info(); split the stream, then set num_workers={n} by hand"
            if isinstance(reason, list) and "iterable" in reason  # no candidate then (experiment/candidates.py)
            else f"not patched: the fix of {f.rule} names no DataLoader argument to set")
        return
    loaders = e.session.dataloaders
    positional = dataloader_positional()
    argv = [str(a) for a in e.session.run.get("argv") or []][1:]
    handled: set[int] = set()  # a rebuilt loader's constructions are one record: edited once
    for key, fields in per.items():
        targets = list(loaders.values()) if key == "*" else [d for d in loaders.values() if _built_as(d, key)]
        named = facts.get("loader_created")
        if key == "*" and fields.get("persistent_workers") and named is not None:
            # the loader whose workers restart (the finding's), not every loader of the script;
            # worker-respawn's fix in a run of several loaders names each costly one's line
            several = facts.get("respawn_loaders") if f.rule == "worker-respawn" else None
            wanted = {str(n) for n in several} if isinstance(several, list) and several else {str(named)}
            targets = [d for d in targets if str(d.get("created")) in wanted] or targets
        if not targets:
            e.fix.not_patched.append(f"not patched: the run recorded no place for DataLoader {key}; set "
                                     f"{_args(fields)} where it is built, by hand")
        done: set[tuple[str, int]] = set()
        for d in targets:
            if key != "*":
                if id(d) in handled:
                    continue
                handled.add(id(d))
            changes = {k: repr(v) for k, v in fields.items()}
            n = fields.get("num_workers")
            if isinstance(n, int) and n > 0 and not d.get("persistent_workers") and (
                    (rebuilt_count(d) == 1 and not single_pass(e.session, d)) or trainer_keeps(e.session, d)):
                # workers kept across epochs, not re-spawned; the Trainer's evaluation loader is
                # rebuilt at each evaluate() and kept once persistent (analyzers/loader_role.py);
                # a loader the run read in one pass has no next epoch to keep them for
                changes["persistent_workers"] = "True"
            file, line = str(d.get("file") or ""), int(d.get("line") or 0)
            workers = n if isinstance(n, int) else _workers(d)
            if prefetch is not None and prefetch != d.get("prefetch_factor"):
                if workers and workers > 0:  # torch: a ValueError with num_workers=0
                    changes["prefetch_factor"] = str(prefetch)
                else:
                    e.fix.not_patched.append(f"not patched: prefetch_factor={prefetch} on "
                                             f"{user_label(e.session, d)}: it runs with num_workers={workers}, and "
                                             "prefetch_factor needs workers (torch raises ValueError)")
            if changes.get("persistent_workers") == "True" and not (workers and workers > 0):
                # torch refuses it without workers ("persistent_workers option needs num_workers > 0")
                if key != "*":
                    e.fix.not_patched.append(f"not patched: {user_label(e.session, d)} runs with num_workers="
                                             f"{workers}, and persistent_workers needs workers")
                continue
            if not file or not line:
                e.fix.not_patched.append(f"not patched: the run recorded no line for {user_label(e.session, d)}; "
                                         f"set {_args(changes)} where it is built, by hand")
                continue
            if (file, line) in done:
                continue
            done.add((file, line))
            if e.session.framework == "transformers Trainer":
                # the Trainer builds its loaders from TrainingArguments: every one of them "starts"
                # at the script's train() line, which is no place to edit (framework_place)
                _trainer_loader(e, file, line, changes, workers)
                continue
            other = shared_line(e.session, d) if key != "*" else None
            # one call, a loop: not a helper's two calls
            loop = loop_of(e.session, d) if other is not None and same_call(d, other) else None
            looped = conditional(d, changes, loop[2]) if loop is not None and loop[2] is not None else None
            if looped is not None:  # a loop builds both: the settings for this loader's pass only
                changes = looped
            elif loop is not None and other is not None:  # (a loop is looked for only beside another loader)
                e.fix.not_patched.append(
                    f"not patched: {e.short(file)}:{line} builds {user_label(e.session, other)} too, in the loop over "
                    f"`{loop[0]}` ({e.short(file)}:{loop[1]}), and the run cannot tell which pass built "
                    f"{user_label(e.session, d)}: set {_args(changes)} for {user_label(e.session, d)} only "
                    f"(a condition on `{loop[0]}`), by hand")
                continue
            elif other is not None:
                # a helper builds this loader and another: the edit belongs at the call that makes
                # this one, and the helper must hand the arguments on (the fix text says so)
                call = (f" at the call that makes it ({e.short(str(d.get('call_file')))}:{d.get('call_line')})"
                        if d.get("call_file") and d.get("call_line") else "")
                e.fix.not_patched.append(
                    f"not patched: {e.short(file)}:{line} builds {user_label(e.session, other)} too: set "
                    f"{_args(changes)} for {user_label(e.session, d)} only{call}, by hand")
                continue
            if changes.get("persistent_workers") == "True" and "num_workers" not in changes:
                others = [_workers(o) for o in loaders.values() if str(o.get("file") or "") == file
                          and int(o.get("line") or 0) == line]
                if any(not w or w <= 0 for w in others):
                    e.fix.not_patched.append(
                        f"not patched: edit {e.short(file)}:{line} by hand ({_args(changes)}): the line also built a "
                        "DataLoader with num_workers=0 in this run, where persistent_workers=True is a ValueError")
                    continue

            # where num_workers comes from (a command-line option, the module's hparams): the
            # diagnosis' decision (cli_option.call_option), which the finding's code follows too
            option = (call_option(file, line, LOADER_CALLS, "num_workers", argv)
                      if "num_workers" in changes and looped is None else None)
            if option is not None and changes.get("persistent_workers") == "True":
                changes["persistent_workers"] = f"{option.expr} > 0"  # the option may say 0
            at_call = {k: v for k, v in changes.items() if k != "num_workers"} if option is not None else changes

            def change(s: str, ln: int, c: dict[str, str] = at_call, option: Option | None = option,
                       n: str = changes.get("num_workers", "")) -> str:
                if option is not None and option.movable:  # the number goes to the option's default
                    s = cst.set_option_default(s, option.expr.rsplit(".", 1)[-1], n)
                return cst.set_keywords(s, ln, ("DataLoader",), c, positional) if c else s

            ok = True
            saved = _saved(e)
            if option is None or at_call or option.movable:
                ok = e.edit(file, _args(changes), change, line)
                if ok and option is not None:
                    head = e.fix.changes[-1].split(": ", 1)[0]
                    e.fix.changes[-1] = head + ": " + ", ".join(
                        _option_change(k, changes[k], option) for k in changes if k != "num_workers" or option.movable)
            if ok and option is not None and not option.movable:
                e.fix.not_patched.append(_option_left(e, file, line, option, changes["num_workers"]))
            why = _guard_why(e.session, n, _workers(d), str(d.get("multiprocessing_context") or ""))
            if ok and why is not None and not _guard(e, why):
                _undo(e, saved, f"{_args(changes)} at {e.short(file)}:{line}")
        if key == "*" and fields.get("persistent_workers") and targets and not done:
            e.fix.not_patched.append("not patched: no DataLoader of the run has workers (num_workers > 0), and "
                                     "persistent_workers needs them; nothing to change")


def _option_change(key: str, value: str, option: Option) -> str:
    """How one setting was made: ``--workers defaults to 8 (num_workers=args.workers)`` where
    the number went to the option's default, ``persistent_workers=args.workers > 0`` (it
    follows the option), else ``key=value`` as written at the call."""
    if key == "num_workers":
        return f"{option.flag} defaults to {value} (num_workers={option.expr})"
    return f"{key}={value}"


def _option_left(e: _Edits, file: str, line: int, option: Option, n: str) -> str:
    """The sentence for a ``num_workers`` the patch leaves as written: the line reads an option
    another loader reads too, one this run set, or the module's hyperparameters; a number
    written there would make the option drive the other loader alone, or do nothing."""
    how = " ".join(part.removeprefix("# ").removeprefix("and ") for part in
                   option_text(option, int(n), e.short(file)).splitlines())
    return (f"not patched: num_workers={n} at {e.short(file)}:{line}: the line keeps num_workers={option.expr} "
            f"and needs no change there; {how}")


def _trainer_loader(e: _Edits, file: str, line: int, changes: dict[str, str], workers: int | None) -> None:
    """A Hugging Face Trainer's loader: the probe recorded the script's ``trainer.train()``
    line, where there is no ``DataLoader(...)`` to change; the Trainer builds its loaders
    from the script's ``TrainingArguments(...)`` call (``framework_place``), which gets the
    same settings under their ``dataloader_*`` names, its other arguments as written."""
    fields = {TRAINER_LOADER_ARGUMENTS[k]: v for k, v in changes.items() if k in TRAINER_LOADER_ARGUMENTS}
    found = arguments_line(file, line)
    cli = command_line_fix(e.session, file, fields) if found is None and fields else None
    if cli is not None:  # HfArgumentParser: nothing in the file to edit
        flags = cli.splitlines()[0].lstrip("# ")
        e.fix.not_patched.append(f"not patched: the Trainer started at {e.short(file)}:{line} reads its "
                                 f"TrainingArguments from the command line (HfArgumentParser): run it with {flags}")
        return
    if found is None or not fields:
        e.fix.not_patched.append(f"not patched: the Trainer started at {e.short(file)}:{line} builds its loader from "
                                 f"its TrainingArguments, not found in that file; set {_args(fields or changes)} "
                                 "there by hand")
        return
    saved = _saved(e)
    ok = e.edit(file, _args(fields), lambda s, ln: cst.set_keywords(s, ln, ARGUMENT_CALLS, fields), found[1])
    why = _guard_why(e.session, workers, 0 if "dataloader_num_workers" in fields else workers, "")
    if ok and why is not None and not _guard(e, why):
        _undo(e, saved, f"{_args(fields)} at {e.short(file)}:{found[1]}")


def default_start_method(session: Session) -> str:
    """multiprocessing's default where the run ran (its docs, "Contexts and start methods")."""
    platform = str(session.env.get("platform") or sys.platform)
    if platform.startswith(("darwin", "win")):
        return "spawn"
    version = tuple(int(p) for p in str(session.env.get("python") or "3.0").split(".")[:2] if p.isdigit())
    return "forkserver" if version >= (3, 14) else "fork"


def _guard_why(session: Session, workers: Any, had: int | None, context: str) -> str | None:
    """Why the patch that gives a loader ``workers`` also puts the script's top-level code
    under ``if __name__ == "__main__":`` (None: no need). Workers started by spawn or
    forkserver re-import the script: with the training at the top level, each worker would
    start it again and die ("the current process has finished its bootstrapping phase").
    That is the run's machine where its start method is one of those; and wherever a loader
    gets workers it had none of (``num_workers=0`` before), since the same patched script
    run on macOS spawns them: a patch made on Linux must not break it there. A loader that
    asks for its own ``multiprocessing_context`` is started that way everywhere."""
    if not isinstance(workers, int) or workers <= 0:
        return None
    if context:
        return f"workers started by {context} re-import the script" if context in GUARD_START_METHODS else None
    start = default_start_method(session)
    if start in GUARD_START_METHODS:
        return f"workers started by {start} re-import the script"
    if not had:
        return "on macOS the workers start by spawn and re-import the script"
    return None


def _guard(e: _Edits, why: str) -> bool:
    """The script's top-level code under ``if __name__ == "__main__":``, the span the
    finding's fix names (``framework_place.guard_span``, read from the text as patched so
    far); False where it could not be done (the "not patched" line says why)."""
    script = main_script(e.session)
    if script is None:
        e.fix.not_patched.append("not patched: the run was a module (-m); guard its start with "
                                 "`if __name__ == \"__main__\":` by hand")
        return False
    try:
        text = e.current(script)
        if cst.has_main_guard(text):
            return True
    except (cst.NotFound, OSError, UnicodeDecodeError):
        text = ""  # said by the edit below
    span = guard_span(text) if text else None
    where = f"lines {span[0]} to {span[1]}" if span else "the top-level code"
    ok = e.edit(script, f'the training ({where}) under `if __name__ == "__main__":` ({why})',
                lambda s, _: cst.add_main_guard(s, span))
    if not ok and span is not None:
        e.guard_place = f"{e.short(script)}:{span[0]} to line {span[1]}"
    return ok


def _saved(e: _Edits) -> tuple[dict[str, tuple[str, str]], int]:
    return dict(e.fix.files), len(e.fix.changes)


def _undo(e: _Edits, saved: tuple[dict[str, tuple[str, str]], int], what: str) -> None:
    """Both or neither: the workers without the guard would start the training again in
    every worker on macOS (a crash where the script ran), so where the guard could not be
    written the workers' edit is taken back too, and the "not patched" line says where the
    guard goes; ``--apply`` then changes nothing."""
    files, changes = saved
    e.fix.files = files
    del e.fix.changes[changes:]
    where = e.guard_place or "the script's top-level code"
    e.fix.not_patched.append(
        f"not patched: {what}: with workers the top-level code ({where}) must run under "
        "`if __name__ == \"__main__\":` (on macOS each worker re-imports the script and would start the "
        "training again), and the patch could not move it (the line above says why); put that code under "
        f"the guard by hand, then set {what}")


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


def _stall(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    """The loader's workers, and torch's thread count where the finding gives the workers
    cores its threads held (``stall_threads``: the fix's second code block)."""
    _loaders(e, f, facts)
    if facts.get("stall_threads") == "cut":
        _threads(e, f, facts)


def _watermark(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    candidate = candidate_for(f, facts)
    env = (candidate.settings.get("env") if candidate else None) or {}
    script = main_script(e.session)
    if facts.get("watermark_cap") == "tight":
        e.fix.not_patched.append(f"not patched: no lower watermark cap suits this run (its MPS memory peaked at "
                                 f"{facts.get('watermark_peak_ratio')} x the recommended working set)")
        return
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
    between = grown_most(e.session.leaks.between)
    if not sites and between is not None and between.file and between.line:
        # a list grown between the steps with graphs (an evaluation pass's outputs): the
        # line the finding names, its value kept without the graph
        e.edit(between.file, f"keep `.detach()`ed tensors in `{between.name}` (no autograd graph)",
               lambda s, ln: cst.added_value_detached(s, ln), between.line)
        return
    if not sites:
        e.fix.not_patched.append("not patched: the run found no line that keeps the tensors "
                                 "(see the finding for what grows)")
        return
    site = sites[0]
    if _sets_a_key(e, site):  # `cache[step] = h`: a new key every step, bounded where it is set
        e.edit(site.holder_file, f"`{site.holder}` keeps its newest {KEEP_LAST} keys"
               + (" of `.detach()`ed tensors" if site.grad else ""),
               lambda s, ln: cst.keyed_value_bounded(s, ln, site.holder, KEEP_LAST, site.grad), site.holder_line)
        return
    if site.grad:  # the graph is what grows: keep the tensor without it
        e.edit(site.holder_file, f"keep `.detach()`ed tensors in `{site.holder}` (no autograd graph)",
               lambda s, ln: cst.added_value_detached(s, ln), site.holder_line)
        return
    if f.rule == "leak-site-small":
        _small_kept(e, site)
        return
    made: list[int] = []

    def bound(s: str, _: int) -> str:
        text, line = cst.bounded_container(s, site.holder, KEEP_LAST)
        made.append(line)
        return text

    if e.edit(site.holder_file, f"`{site.holder}` keeps the last {KEEP_LAST} only (collections.deque)", bound):
        e.fix.changes[-1] = e.fix.changes[-1].replace(e.short(site.holder_file) + ":",
                                                      f"{e.short(site.holder_file)}:{made[0]}:", 1)


def _small_kept(e: _Edits, site: Any) -> None:
    """leak-site-small: what its fix offers first, numbers at the add (``.item()`` for
    one-element tensors, ``.tolist()`` for other small ones), which keep every value. Never
    a bounded deque: it would cut the user's loss curve to its last items (320 losses -> 100)
    and still keep tensors across steps, so the finding would stay."""
    method = "item" if site.scalar else "tolist"
    e.edit(site.holder_file, f"keep numbers in `{site.holder}` (`.{method}()`), every one, not the tensors",
           lambda s, ln: cst.added_value_number(s, ln, site.holder, method), site.holder_line)


def _sets_a_key(e: _Edits, site: Any) -> bool:
    """Whether the line that keeps the tensors sets a key of the container (``cache[step] = h``),
    read with libcst as the edit will read it."""
    try:
        source = Path(_abs(e.session, site.holder_file)).read_text()
    except (OSError, UnicodeDecodeError):
        return False
    return cst.sets_a_key(source, site.holder_line, site.holder)


def _built_as(loader: dict[str, Any] | Any, created: str) -> bool:
    """Whether construction number ``created`` is this loader, or one of its rebuilds (a
    loader built anew every epoch is one record: session/loaders.py)."""
    return str(loader.get("created")) == created or created in {str(c) for c in loader.get("created_all") or []}


def _float64(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    if f.rule == "float64-mps-crash":
        file, line = str(facts.get("crash_file") or ""), facts.get("crash_line")
        file = _abs(e.session, file) if file else ""
    else:
        setter = default_setter(e.session)
        if setter is not None:  # the script made float64 torch's default dtype: that line
            path, at, old, new = setter

            def default(s: str, ln: int) -> str:
                lines = s.splitlines(keepends=True)
                if not 0 < ln <= len(lines) or lines[ln - 1].count(old) != 1:
                    raise cst.NotFound(f"line {ln} no longer holds `{old}`")
                lines[ln - 1] = lines[ln - 1].replace(old, new)
                return "".join(lines)

            e.edit(path, "torch's default dtype float32, not float64", default, at)
            return
        sites = e.session.ops.top_float64(1)
        file, line = (sites[0].file, sites[0].line) if sites else ("", None)
    if not file or not isinstance(line, int):
        e.fix.not_patched.append("not patched: the run recorded no line that makes the float64 tensor")
        return
    made: list[int] = []
    left: list[str] = []

    def change(s: str, ln: int) -> str:  # with the other makers the finding's fix names: float32 too, or said why not
        text, lines, refused = cst.float32_at(s, ln, other_maker_lines(s, ln))
        made.extend(lines)
        left.extend(refused)
        return text

    if e.edit(file, f"float64 made float32 where it is made (for the float64 ops at line {line})", change, line):
        e.fix.changes[-1] = e.fix.changes[-1].replace(f":{e.last_line}:", ":" + ",".join(map(str, made)) + ":", 1)
        e.fix.not_patched.extend(f"not patched: {e.short(file)}, {why}" for why in left)


def _device(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    """Each string that names the missing device where the script chooses it (the crash's
    file and the script; diagnosis/analyzers/device_choice.py says which strings) becomes
    the choice of what the machine has, with ``import torch`` where the file lacks it."""
    import ast

    from ..diagnosis.analyzers.device_choice import chooser, device_files, device_literals

    device = facts.get("device_missing")
    paths = device_files(e.session)
    found = 0
    for path in paths:
        try:
            nodes = device_literals(ast.parse(e.current(path)), str(device))
        except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
            continue
        found += len(nodes)
        for i, node in enumerate(nodes):
            literal = str(node.value)
            last = i == len(nodes) - 1

            def change(s: str, ln: int, lit: str = literal, last: bool = last) -> str:
                text = cst.device_string_at(s, ln, lit, chooser)
                return cst.ensure_import(text, "torch") if last else text  # last: no later line moves

            e.edit(path, f'"{literal}" where the machine has it, else another device', change, node.lineno)
    if found:
        return
    if device == "cuda" and facts.get("device_cuda_calls"):
        for path in paths:
            if any(_abs(e.session, c.rsplit(":", 1)[0]) == path for c in facts["device_cuda_calls"]):
                e.edit(path, '.cuda() made .to(device), device chosen after `import torch`', _cuda_to_device)
        return
    e.fix.not_patched.append(f"not patched: the script names no {device} device as a string (it comes from an "
                             "argument or a config file): choose it there by hand")


def _cuda_to_device(source: str, _: int) -> str:
    from ..diagnosis.analyzers.device_choice import chooser

    text, _lines = cst.cuda_calls_to(source, "device")
    return cst.insert_after_import(text, "torch", "device = {name}.device(" + chooser("cuda", '"', "{name}") + ")")


CUT_HELPER = ("def repackage_hidden(state):  # a tensor, or a tuple of them (an LSTM's (h, c))\n"
              "    return state.detach() if isinstance(state, {name}.Tensor) else tuple(repackage_hidden(s) for s in state)")
"""pytorch/examples word_language_model/main.py's helper (its name and job: "Wraps hidden
states in new Tensors, to detach them from their history"), as rules/autograd-crash.yaml
shows it."""


def _carried_state(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    name, loop = facts.get("carried_name"), str(facts.get("carried_loop_place") or "")
    path, _, line = loop.rpartition(":")
    if not isinstance(name, str) or not path or not line.isdigit():
        e.fix.not_patched.append("not patched: the run read no loop that carries the state")
        return
    path = _abs(e.session, path)
    if e.edit(path, f"`{name} = repackage_hidden({name})` first in the loop: the value goes on, its graph stays",
              lambda s, ln: cst.first_in_loop(s, ln, f"{name} = repackage_hidden({name})"), int(line)):
        e.edit(path, "the `repackage_hidden` helper (PyTorch's word-language-model example) after the imports",
               lambda s, _: cst.define_after_imports(s, "torch", CUT_HELPER))


def _anomaly(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    """Autograd's anomaly detection off at the script's line that turns it on
    (``diagnosis/analyzers/anomaly.py``): ``set_detect_anomaly(False)``, or the ``with``
    taken away with its body kept. A library's switch is the user's to find."""
    where, file, line = facts.get("anomaly_fix_where"), facts.get("anomaly_file"), facts.get("anomaly_line")
    if where not in ("set", "context", "lightning_arg") or not isinstance(file, str) or not isinstance(line, int):
        e.fix.not_patched.append(unplanned_line(e.session, f, facts, main_script(e.session)))
        return
    if where == "lightning_arg":
        e.edit(file, "detect_anomaly=False in the Lightning Trainer",
               lambda s, ln: cst.set_keywords(s, ln, ("Trainer",), {"detect_anomaly": "False"}), line)
        return
    if where == "set":
        e.edit(file, "anomaly detection off (`set_detect_anomaly(False)`)",
               lambda s, ln: cst.set_first_argument(s, ln, anomaly.SWITCHES, "False"), line)
        return
    e.edit(file, "the `with` of anomaly detection removed, its body kept",
           lambda s, ln: cst.unwrap_with(s, ln, anomaly.CONTEXTS), line)


def _syncs(e: _Edits, f: Finding, facts: dict[str, Any]) -> None:
    """The Hugging Face Trainer's own loss reads (``diagnosis/analyzers/sync_fix.py``):
    ``logging_nan_inf_filter=False`` in the script's ``TrainingArguments(...)`` call, the
    one the finding names. Reads the script makes itself move with its logging, the
    author's choice: said, not patched (``unplanned``)."""
    file, line = facts.get("sync_fix_file"), facts.get("sync_fix_line")
    if facts.get("sync_fix_where") in ("anomaly", "anomaly_engine"):
        e.fix.not_patched.append("not patched: these reads are autograd's anomaly detection's NaN checks; "
                                 "the fix of anomaly-detection-on turns it off")
        return
    checks = _distribution_checks(e, facts)
    if facts.get("sync_fix_where") != "trainer_filter_line" or not file or not isinstance(line, int):
        if not checks:
            e.fix.not_patched.append(unplanned_line(e.session, f, facts, main_script(e.session)))
        return
    e.edit(str(file), f"{FILTER_SETTING}=False",
           lambda s, ln: cst.set_keywords(s, ln, ARGUMENT_CALLS, {FILTER_SETTING: "False"}), line)


def _distribution_checks(e: _Edits, facts: dict[str, Any]) -> bool:
    """torch.distributions' argument checks off at the script's call the finding shows
    (``sync_checks_code``: the call as written with ``validate_args=False``); False where
    the finding named no call. The reads the script makes itself stay, the author's choice."""
    file, line = facts.get("sync_checks_file"), facts.get("sync_checks_lineno")
    if facts.get("sync_checks") != "distributions_call" or not isinstance(file, str) or not isinstance(line, int):
        return False
    names = distribution_classes()

    def lacks(call: libcst.Call) -> bool:  # the call the diagnosis rewrote: no validate_args, no **kwargs
        return not any(a.star == "**" or (a.keyword is not None and a.keyword.value == VALIDATE) for a in call.args)

    e.edit(file, f"{VALIDATE}=False (torch.distributions' argument checks off)",
           lambda s, ln: cst.set_keywords(s, ln, names, {VALIDATE: "False"}, keep=lacks), line)
    return True


PLANNERS: dict[str, Callable[[_Edits, Finding, dict[str, Any]], None]] = {
    "graph-carried-crash": _carried_state,
    "device-missing-crash": _device,
    "dataloader-stall": _stall,
    "dataloader-stall-critical": _stall,
    "worker-respawn": _loaders,
    "pin-memory-mps": _loaders,
    "spawn-bootstrap-crash": _loaders,
    "pageable-copies": _loaders,
    "thread-oversubscription": _threads,
    "memory-pressure": _watermark,
    "cache-growth": _watermark,
    "graph-kept-across-steps": _carry,
    "leak-site-container": _container,
    "leak-site-small": _container,
    "leak-site-graph": _container,
    "tensor-leak": _container,
    "graph-list-between-steps": _container,
    "float64-mps": _float64,
    "float64-mps-crash": _float64,
    "sync-heavy": _syncs,
    "sync-heavy-mac": _syncs,
    "anomaly-detection-on": _anomaly,
}
"""The rules whose fix is an edit of the script, and who writes it."""


def plan(session: Session, findings: list[Finding], facts: dict[str, Any], rule: str | None = None) -> list[Fix]:
    """One :class:`Fix` per finding (only ``rule`` when given); one whose rule has no
    planner has no files, ``planned`` False and its "not patched" line.

    Fixes of one file are planned in turn, each on the text the ones before it left (its
    ``before``), so their patches apply one after the other (:attr:`Fix.after` names the
    ones it needs first); two findings whose fix is the same edit (a leak and its line)
    get the same patch."""
    out: list[Fix] = []
    state: dict[str, str] = {}  # path -> its text after the fixes planned so far
    rules: dict[str, list[str]] = {}  # path -> the rules whose fixes edit it, in order
    alone: list[tuple[dict[str, tuple[str, str]], Fix]] = []  # (a fix's files as if it were the only one, it)
    for f in findings:
        if rule is not None and f.rule != rule:
            continue
        if f.rule not in PLANNERS:  # no planner: the fix is the user's to make, and said so
            line = unplanned_line(session, f, {**facts, **f.facts}, main_script(session))
            out.append(Fix(rule=f.rule, title=f.title, key=f.key, not_patched=[line], planned=False))
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
