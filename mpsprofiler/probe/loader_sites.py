"""Which DataLoader is which: where the script built each one, and each one's own fetch times.

A script with several loaders (a zipped pair, a training and a validation loader) needs
findings that name the loader to change and quote that loader's figures, and ``mpsprof
try`` must change that one alone. So the probe records, per loader:

* ``created``: its construction number, counted in the training process like the
  ``--set dataloader.N.*`` overrides count them (1 is the first DataLoader built);
* ``file``/``line``: the script's line that built it (the first frame outside torch,
  mpsprofiler and the training frameworks), which the parent reads to rewrite that very call;
* ``fetches``/``fetch_s``: batches taken from it and the training's wall time waiting for
  them (an iterator's first batch is left out: it includes starting the workers);
* ``after_fetches``/``after_fetch_s``: of those, the ones taken after the last step ended
  (sent at exit): a Lightning ``trainer.validate()``/``trainer.test()`` or a Trainer's
  ``evaluate()`` after training, whose waits are no step's. The steps' figures (the steps'
  loaders' shares of their wait and batches) leave them out. ``after_first_fetches``/
  ``after_first_fetch_s``: of the ``first_fetches`` below, those taken after the last step,
  the first batch of a pass that began there (the k-fold script's last validation pass:
  3 batches after the last step, counted 2 without it);
* ``consumes``/``consume_s``: the gaps between one batch's arrival and the next request
  of the same iterator: what the script does per batch of this loader (a validation
  loader's batches are consumed by evaluation, not by the training steps);
* ``consume_steps``: how many of those gaps held a step boundary (an optimizer step, or
  whatever the step tracker counts). None of them in a loader read over several steps
  while another loader's gaps did: its batches are consumed between the training steps
  (an evaluation pass in the loop), not by them, whatever its batch count per step;
* ``index_calls``/``index_s``: calls of ``_BaseDataLoaderIter._next_index`` timed and their
  seconds: choosing a batch's indices (``next()`` on the batch sampler, which runs the
  sampler), which torch does in the training process whatever ``num_workers`` is
  (torch/utils/data/dataloader.py: ``_next_data`` calls it without workers,
  ``_try_put_index`` with them), so workers cannot take a slow sampler's time over. Timed
  at an iterator's calls after its first batch (the first includes a sampler's per-epoch
  set-up, as the first fetch includes starting the workers), all of a loader's first
  ``INDEX_EXACT`` such calls and every ``INDEX_EVERY``-th one after: a mean per call.
  Timed by the iterator's own ``_next_index`` attribute (:meth:`LoaderSites.arm`), set
  after the batch before and removed by its one call, not by wrapping the class's method:
  the batches not timed then cost one comparison, where a wrapper costs a call at every
  batch (0.6 µs measured, benchmarks/next_index_cost.py);
* ``first_fetches``/``first_fetch_s``: the iterators' first batches and the training's wait
  for them, which holds starting the workers of a pass (with non-persistent workers, at
  every pass): against the mean of the other fetches, what each restart cost this loader,
  whichever other loaders the steps also read;
* ``iters``: the iterators started over it (``_BaseDataLoaderIter.__init__``): its passes,
  where workers are not persistent (a persistent loader's later passes reset its one
  iterator). A loader read in one pass gains nothing from ``persistent_workers``, which
  keeps workers from one pass to the next;
* ``batch_tensors``: the tensors in one batch (its first timed one). Taking a batch in from
  a worker process costs the training a round trip per tensor (each storage's shared memory
  crosses separately), so the count says whether workers could beat loading in-process;
* ``batch_form``: that batch's shape as a fix's snippet must index it (:func:`batch_form`):
  ``pair`` (two tensors), ``dict`` (a dict of tensors), ``mixed`` (anything else);
* ``role``: ``eval`` or ``test`` for a loader a framework's evaluation hook built
  (:data:`ROLE_HOOKS`), read from the frames that built it, once per construction. Its
  batches pace evaluation, not the training steps, and the framework rebuilds it at each
  evaluation by design: the advice must say so rather than guess from its batch counts;
* ``hook``: the framework's hook that built it (:data:`FRAMEWORK_HOOKS`: Lightning's
  ``train_dataloader`` and ``val_dataloader``, the Trainer's ``get_train_dataloader`` ...),
  the name a user knows the loader by: Lightning builds the validation loader first (its
  sanity check), so by construction order the training loader was "the 2nd DataLoader".

Records live in weak dictionaries keyed by the loader and its iterators: the probe keeps
nothing alive that the script dropped. Updates go out as the loader's ``dataloader``
event again, with more fetches each time (doubling), so the recording stays small.

The sums are not added on the training thread (issue 34: they were the largest Python
function of its step): each batch adds one record to a log (:meth:`LoaderSites.on_fetch`),
as the step tracker appends its closed steps' rows, and the probe's channel thread folds the
log into the sums and sends the updates due (:meth:`LoaderSites.fold`, at each of its
wakes; :meth:`LoaderSites.flush` folds the rest at exit). An iterator's start and a timed
index draw go through the same log, so the fold sees everything in the order it happened
and sends the same updates, with the same figures, as sums added batch by batch. Only what
needs the batch or the iterator stays on the training thread: the first timed batch's
shape and the arming of the index draws (a count per loader, :meth:`LoaderSites._due`).
"""

from __future__ import annotations

import collections
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import cputime
from .appended import take

_SKIP = tuple(
    os.path.dirname(p) + os.sep
    for p in (os.path.dirname(os.path.abspath(__file__)),)  # mpsprofiler/
)
KEPT_SITES = 256
"""Records kept for the final sums: a script that builds a loader per epoch (or per step)
keeps the newest ones; older ones were reported as they grew (``FIRST_UPDATE``)."""
FIRST_UPDATE = 16
"""The first per-loader update after this many timed fetches; then at 2x, 4x, ..."""
RECORD = 5
"""Items a record of the log has (see :class:`LoaderSites`'s ``_log``)."""
MAX_LOG = 8_192 * RECORD
"""Items (``RECORD`` a record) the log holds before the training thread folds it itself (at an
iterator's first batch or a timed batch due for an index draw, never on the steady path):
bounds the log where no channel thread folds it (no channel) or one falls behind."""
_ITER = "iter"
_INDEX = "index"
"""The tags of the log's rare records, ``tag, site, value, None, None``: an iterator's start
(its fields, or None) and a timed index draw (its seconds). A batch's record is ``entry,
seconds, arrival, step, _num_yielded``: five items both, read alike."""
_NEVER = float("inf")
INDEX_EXACT = cputime.EXACT_FETCHES
INDEX_EVERY = cputime.READ_EVERY
"""A loader's index draws of its first ``INDEX_EXACT`` timed fetches are timed, then every
``INDEX_EVERY``-th (a count picks them, not their duration, so the timed ones are a fair
sample): a timed draw costs ~1 µs (benchmarks/next_index_cost.py), which issue 34's
per-step budget keeps off most batches of a long run, as ``cputime.FetchClock`` does for
its clocks (the same counts: one schedule of exact and sampled batches for a loader's
figures)."""


@dataclass
class Site:
    created: int
    file: str | None
    line: int | None
    call: tuple[str, int, str] | None = None
    """Where the function holding ``file:line`` was called from (file, line, its name), when
    that is the script's code too: a helper that builds several loaders (``make_loader(ds)``)
    is changed at the call that makes the one to change."""
    fetches: int = 0
    fetch_s: float = 0.0
    first_fetches: int = 0
    first_fetch_s: float = 0.0
    consumes: int = 0
    consume_s: float = 0.0
    consume_steps: int = 0
    next_update: int = FIRST_UPDATE
    sent: int = 0
    iters: int = 0
    sent_iters: int = 0
    tensors: int | None = None
    form: str | None = None
    index_calls: int = 0
    index_s: float = 0.0
    fields: dict[str, Any] = field(default_factory=dict)
    role: str | None = None
    hook: str | None = None
    tail_step: int | None = None
    """The step count at its latest fetches, and how many of them (and their seconds) came
    at that count: at exit, those taken after the last step ended."""
    tail_fetches: int = 0
    tail_fetch_s: float = 0.0
    tail_first_step: int | None = None
    """As ``tail_step`` for the passes' first batches (``first_fetches``): the step count at
    the latest of them, and how many (and their seconds) came at that count."""
    tail_first_fetches: int = 0
    tail_first_fetch_s: float = 0.0
    taken: int = 0
    """Timed batches counted on the training thread (``fetches`` is the fold's count, which
    lags behind it): the index draws' schedule."""
    due: int = 0
    """The ``taken`` count at which :meth:`LoaderSites._due` runs next (the first timed
    batch's shape, an index draw to time): one comparison per batch for both."""


class LoaderSites:
    """Construction sites and per-loader fetch sums (all methods are called guarded)."""

    def __init__(self, emit: Callable[..., None], step: Callable[[], int] | None = None) -> None:
        self._emit = emit
        self._step = step
        """The step tracker's count of steps begun (``consume_steps``); None: not counted."""
        self._pid = os.getpid()
        self._created = 0
        self._sites: weakref.WeakKeyDictionary[Any, Site] = weakref.WeakKeyDictionary()
        self._every: collections.deque[Site] = collections.deque(maxlen=KEPT_SITES)
        """The newest loaders' records, kept past their loaders: a loader built inside
        ``main()`` is gone by the end, and its last sums with it (a loader read fewer than
        ``FIRST_UPDATE`` times was never reported). A record holds no reference to its loader."""
        self._iters: dict[int, tuple[weakref.ref[Any], Site, list[Any]]] = {}
        """Live iterators by id, each with a weak reference to it (dropped with it): read at
        every batch, where a ``WeakKeyDictionary`` makes a weak reference per lookup."""
        self._timed: dict[int, tuple[weakref.ref[Any], Site, list[Any]]] = {}
        """The entries of ``_iters`` whose iterator's first batch came (its later ones are
        timed): the DataLoader wrapper's steady batch (``fetch_path.py``) looks its iterator up
        here, one test fewer a batch than the flag in the entry's state."""
        self._torch_dir: str | None = None
        self._log: list[Any] = []
        """Batches, iterator starts and index draws not folded yet (see the module docstring),
        ``RECORD`` items each: the training thread extends it by a record at once
        (``list.extend`` of a tuple, atomic as ``append`` is), :meth:`fold` takes it under
        ``_lock`` (appended.py). Flat, not a list of tuples: a record lives until the fold
        (up to the channel's interval), and a tuple kept that long per batch is traversed by
        the garbage collector and fills new pools (~0.6 k instructions a batch of the training
        thread, callgrind: benchmarks/RESULTS.md, session 56); the passing tuple is freed at once."""
        self._lock = threading.Lock()

    def on_created(self, loader: Any) -> None:
        """At ``DataLoader.__init__``: number it and find the script's line that built it."""
        if os.getpid() != self._pid:
            return
        self._created += 1
        file, line, call, hook = self._caller()
        site = self._sites[loader] = Site(self._created, file, line, call, role=ROLE_HOOKS.get(hook or ""), hook=hook)
        self._every.append(site)

    def site_fields(self, loader: Any) -> dict[str, Any]:
        site = self._sites.get(loader)
        if site is None:
            return {}
        out: dict[str, Any] = {"created": site.created, "created_by_then": self._created}
        if site.file:
            out["file"], out["line"] = site.file, site.line
        if site.call is not None:
            out["call_file"], out["call_line"], out["call_func"] = site.call
        if site.role is not None:
            out["role"] = site.role
        if site.hook is not None:
            out["hook"] = site.hook
        return out

    def on_iter(self, it: Any, loader: Any, fields: dict[str, Any] | None) -> None:
        """At an iterator's start: its fetches count for ``loader`` (the first one excepted)."""
        site = self._sites.get(loader)
        if site is None:
            return
        log = self._log
        log.extend((_ITER, site, dict(fields) if fields is not None else None, None, None))  # (folded in order)
        if len(log) > MAX_LOG:
            self.fold()
        iters, timed, key = self._iters, self._timed, id(it)
        timed.pop(key, None)  # (an older iterator's at this id: dead, its callback run)

        def forget(dead: weakref.ref[Any]) -> None:
            for table in (iters, timed):
                entry = table.get(key)
                if entry is not None and entry[0] is dead:
                    del table[key]

        try:
            # the fold's: the last batch's arrival (None before the first) and the step then;
            # the training thread's: its index timer (:meth:`arm`), whether a batch came
            iters[key] = (weakref.ref(it, forget), site, [None, None, None, False])
        except TypeError:  # an iterator without weak references: not timed per loader
            pass

    def on_fetch(self, it: Any, seconds: float, batch: Any, end: float, step: int | None = None) -> None:
        """``end``: the clock when the batch arrived (``seconds`` after it was asked for);
        ``step``: the steps begun then (the DataLoader hook reads ``StepTracker.begun`` and
        passes it: an attribute read, not a call), else the constructor's ``step`` is asked.

        Runs at every batch on the training thread (issue 34): one record appended for the
        fold (:meth:`fold`) and one count; an iterator's first batch and the batches due for
        more (``Site.due``: a loader's first timed batch, an index draw to time) take the
        branches that do more."""
        entry = self._iters.get(id(it))
        # (an id reused by a new object after the iterator's death: not this one's entry)
        if entry is None or it is not entry[0]():
            return
        if step is None and self._step is not None:
            step = self._step()
        # _num_yielded: torch's count of the pass's batches (a persistent iterator's new pass
        # resets it, _BaseDataLoaderIter._reset), read now: the fold comes later
        self._log.extend((entry, seconds, end, step, it._num_yielded))  # type: ignore[union-attr]
        site = entry[1]
        if entry[2][3]:
            n = site.taken = site.taken + 1
            if n >= site.due:
                self._due(it, entry, site, n, batch)
        else:  # the iterator's first batch waits for the workers to start: not timed
            entry[2][3] = True
            self._timed[id(it)] = entry
            if len(self._log) > MAX_LOG:
                self.fold()

    def _due(self, it: Any, entry: tuple[weakref.ref[Any], Site, list[Any]], site: Site, n: int, batch: Any) -> None:
        """The ``n``-th timed batch of ``site`` reached ``site.due`` (at its first one, 0):
        note the batch's shape (the first timed one's), time the next index draw (the first
        ``INDEX_EXACT`` batches, then every ``INDEX_EVERY``-th), and set the next batch at
        which either is due. (The updates are the fold's.)"""
        if site.tensors is None:
            site.form = batch_form(batch)
            site.tensors = count_tensors(batch)  # (set last: the fold reads both once it is set)
        if n < INDEX_EXACT or not n % INDEX_EVERY:
            self.arm(it, entry, self._log)
        site.due = n + 1 if n + 1 < INDEX_EXACT else (n // INDEX_EVERY + 1) * INDEX_EVERY
        if len(self._log) > MAX_LOG:
            self.fold()

    def fold(self) -> None:
        """Add the logged batches, iterator starts and index draws to the loaders' sums, in
        order, and send the updates due (the channel thread, at each of its wakes; the
        training thread where the log grew past ``MAX_LOG``). The same sums, figure for
        figure and in the same order of additions, as adding each batch as it came."""
        with self._lock:
            self._fold()

    def _fold(self) -> None:
        """:meth:`fold`'s work; the caller holds ``_lock``. One pass over the records: the sums
        of the iterator whose batches come now are local variables (one loader's batches come
        in long runs), written back where its run ends or an update goes out: the same
        additions, in the same order, as one batch at a time."""
        items = iter(take(self._log))
        entry: Any = None
        site: Any = None
        state: Any = None
        last_end = last_step = tail_step = None
        fetches = consumes = consume_steps = tail_fetches = 0
        fetch_s = consume_s = tail_fetch_s = 0.0
        update_at: float = _NEVER
        for owner, seconds, end, step, yielded in zip(items, items, items, items, items, strict=False):  # (whole records)
            if owner is not entry:
                if owner is _INDEX:  # (_INDEX, site, seconds): a timed index draw need not end a run
                    seconds.index_s += end
                    seconds.index_calls += 1
                    continue
                if entry is not None:
                    _put(site, state, last_end, last_step, fetches, fetch_s, consumes, consume_s, consume_steps,
                         tail_step, tail_fetches, tail_fetch_s)
                    entry = None
                if owner is _ITER:  # (_ITER, site, fields or None): an iterator's start
                    if end is not None:
                        seconds.fields = end
                    seconds.iters += 1
                    continue
                entry, site, state = owner, owner[1], owner[2]
                last_end, last_step = state[0], state[2]
                fetches, fetch_s = site.fetches, site.fetch_s
                consumes, consume_s, consume_steps = site.consumes, site.consume_s, site.consume_steps
                tail_step, tail_fetches, tail_fetch_s = site.tail_step, site.tail_fetches, site.tail_fetch_s
                update_at = site.next_update if site.fields else _NEVER
            if last_end is None:  # the iterator's first batch: summed apart
                site.first_fetches += 1
                site.first_fetch_s += seconds
                if step != site.tail_first_step:
                    site.tail_first_step, site.tail_first_fetches, site.tail_first_fetch_s = step, 1, seconds
                else:
                    site.tail_first_fetches += 1
                    site.tail_first_fetch_s += seconds
                last_end, last_step = end, step
                continue
            # a new pass of the same iterator (persistent workers) has no gap before its first batch
            if yielded != 1:
                gap = end - seconds - last_end
                if gap >= 0.0:
                    consumes += 1
                    consume_s += gap
            if step != last_step:  # (both None where steps are not counted)
                consume_steps += 1
            last_end, last_step = end, step
            fetches += 1
            fetch_s += seconds
            if step != tail_step:
                tail_step, tail_fetches, tail_fetch_s = step, 1, seconds
            else:
                tail_fetches += 1
                tail_fetch_s += seconds
            if fetches >= update_at:
                _put(site, state, last_end, last_step, fetches, fetch_s, consumes, consume_s, consume_steps,
                     tail_step, tail_fetches, tail_fetch_s)
                site.next_update *= 2  # (update_at was it: the site's fields were set)
                update_at = site.next_update
                self.update(site)
        if entry is not None:
            _put(site, state, last_end, last_step, fetches, fetch_s, consumes, consume_s, consume_steps,
                 tail_step, tail_fetches, tail_fetch_s)

    @staticmethod
    def arm(it: Any, entry: tuple[weakref.ref[Any], Site, list[Any]], log: list[Any]) -> None:
        """Time ``it``'s next index draw: an attribute of the iterator that shadows the
        class's ``_next_index`` for one call (torch calls ``self._next_index()``), records
        its time in the loader's sums and removes itself. It holds the iterator weakly, as
        ``entry`` does: a strong reference would make a cycle that keeps a dropped iterator
        (and its workers) alive until the garbage collector runs. An iterator without an
        instance dictionary (a subclass with ``__slots__``) is not timed. The time goes to
        ``log``, the fold's (:meth:`fold`)."""
        state = entry[2]
        timer = state[1]
        if timer is None:
            timer = state[1] = _index_timer(entry[0], entry[1], log)
        try:
            it.__dict__["_next_index"] = timer
        except (AttributeError, TypeError):
            pass

    def update(self, site: Site, after: dict[str, Any] | None = None) -> None:
        site.sent, site.sent_iters = site.fetches, site.iters
        extra: dict[str, Any] = {"batch_tensors": site.tensors} if site.tensors is not None else {}
        if site.form is not None:
            extra["batch_form"] = site.form
        extra["iters"] = site.iters
        if site.first_fetches:
            extra.update(first_fetches=site.first_fetches, first_fetch_s=round(site.first_fetch_s, 6))
        extra.update(after or {})
        if site.consumes:
            extra.update(consumes=site.consumes, consume_s=round(site.consume_s, 6))
            if self._step is not None:
                extra["consume_steps"] = site.consume_steps
        if site.index_calls:
            extra.update(index_calls=site.index_calls, index_s=round(site.index_s, 6))
        self._emit({**site.fields, "fetches": site.fetches, "fetch_s": round(site.fetch_s, 6), **extra})

    def flush(self) -> None:
        """At the end: the last sums of every loader that was timed since its last update
        (the log folded first: nothing logged is lost)."""
        with self._lock:
            self._fold()
            self._flush()

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (another thread may have held this one at
        ``fork()``) and no log (the parent's records are the parent's to fold)."""
        self._lock = threading.Lock()
        self._log = []

    def _flush(self) -> None:
        step = self._step() if self._step is not None else None
        for site in list(self._every):
            after: dict[str, Any] = {}
            if step is not None and site.tail_step == step and site.tail_fetches:
                # fetched since the last step ended: no step waited for them
                after.update(after_fetches=site.tail_fetches, after_fetch_s=round(site.tail_fetch_s, 6))
            if step is not None and site.tail_first_step == step and site.tail_first_fetches:
                # a pass begun since: its first batch too (a final evaluation's)
                after.update(after_first_fetches=site.tail_first_fetches,
                             after_first_fetch_s=round(site.tail_first_fetch_s, 6))
            # (or a pass begun since the last update whose first batch, never timed, was its only one)
            if site.fields and (site.fetches > site.sent or after or (site.sent and site.iters > site.sent_iters)):
                self.update(site, after or None)

    def _caller(self) -> tuple[str | None, int | None, tuple[str, int, str] | None, str | None]:
        """The script's line that built the loader, the call of the function it is in (the
        next frame out, where that is the script's too; None at a module's top level), and
        the framework hook it ran under (:func:`framework_hook`, from the frames up to and
        including that line's: its role follows from it)."""
        if self._torch_dir is None:
            import torch

            self._torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
        skip = (*_SKIP, self._torch_dir, *_framework_dirs())
        frame = sys._getframe(2)
        hook: str | None = None
        for _ in range(64):
            if frame is None:
                break
            hook = hook or framework_hook(frame)
            name = os.path.abspath(frame.f_code.co_filename)
            if not name.startswith(skip) and not name.startswith("<"):
                return name, frame.f_lineno, self._call_of(frame, skip), hook
            if frame.f_code.co_name in REBUILDERS:
                # the framework rebuilds the loader it is handed: the script's line is that one's
                original = self._sites.get(frame.f_locals.get("dataloader"))
                if original is not None and original.file:
                    return original.file, original.line, original.call, original.hook or hook
            frame = frame.f_back  # type: ignore[assignment]
        return None, None, None, hook

    @staticmethod
    def _call_of(frame: Any, skip: tuple[str, ...]) -> tuple[str, int, str] | None:
        func = frame.f_code.co_name
        outer = frame.f_back
        if outer is None or func.startswith("<"):  # <module>, a lambda, a comprehension
            return None
        name = os.path.abspath(outer.f_code.co_filename)
        if name.startswith(skip) or name.startswith("<"):
            return None
        return name, outer.f_lineno, func


def _put(site: Site, state: list[Any], last_end: float | None, last_step: int | None, fetches: int, fetch_s: float,
         consumes: int, consume_s: float, consume_steps: int, tail_step: int | None, tail_fetches: int,
         tail_fetch_s: float) -> None:
    """Write a run's sums (:meth:`LoaderSites._fold`'s local variables) back to its loader's
    record and its iterator's state."""
    state[0], state[2] = last_end, last_step
    site.fetches, site.fetch_s = fetches, fetch_s
    site.consumes, site.consume_s, site.consume_steps = consumes, consume_s, consume_steps
    site.tail_step, site.tail_fetches, site.tail_fetch_s = tail_step, tail_fetches, tail_fetch_s


def _index_timer(ref: weakref.ref[Any], site: Site, log: list[Any]) -> Callable[[], Any]:
    """The one-call stand-in for ``ref()``'s ``_next_index`` (see :meth:`LoaderSites.arm`);
    its time goes to ``log`` (:meth:`LoaderSites.fold` adds it to ``site``'s sums)."""
    from .transparent import hide_from_warnings

    perf_counter = time.perf_counter

    def _next_index() -> Any:
        it: Any = ref()  # alive: it is the iterator that calls this
        it.__dict__.pop("_next_index", None)
        method = type(it)._next_index
        if not getattr(it, "_num_yielded", 1):
            # a pass's first batch, or its workers' first indices drawn by iter() (a
            # persistent iterator's _reset): a sampler's per-epoch set-up, outside the waits
            return method(it)
        t0 = perf_counter()
        index = method(it)  # StopIteration (the pass's end) leaves the sums alone
        log.extend((_INDEX, site, perf_counter() - t0, None, None))
        return index

    # a sampler's warning names torch's caller (or its own), not this stand-in
    return hide_from_warnings(_next_index)


REBUILDERS = frozenset({"prepare_data_loader", "_update_dataloader"})
"""Framework functions that build a new DataLoader from the script's (their ``dataloader``
argument): accelerate's ``prepare_data_loader``, and Lightning's ``_update_dataloader``
(lightning/pytorch/utilities/data.py, lightning/fabric/utilities/data.py), which adds a
DistributedSampler under DDP: the loader was named at the ``trainer.fit`` line there, where
``patch`` found no DataLoader to change."""

ROLE_HOOKS = {"get_eval_dataloader": "eval", "get_test_dataloader": "test",
              "val_dataloader": "eval", "test_dataloader": "test", "predict_dataloader": "test"}
"""Framework methods that build an evaluation loader, and its role: the Trainer's
(transformers/trainer.py; ``evaluate()`` asks ``get_eval_dataloader`` anew each time,
``predict()`` asks ``get_test_dataloader``) and Lightning's hooks of a LightningModule or
LightningDataModule (the script's own method, which Lightning calls)."""
TRAIN_HOOKS = ("get_train_dataloader", "train_dataloader")
"""Framework methods that build the training loader: the Trainer's and Lightning's."""
FRAMEWORK_HOOKS = frozenset(ROLE_HOOKS) | frozenset(TRAIN_HOOKS)
ROLE_CLASSES = ("Trainer", "LightningModule", "LightningDataModule")
"""The framework classes whose ``ROLE_HOOKS`` count (a subclass's override included): a plain
script's own ``val_dataloader()`` helper says nothing certain."""


def framework_hook(frame: Any) -> str | None:
    """The name of the :data:`FRAMEWORK_HOOKS` method of a framework object (``self`` is a
    :data:`ROLE_CLASSES` subclass) ``frame`` runs, else None. Read once per construction."""
    hook = frame.f_code.co_name
    if hook not in FRAMEWORK_HOOKS:
        return None
    owner = frame.f_locals.get("self")
    if owner is None:
        return None
    names = {klass.__name__ for klass in type(owner).__mro__}
    return hook if names.intersection(ROLE_CLASSES) else None



MAX_WALK = 256
"""Containers and tensors looked at in one batch: a batch of more is counted as this many."""


def count_tensors(batch: Any) -> int:
    """Tensors in ``batch`` through tuples, lists and mappings (a collated batch's shapes),
    at most ``MAX_WALK`` items looked at: a dict of many fields is not walked to its end."""
    import torch

    todo, seen, n = [batch], 0, 0
    while todo and seen < MAX_WALK:
        item = todo.pop()
        seen += 1
        if isinstance(item, torch.Tensor):
            n += 1
        elif isinstance(item, (tuple, list)):
            todo.extend(item)
        elif isinstance(item, dict):
            todo.extend(item.values())
    return n


def batch_form(batch: Any) -> str:
    """``pair``: a tuple or list of two tensors (``x, y``); ``dict``: a dict of tensors keyed
    by names (a dataset that returns ``{"input": ..., "label": ...}``); ``mixed``: anything
    else (more fields, strings, nesting), which no one-line stack-and-index snippet fits."""
    import torch

    if isinstance(batch, (tuple, list)) and len(batch) == 2 and all(isinstance(t, torch.Tensor) for t in batch):
        return "pair"
    if (isinstance(batch, dict) and batch and len(batch) <= MAX_WALK
            and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in batch.items())):
        return "dict"
    return "mixed"


FRAMEWORK_PACKAGES = ("lightning", "lightning_fabric", "pytorch_lightning", "accelerate", "transformers")
"""Frameworks that build or wrap the script's DataLoader: their frames are not the script's
line (Lightning's ``_wrap_init_method`` in fabric/utilities/data.py calls ``__init__`` for
the loader ``train_dataloader()`` builds; accelerate's ``DataLoaderShard`` builds a new one;
the Trainer's ``get_train_dataloader`` builds it from ``TrainingArguments``)."""


def _framework_dirs() -> tuple[str, ...]:
    dirs = []
    for name in FRAMEWORK_PACKAGES:
        file = getattr(sys.modules.get(name), "__file__", None)
        if isinstance(file, str):
            dirs.append(os.path.dirname(os.path.abspath(file)) + os.sep)
    return tuple(dirs)


def install_construction_hook(sites: LoaderSites, on_error: Callable[[BaseException], None]) -> Callable[[], None]:
    """Wrap ``DataLoader.__init__`` (whatever wraps it already) to record each construction.

    The loader is built first, exactly as the script asked; a failure to record leaves it
    untouched.
    """
    from torch.utils.data import DataLoader

    from .transparent import hide_from_warnings

    original = DataLoader.__init__

    def __init__(loader: Any, *args: Any, **kwargs: Any) -> None:
        original(loader, *args, **kwargs)
        try:
            sites.on_created(loader)
        except Exception as exc:
            on_error(exc)

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    DataLoader.__init__ = hide_from_warnings(__init__)  # type: ignore[method-assign,assignment]

    def uninstall() -> None:
        DataLoader.__init__ = original  # type: ignore[method-assign]

    return uninstall
