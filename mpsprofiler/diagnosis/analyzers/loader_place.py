"""Which DataLoader a finding is about, where the script built it, and that line rewritten.

With several loaders (a zipped pair, training and validation) the one that kept the
training waiting is the one with the most fetch wait of its own (the probe times each
loader's fetches, :mod:`mpsprofiler.probe.loader_sites`); its figures, not the step's
mix of all loaders, go into the finding. Its construction line, read from the script,
becomes the fix's snippet with only ``num_workers`` (and ``persistent_workers``) changed.
"""

from __future__ import annotations

from typing import Any

from ...events.payloads import DataLoaderFields
from ...session.loaders import rebuilt_count
from ...session.session import Session
from .cli_option import Option, call_option
from .common import num, training_loader
from .framework_place import guard_note, trainer_place
from .loader_loop import conditional, loop_of, same_call
from .loader_role import one_pass_kind, restarts
from .source_edit import rewrite_call, short_path

PLACE_FACTS: tuple[str, ...] = ("loader_which", "loader_name_place", "loader_change", "loader_call_place",
                                 "loader_func", "loader_shared_which", "loader_shared_ordinal", "loader_ordinal",
                                 "loader_rebuilt", "loader_starts", "loader_keeps", "loader_label",
                                 "loader_loop_var", "loader_loop_place", "loader_seeded", "loader_hook",
                                 "loader_shared_hook", "loader_code_edit", "loader_one_pass", "loader_keep_setting")
"""Besides ``loader_name`` and ``loader_where`` (codes ``rules/dataloader-stall.yaml`` words):
which loader (``only``, ``hook`` for one a framework's hook built (``loader_hook``: Lightning's
``train_dataloader`` ...: :func:`hook_of`), or the ordinal's ending ``st``/``nd``/``rd``/``th`` of
``loader_ordinal``: its number among the script's places that build loaders, :func:`user_ordinals`;
``loader_created`` is its construction number, which ``try`` and ``patch`` address;
``loader_label``: how ``try`` titles it, :func:`user_label` or the Trainer's loader), the line that built it (or started the Trainer), and whether the fix
changes it (``loader_change``: ``change``, or ``none`` where the loader has the suggested
workers already and only its Dataset can be made faster: no code block to copy that would
change nothing)."""

LOADER_CALLS = ("DataLoader",)
"""Call names the construction line is searched for (``DataLoader(...)``, ``data.DataLoader(...)``)."""


def in_steps(loader: DataLoaderFields) -> tuple[float, float]:
    """(batches, seconds waited) of ``loader``'s timed fetches that the steps took: those
    taken after the last step ended (``after_fetches``: a Lightning ``trainer.validate()``
    or ``trainer.test()`` after ``fit``) are no step's. Set beside the steps' time and
    batches they were counted in the steps' loaders' shares, and the evaluation waits after
    the training read as the steps' compute: a Lightning stall said "computes for 34.0 ms"
    and its fix "trains in 45.1 ms" (issue 28)."""
    fetches = (num(loader.get("fetches")) or 0.0) - (num(loader.get("after_fetches")) or 0.0)
    wait = (num(loader.get("fetch_s")) or 0.0) - (num(loader.get("after_fetch_s")) or 0.0)
    return max(0.0, fetches), max(0.0, wait)


def timed(session: Session) -> list[DataLoaderFields]:
    """Loaders with fetch times of their own inside the steps (recordings from before have none)."""
    return [d for d in session.dataloaders.values() if num(d.get("fetch_s")) is not None and in_steps(d)[0]]


def stalled_loader(session: Session) -> DataLoaderFields | None:
    """The loader the training waited on most; without per-loader times, the training one."""
    loaders = timed(session)
    if len(loaders) >= 2:
        return max(loaders, key=lambda d: (in_steps(d)[1], -(num(d.get("created")) or 0)))
    return training_loader(session)


def shares(session: Session, loader: DataLoaderFields) -> tuple[float, float] | None:
    """(its share of all loaders' fetch wait, its share of their batches) inside the steps,
    or None with one loader."""
    loaders = timed(session)
    if len(loaders) < 2 or loader not in loaders:
        return None
    wait = sum(in_steps(d)[1] for d in loaders)
    batches = sum(in_steps(d)[0] for d in loaders)
    if wait <= 0 or batches <= 0:
        return None
    fetches, waited = in_steps(loader)
    return waited / wait, fetches / batches


def user_ordinals(session: Session) -> dict[int, int]:
    """Construction number -> the loader's number among the places the script builds
    loaders at (its line, and the call of a helper that builds several), in the order first
    built: the DataLoaders a user counts in the script. accelerate's ``prepare`` builds a
    copy of each loader it is handed (counted by the probe, and by ``--set dataloader.N``),
    and a loader rebuilt every epoch is built again at the same line: the script's second
    loader was called "the 4th DataLoader" there. A Trainer builds its training and its
    evaluation loader under one ``trainer.train()`` line: their roles tell them apart."""
    places: dict[tuple[Any, ...], int] = {}
    out: dict[int, int] = {}
    for d in sorted(session.dataloaders.values(), key=lambda d: num(d.get("created")) or 0):
        created = num(d.get("created"))
        if not created:
            continue
        # over its dataset and length too: a line in a loop builds the training and the
        # validation loader (one loader rebuilt every epoch is one record: session/loaders.py)
        key = ((d.get("file"), d.get("line"), d.get("call_file"), d.get("call_line"), d.get("role"),
                d.get("dataset"), d.get("len"))
               if d.get("file") and d.get("line") else ("created", created))
        out[int(created)] = places.setdefault(key, len(places) + 1)
    return out


LIGHTNING_HOOKS = ("train_dataloader", "val_dataloader", "test_dataloader", "predict_dataloader")
"""The hooks of a LightningModule or LightningDataModule that build loaders (the script's own
methods, which Lightning calls): a loader one of them built is named by it."""


def hook_of(loader: DataLoaderFields) -> str | None:
    """The Lightning hook that built ``loader`` (the probe's ``hook``), else None.

    Lightning builds the validation loader first (its sanity check runs before training),
    so by construction order the training loader built in ``train_dataloader()`` was "the
    2nd DataLoader"; its user knows it as the training loader. The Trainer's loaders have
    names of their own (``framework_place.trainer_place``)."""
    hook = loader.get("hook")
    return hook if isinstance(hook, str) and hook in LIGHTNING_HOOKS else None


def user_label(session: Session, loader: DataLoaderFields) -> str:
    """``DataLoader N`` as the user counts them (:func:`user_ordinals`), for texts that
    number loaders: the construction number (``--set dataloader.N``) also counts the copies
    a framework builds of the script's loader (accelerate's ``prepare``), so the script's
    only loader was "DataLoader 2". A loader a Lightning hook built is named by its hook
    (:func:`hook_of`): "the DataLoader of train_dataloader()"."""
    hook = hook_of(loader)
    if hook is not None:
        return f"the DataLoader of {hook}()"
    created = num(loader.get("created"))
    n = user_ordinals(session).get(int(created)) if created else None
    fallback = int(created) if created else loader.get("id") or "?"  # a record from before: its own number
    return f"DataLoader {n or fallback}"


def _ordinal(n: int) -> str:
    """The ending of ``n``'s English ordinal (``1st``, ``12th``), a code the rule file words."""
    return "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def shared_line(session: Session, loader: DataLoaderFields) -> DataLoaderFields | None:
    """Another loader built by the same line (a helper such as ``make_loader(ds)`` for the
    training and the evaluation set): changed there, both would get the workers."""
    file, line = loader.get("file"), loader.get("line")
    if not file or not line:
        return None
    return next((d for d in session.dataloaders.values() if d is not loader and d.get("created") != loader.get("created")
                 and d.get("file") == file and d.get("line") == line), None)  # fmt: skip


def _shared_call(session: Session, loader: DataLoaderFields, other: DataLoaderFields,
                 changes: dict[str, str]) -> dict[str, Any] | None:
    """The call that made this loader, given the workers (its helper must hand them on)."""
    call_file, call_line, func = loader.get("call_file"), num(loader.get("call_line")), loader.get("call_func")
    if not call_file or not call_line or not func:
        return None
    rewrite = rewrite_call(str(call_file), int(call_line), (str(func),), changes)
    if rewrite is None:
        return None
    cwd = session.run.get("cwd")
    created = num(other.get("created"))
    ordinal = user_ordinals(session).get(int(created)) if created else None
    return {
        "loader_where": "shared",  # the rule file's words: the line builds another loader too
        "loader_call_place": rewrite.place(cwd),
        "loader_func": str(func),
        "loader_shared_which": "hook" if hook_of(other) else _ordinal(ordinal) if ordinal else "only",
        "loader_shared_ordinal": ordinal,
        "loader_shared_hook": hook_of(other),
        "loader_code": rewrite.after + f"\n# and {func}() hands them to its DataLoader(...) (**kwargs)"
                       + (guard_note(session, str(call_file)) if int(changes.get("num_workers", "0")) > 0 else ""),
    }


def _loop_facts(session: Session, loader: DataLoaderFields, other: DataLoaderFields,
                changes: dict[str, str]) -> dict[str, Any] | None:
    """The line builds ``other`` too, in a loop (:mod:`.loader_loop`): the line with the
    settings for this loader's pass only (``num_workers=7 if split == "train" else 0``), or,
    where the run cannot tell its pass, the settings and a word that they are for it only."""
    found = loop_of(session, loader)
    file, line = loader.get("file"), num(loader.get("line"))
    if found is None or not file or not line:
        return None
    var, loop_line, cond = found
    var = cond.split(" == ", 1)[0] if cond else var  # the name the condition reads (`split` of `split, n`)
    which = conditional(loader, changes, cond) if cond else None
    rewrite = rewrite_call(str(file), int(line), LOADER_CALLS, which or changes)
    if rewrite is None:
        return None
    cwd = session.run.get("cwd")
    created = num(other.get("created"))
    ordinal = user_ordinals(session).get(int(created)) if created else None
    code = rewrite.after
    if which is None:
        code += f"\n# for {user_label(session, loader)} only, not {user_label(session, other)}: a condition on {var}"
    workers = int(changes.get("num_workers", "0")) if changes.get("num_workers", "0").isdigit() else 0
    return {
        "loader_where": "loop" if which else "loop_any",
        "loader_place": rewrite.place(cwd),
        "loader_loop_var": var,
        "loader_loop_place": f"{short_path(str(file), cwd)}:{loop_line}",
        "loader_shared_which": _ordinal(ordinal) if ordinal else "only",
        "loader_shared_ordinal": ordinal,
        "loader_code": code + (guard_note(session, str(file)) if workers > 0 else ""),
    }


def place_facts(session: Session, loader: DataLoaderFields, suggested: int | None, workers: int,
                batch_size_arg: str, prefetch: int | None, side: bool = False) -> dict[str, Any]:
    """``loader_created``, ``loader_place``, ``loader_name``, ``loader_where`` and ``loader_code``
    (the name and the sentence that leads to the code are codes: see :data:`PLACE_FACTS`).

    The first workers of an ``IterableDataset`` each yield the whole stream: the code then
    opens with what to change first (:func:`_split_first`), so that copied as written it
    never repeats every sample (`mpsprof patch` refuses that change: patch/plan.py)."""
    out = _place_facts(session, loader, suggested, workers, batch_size_arg, prefetch, side)
    n = suggested if suggested is not None else workers
    if (loader.get("iterable") is True and loader.get("iterable_split") is not True and workers <= 1 and n > 1
            and out.get("loader_code")):
        out["loader_code"] = _split_first(str(loader.get("dataset") or "the dataset"), n) + out["loader_code"]
    return out


def _option(session: Session, file: str, line: int, changes: dict[str, str]) -> Option | None:
    """The command-line option the loader's ``num_workers`` comes from (:mod:`.cli_option`):
    the line keeps reading it (``persistent_workers`` follows it: ``--workers 0`` must still
    run, torch refuses persistent workers without workers), and ``changes`` say so."""
    argv = [str(a) for a in session.run.get("argv") or []][1:]
    option = call_option(file, line, LOADER_CALLS, "num_workers", argv)
    if option is None:
        return None
    changes["num_workers"] = option.expr
    if "persistent_workers" in changes:
        changes["persistent_workers"] = f"{option.expr} > 0"
    return option


def _run_with(session: Session, file: str, option: Option, n: int) -> str:
    """The lines under the code: how to run the script with ``n`` workers (``option_text``)."""
    return "\n" + option_text(option, n, short_path(file, session.run.get("cwd")))


def option_text(option: Option, n: int, file: str) -> str:
    """How to give the loader ``n`` workers where its line reads them from ``option``, as
    comment lines (a code block is not wrapped: the TUI cuts a long line at its edge). Shared
    by the finding's code and ``mpsprof patch``'s words for a line it leaves."""
    if option.hparams:
        default = (f",\n# or make {n} the default of its __init__'s {option.flag} ({file}:{option.line})"
                   if option.line else "")
        return (f"# and build the module with {option.flag}={n} (the line reads {option.expr},\n"
                f"# the module's hyperparameters){default}")
    run = f"# and run it with {option.flag} {n}"
    if option.others:
        lines = ", ".join(f"{file}:{ln}" for ln in option.others)
        run += (f" (the call at {lines} reads {option.flag} too:\n# it gets {n} as well;"
                f" give this loader its own option to keep them apart)")
    if option.ran_with is not None:
        return run + f"\n# (this run had {option.flag} {option.ran_with})"
    if option.others:
        return run
    return run + f",\n# or make {n} that option's default ({file}:{option.line})"


def _split_first(dataset: str, n: int) -> str:
    return (f"# first: {dataset} is an IterableDataset, and each of {n} workers runs its own __iter__;\n"
            f"# make it yield only its worker's share, or every sample comes {n} times:\n"
            f"#     info = torch.utils.data.get_worker_info()  # None in the main process\n"
            f"#     then keep the records where record_index % info.num_workers == info.id\n"
            f"#     (skip the others before reading them, or each worker still reads them all)\n")


def line_place(session: Session, loader: DataLoaderFields) -> str | None:
    """``file:line`` of the script's line that built ``loader`` (short: relative to the
    run's directory), or None where the probe did not find it."""
    file, line = loader.get("file"), num(loader.get("line"))
    return f"{short_path(str(file), session.run.get('cwd'))}:{int(line)}" if file and line else None


def _place_facts(session: Session, loader: DataLoaderFields, suggested: int | None, workers: int,
                 batch_size_arg: str, prefetch: int | None, side: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    created = num(loader.get("created"))
    count = len(session.dataloaders)
    file, line = loader.get("file"), num(loader.get("line"))
    out["loader_created"] = int(created) if created else None
    out["loader_created_all"] = list(loader.get("created_all") or []) or None
    place = line_place(session, loader)
    out["loader_place"] = place
    ordinals = user_ordinals(session)
    ordinal = ordinals.get(int(created)) if created else None
    out["loader_ordinal"] = ordinal
    out["loader_which"] = _ordinal(ordinal) if ordinal and len(set(ordinals.values())) > 1 else "only"
    hook = hook_of(loader)
    if hook is not None:  # named by its role, not its construction order (Lightning builds validation's first)
        out["loader_which"], out["loader_hook"] = "hook", hook
    out["loader_name_place"] = place
    # nothing to tell apart (one loader, its line unknown): no sentence naming it
    out["loader_name"] = "built" if place else ("which" if count > 1 else None)
    n = suggested if suggested is not None else workers
    rebuilt = rebuilt_count(loader)
    starts = restarts(session, loader)
    # a loader rebuilt every epoch gains nothing from persistent workers; the Trainer's
    # evaluation loader does (the Trainer keeps it then: loader_role.py)
    # nor does one read in a single pass: its workers start once anyway (loader_role.single_pass)
    has_them = n == workers and (n == 0 or bool(loader.get("persistent_workers"))
                                 or starts in ("rebuilt", "rebuilt_eval", "single"))
    out["loader_change"] = "none" if has_them else "change"
    # workers where there were none: a seeded run's numbers can change from the first batch
    out["loader_seeded"] = "first" if n > 0 and not workers else "none"
    changes = {"num_workers": str(n)}
    out["loader_rebuilt"] = rebuilt
    out["loader_keeps"] = starts
    out["loader_starts"] = "once" if starts == "trainer_eval" else starts
    if starts == "single":
        out["loader_one_pass"] = one_pass_kind(session, loader, side)
    if n > 0 and not loader.get("persistent_workers") and rebuilt == 1 and starts != "single":
        changes["persistent_workers"] = "True"  # (a loader built anew each epoch starts its own anyway)
    out["loader_label"] = user_label(session, loader)
    # the Trainer's own setting keeps its evaluation loader too (loader_role.trainer_keeps): what
    # it gains where its workers start again, nothing for a loader read in one pass
    keep = n > 0 and not loader.get("persistent_workers") and starts in ("once", "trainer_eval")
    trainer = trainer_place(session, str(file) if file else None, int(line) if line else None, n, side,
                            persistent=keep)
    # the setting that keeps workers, in the user's terms: the Trainer builds the loader itself
    out["loader_keep_setting"] = "trainer" if trainer is not None else "plain"
    if trainer is not None:  # a Trainer's loader: its TrainingArguments (framework_place.py)
        out["loader_label"] = f"the Trainer's {'evaluation' if side else 'training'} DataLoader"
        out.update(trainer)
        return out
    shared = shared_line(session, loader)
    if shared is not None:
        call = _shared_call(session, loader, shared, changes) if not same_call(loader, shared) else None
        if call is None:
            call = _loop_facts(session, loader, shared, changes)
        if call is not None:
            out.update(call)
            return out
    option = _option(session, str(file), int(line), changes) if file and line else None
    rewrite = rewrite_call(str(file), int(line), LOADER_CALLS, changes) if file and line else None
    if rewrite is not None:
        where = rewrite.place(session.run.get('cwd'))
        out["loader_place"] = where
        out["loader_where"] = "rewrite"  # "Change the line that builds ... to" (the rule file's words)
        # workers started by spawn re-import the script: where its top-level code starts, as written
        code = rewrite.after
        if option is not None:
            run_with = _run_with(session, str(file), option, n)
            code += run_with
            as_written = rewrite_call(str(file), rewrite.line, LOADER_CALLS, {})
            if as_written is not None and as_written.after == rewrite.after:  # the line stays: only the option
                out["loader_where"] = "hparams" if option.hparams else "option"
                code = run_with.lstrip("\n").replace("# and run it", "# run the script").replace(
                    "# and build the module", "# build the module")
        out["loader_code"] = code + (guard_note(session, str(file)) if n > 0 else "")
        return out
    # no source to read (an older recording, a file gone or edited): the arguments to set
    out["loader_where"] = "build"
    args = [f"num_workers={n}"]
    if n > 0 and starts != "single":
        args.append("persistent_workers=True")
    if n > 0:
        args.append(f"prefetch_factor={prefetch}" if prefetch else "prefetch_factor=2")
    out["loader_code"] = (f"loader = DataLoader(\n    dataset, batch_size={batch_size_arg},\n"
                          f"    {', '.join(args)},\n)")
    return out
