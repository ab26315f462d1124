"""Leaks to the line: which user line makes the tensors that stay alive step after step.

Runs on sampled steps only, inside the op accountant's dispatch mode, so it sees every op
on every device (CPU, CUDA, MPS) without touching the allocator:

* every tensor an op creates during a sampled step is remembered by a weak reference,
  keyed by the user line that made it (the loop's own line for loop-level ops, the
  module's line otherwise); not an in-place op's output (it existed before), nor what
  torch.optim's own code makes (its temporaries and state: no line of the script keeps
  them; a single-tensor optimizer makes a third of a step's ops). At later step boundaries, tensors still alive two or more
  steps later are counted per line; a line whose tensors survive from two different
  sampled steps keeps something for good (a one-time lazy buffer survives from one);
* a tensor with autograd history that spans a step boundary (``total_loss += loss``:
  each step's graph is chained to the last) is found among the user's variables at a
  boundary, by walking its graph for nodes made before and after a sampled step began.

A batch a DataLoader fetch makes during a sampled step may be one fetched ahead:
accelerate's ``DataLoaderShard`` (every Hugging Face Trainer and ``accelerator.prepare``'d
loader) fetches the next batch before yielding the current one, to know which is the
last, so the batch made in step s is the one step s+1 uses, and the loop's own variables
still hold it at the end of step s+1. Tensors made inside a fetch get one more step
before they count as survivors (``AHEAD``); a batch the script really keeps (appended to
a list) survives that too.

Nothing here keeps a tensor or an autograd node alive: weak references, ids and
sequence numbers only (but see ``_refresh_locals``: before Python 3.13, reading a frame's
``f_locals`` leaves a snapshot on the frame until the next read). Checks run at step boundaries (outside any op).
"""

from __future__ import annotations

import ast
import operator
import sys
import threading
import weakref
from collections.abc import Callable
from itertools import chain, compress, repeat
from typing import TYPE_CHECKING, Any

import torch

from ..events.payloads import LeaksFields
from .leak_between import BetweenScan
from .leak_reach import GraphWalk, own_dict, storage_of
from .ops_sites import FrameFinder, source_line
from .steps import FETCH

if TYPE_CHECKING:
    from .leak_owner import Referrers

LAG = 2
"""A tensor still alive this many steps after the step that made it has outlived it."""
AHEAD = 1
"""Extra steps a tensor made inside a DataLoader fetch gets (a batch fetched one ahead)."""
MAX_TRACKED = 20_000  # outputs remembered per sampled step (dead ones are dropped at checks)
MAX_SAMPLES = 3  # latest sampled steps whose outputs are followed
MAX_KEPT = 6
"""Older sampled steps still followed because something they made survived a check: a
script that keeps a tensor every 5th step hits one sampled step in five, so two hits are
rarely among the latest three; their survivors (a few weak references) are what tells a
line that keeps one per step from a one-time buffer."""
MAX_NODES = 5_000  # graph walk per candidate tensor (a few ms at most)
MAX_ROOTS = 64  # survivors' graphs sized per line and check
SIZED_SITES = 3  # lines whose kept graphs are sized per check (the findings name the first)
SIZED_NODES = 2_000  # nodes walked per line sized
MAX_CHECKS = 24
MAX_SITES = 10
MAX_HELD_ITEMS = 2_000
"""Items of a kept container whose tensors are sized per check (a longer one is sized from
an even sample of this many, scaled to its length)."""
_NO_SEQ = 1 << 63

Key = tuple[str, int, str, str]
"""(file, line, module, op) of the call that made a tensor."""


def _seq_now() -> int | None:
    get = getattr(getattr(torch._C, "_autograd", None), "_get_sequence_nr", None)
    return int(get()) if get is not None else None


class _Sample:
    __slots__ = ("ahead", "checked", "refs", "seq", "step")

    def __init__(self, step: int, seq: int | None) -> None:
        self.step = step
        self.seq = seq
        self.checked = False
        """``refs`` were pruned to survivors at a check (what an older sample keeps)."""
        self.refs: list[tuple[weakref.ref[torch.Tensor], Key]] = []
        self.ahead: list[tuple[weakref.ref[torch.Tensor], Key]] = []
        """Made inside a DataLoader fetch: joins ``refs`` ``AHEAD`` steps later."""


class LeakTracker:
    """Created by the op accountant; ``on_op`` runs inside the mode, the rest at boundaries."""

    def __init__(self, finder: Callable[[], FrameFinder | None]) -> None:
        self._finder = finder
        self._samples: list[_Sample] = []
        self._current: _Sample | None = None
        self._alive: dict[Key, dict[str, Any]] = {}
        self._carries: dict[tuple[str, int], dict[str, Any]] = {}
        self._checks = 0
        self.unsettled = False
        """A tensor of a sampled step survived the last check and was seen on one sampled step
        only: op sampling must not back off (converge) until a second one says whether it
        piles up (:meth:`OpAccountant._end_sample` leaves such a sample's census out)."""
        self._last_sent: Any = None
        self.next_check: float = float("inf")
        self._owners: dict[Key, tuple[dict[str, Any], Any, str] | None] = {}  # leak_owner's, once per site
        self._released: set[Key] = set()
        """Lines whose survivors were all freed at once after they had piled up (see :meth:`check`)."""
        self.new_candidate: int | None = None
        """The sampled step whose tensors the last check found alive for the first time, seen
        on that step only (a line's first survivor): the schedule samples its phase next
        (:meth:`SampleSchedule.follow_phase`). None after a check that found no new one."""
        self._between = BetweenScan()
        """Containers growing between the steps with graphs (an evaluation pass's appends)."""

    # -- inside the dispatch mode -------------------------------------------------
    def begin(self, step: int) -> None:
        sample = _Sample(step, _seq_now())
        self._samples.append(sample)
        older = [s for s in self._samples[:-MAX_SAMPLES] if s.checked and (s.refs or s.ahead)]
        self._samples = older[-MAX_KEPT:] + self._samples[-MAX_SAMPLES:]
        self._current = sample

    def end(self, step: int) -> None:
        self._current = None
        finder = self._finder()
        if finder is not None:
            finder.forget()
        self.next_check = min(self.next_check, step + LAG)

    def on_op(self, name: str, module: str, tensors: list[torch.Tensor], n_in: int,
              site: tuple[str, int] | None, backward: bool) -> None:  # fmt: skip
        sample = self._current
        n = len(tensors)
        if sample is None or n <= n_in or len(sample.refs) + len(sample.ahead) >= MAX_TRACKED:
            return
        if n - n_in == 1:  # one output (most ops): in place when it is one of the inputs
            out = tensors[n_in]
            for i in range(n_in):
                if tensors[i] is out:
                    return  # in place (an optimizer's add_, mul_): the tensor existed before
            made: list[torch.Tensor] = [out]
        else:
            made = [t for t in tensors[n_in:] if not any(t is tensors[i] for i in range(n_in))]
            if not made:
                return
        if not module and not backward:  # the line only for ops whose outputs are new
            finder = self._finder()
            if finder is not None:
                optimizer, found = finder.leak_site(3)
                if optimizer:
                    return  # an optimizer's temporaries and state: no line of the script keeps them
                site = found or site
        file, line = site if site is not None else ("", 0)
        key = (file, line, module, name)
        fetching = FETCH.thread
        refs = sample.ahead if fetching is not None and fetching == threading.get_ident() else sample.refs
        for t in made:
            try:
                refs.append((weakref.ref(t), key))
            except TypeError:
                pass

    # -- at step boundaries ---------------------------------------------------------
    def check(self, step: int) -> LeaksFields | None:
        """Count survivors and look for graphs spanning steps; the ``leaks`` event fields
        when something changed since the last one, else None."""
        self._checks += 1
        self.new_candidate = None
        self.next_check = step + max(LAG, step // 2) if self._checks < MAX_CHECKS else float("inf")
        self._refresh_locals()
        self._scan_between(step)
        for sample in self._samples:
            if sample.ahead and sample is not self._current and sample.step <= step - LAG - AHEAD:
                sample.refs.extend(sample.ahead)
                sample.ahead = []
        old = [s for s in self._samples if s is not self._current and s.step <= step - LAG]
        if not old:
            return self._snapshot(step)  # (what grew between the steps may have changed)
        per_key: dict[Key, dict[str, Any]] = {}
        roots: dict[Key, list[Any]] = {}  # graphs the survivors keep (sized below)
        for sample in old:
            storages: set[int] = set()
            sample.refs = [(ref, key) for ref, key in sample.refs if ref() is not None]  # keep survivors only
            sample.checked = True
            for ref, key in sample.refs:
                t = ref()
                if t is None:
                    continue
                entry = per_key.setdefault(key, {"alive": 0, "bytes": 0, "steps": set(), "grad": False,
                                                 "scalar": True})
                entry["alive"] += 1
                entry["steps"].add(sample.step)
                entry["grad"] = entry["grad"] or t.grad_fn is not None
                if t.grad_fn is not None and len(roots.setdefault(key, [])) < MAX_ROOTS:
                    roots[key].append(t.grad_fn)
                entry["scalar"] = entry["scalar"] and t.numel() == 1  # `.item()` keeps it: a number
                found = storage_of(t)
                if found is not None and found[0] not in storages:
                    storages.add(found[0])
                    entry["bytes"] += found[1]
        _size_graphs(per_key, roots)
        self._find_carries(old[0].seq, step)  # (first: a carried graph's lines need no owner search)
        # the owner searches' referrers, one heap walk (a local: it holds the survivors, and
        # goes with this check)
        heap = self._owner_searches(per_key, old)
        for key, entry in per_key.items():
            if key in self._released:
                continue
            if key not in self._alive and len(entry["steps"]) == 1:
                self.new_candidate = max(self.new_candidate or 0, *entry["steps"])
            kept = self._alive.setdefault(key, {"alive": 0, "bytes": 0, "steps": set(), "grad": False,
                                                "scalar": True})
            kept["alive"] = max(kept["alive"], entry["alive"])
            kept["bytes"] = max(kept["bytes"], entry["bytes"])
            kept["steps"] |= entry["steps"]
            kept["grad"] = kept["grad"] or entry["grad"]
            kept["scalar"] = kept["scalar"] and entry["scalar"]
            if "graph_nodes" in entry:  # what the graphs keep now (saved tensors: till a backward())
                kept.update(graph_nodes=entry["graph_nodes"], graph_bytes=entry["graph_bytes"],
                            graph_capped=entry["graph_capped"])
            if len(kept["steps"]) >= 2:
                # found again at every check: its length now against the first time it was
                # found gives the rate the container grows at, steps between appends included
                holder = self._find_holder(key, old, step, heap)
                first = kept.get("holder")
                if holder is not None and first:
                    holder["size0"], holder["step0"] = first.get("size0", first.get("size")), first.get(
                        "step0", first.get("step"))
                    holder["held0"] = first.get("held0", first.get("held"))
                kept["holder"] = holder or first
        for key in [k for k, e in self._alive.items() if e.get("holder") and e["holder"].get("bounded")]:
            del self._alive[key]  # a deque(maxlen=...) keeps a bounded number: not a leak
        checked = {sample.step for sample in old}
        for key in [k for k, e in self._alive.items() if k not in per_key and e["steps"] <= checked]:
            # every survivor it had is gone, and each sampled step that had one is still
            # followed: the container was emptied or made anew (an epoch's `all_logits = []`),
            # which bounds it, however long it grows in between. Not a leak, now or later.
            del self._alive[key]
            self._released.add(key)
        self.unsettled = self._checks < MAX_CHECKS and any(
            len(self._alive[k]["steps"]) < 2 for k in per_key if k in self._alive)
        return self._snapshot(step)

    def _owner_searches(self, per_key: dict[Key, dict[str, Any]], samples: list[_Sample]) -> Referrers | None:
        """One heap walk for the owner searches this check may run: the survivors of the
        lines seen on two sampled steps by now and not searched before. :meth:`_owner`
        decides which it searches; the walk runs at its first, if any. None when there are
        no such lines."""
        from .leak_owner import Referrers

        keys = [k for k, e in per_key.items()
                if k not in self._owners and len(e["steps"] | self._alive.get(k, {}).get("steps", set())) >= 2]
        survivors = [t for k in keys if (t := _survivor(k, samples)) is not None]
        return Referrers(survivors) if survivors else None

    def _scan_between(self, step: int) -> None:
        """Containers the script grows between the steps with graphs (:mod:`.leak_between`)."""
        finder = self._finder()
        if finder is not None:
            self._between.check(step, finder.is_user, _adding_line)

    def _refresh_locals(self) -> None:
        """Renew the user frames' ``f_locals`` snapshots before counting survivors.

        Before Python 3.13 (PEP 667) ``frame.f_locals`` of a function is a dict cached on
        the frame, filled when read and kept until the next read: the previous check's
        reading (``_find_carries``) still holds the loop's ``x, y`` of that moment. With
        accelerate's look-ahead those are exactly a sampled step's batch, which then
        looked alive steps later (a false "pile up" on every accelerate loop). Reading
        again replaces the snapshot with what the frame holds now (names gone are
        dropped); the snapshot is not cleared, which would delete locals on the next
        ``PyFrame_LocalsToFast`` of a tracer."""
        finder = self._finder()
        if finder is None or sys.version_info >= (3, 13):
            return
        frame: Any = sys._getframe(2)
        while frame is not None:
            if finder.is_user(frame.f_code):
                frame.f_locals  # noqa: B018  (the read renews the snapshot)
            frame = frame.f_back

    def _find_holder(self, key: Key, samples: list[_Sample], step: int,
                     heap: Referrers | None = None) -> dict[str, Any] | None:  # fmt: skip
        """The user's container that holds a survivor of ``key``, and the line that adds to
        it: the line that keeps the memory, which is not the line that made the tensor when
        the tensor comes from inside the model. Searched among the user frames' variables,
        their modules' globals (``kept = []`` at module level) and one level of attributes
        of their objects (``self.outs``); ``size`` is the container's length now, so the
        parent can tell how fast it grows."""
        survivor = _survivor(key, samples)
        finder = self._finder()
        if survivor is None or finder is None:
            return None
        frame: Any = sys._getframe(2)
        stack: list[Any] = []
        scanned: set[int] = set()
        while frame is not None:
            if finder.is_user(frame.f_code):
                stack.append(frame.f_code)
                found = _holder_in(frame, survivor, scanned)
                if found is not None:
                    name, value = found
                    file = frame.f_code.co_filename
                    line = _adding_line(file, name, stack, survivor.grad_fn is not None)
                    if line is None and (owned := self._owner(key, survivor, finder, step, heap)) is not None:
                        return owned  # `trainer.outs` here, `self.outs.append` in its class
                    try:
                        size = len(value)
                    except Exception:
                        size = 0
                    return {"name": name, "file": file, "line": line or 0,
                            "code": source_line((file, line)) if line else "",
                            "bounded": getattr(value, "maxlen", None) is not None,
                            "size": size, "step": step, "held": held_bytes(value)}  # fmt: skip
            frame = frame.f_back
        return self._owner(key, survivor, finder, step, heap)  # Lightning: no user frame holds the module

    def _owner(self, key: Key, survivor: torch.Tensor, finder: FrameFinder, step: int,
               heap: Referrers | None = None) -> dict[str, Any] | None:  # fmt: skip
        """``_owner_of`` once per site and at most ``MAX_OWNER_SEARCHES`` in a run: each
        walks the whole heap (a graph kept by autograd has no Python container at all,
        and searching it again at every check slowed a time-bounded loop to half its
        steps). Later checks re-read the container's length through a weak reference to
        its owner (the probe keeps nothing alive)."""
        if key not in self._owners:
            if len(self._owners) >= MAX_OWNER_SEARCHES or key[:2] in self._carries:
                return None  # (a carried graph keeps this line's tensors: no container to find)
            self._owners[key] = _owner_of(survivor, finder, heap)
        cached = self._owners[key]
        if cached is None:
            return None
        holder, owner, attr = cached
        if owner is None:  # an itertools.cycle's first pass: bounded, nothing to re-read
            return {**holder, "size": 0, "step": step, "held": None}
        try:
            value = getattr(owner(), attr)
            size = len(value)
        except Exception:
            value, size = None, 0
        return {**holder, "size": size, "step": step, "held": held_bytes(value)}

    def _find_carries(self, seq_ref: int | None, step: int) -> None:
        """User variables whose autograd graph holds nodes from before ``seq_ref`` (the
        start of a sampled step at least LAG steps ago) and after it: a frame's locals, and
        what they hold one attribute or one dict entry away (``self.total``,
        ``stats['loss']``, ``self.stats['loss']``: probe/leak_reach.py), innermost frame
        first, so the method that writes ``self.total`` names it."""
        from .leak_reach import MAX_REACHED, reached

        finder = self._finder()
        if seq_ref is None or finder is None:
            return
        frame: Any = sys._getframe(1)
        seen: set[int] = set()
        looked: set[int] = set()
        budget = MAX_REACHED
        while frame is not None:
            if finder.is_user(frame.f_code):
                local = list(frame.f_locals.items())
                for name, value in local:
                    if issubclass(type(value), torch.Tensor) and id(value) not in seen:
                        seen.add(id(value))
                        if value.grad_fn is not None and _spans(value.grad_fn, seq_ref):
                            self._note_carry(frame, name, step, value, finder)
                for name, value in local:
                    if budget <= 0:
                        break
                    if issubclass(type(value), torch.Tensor) or name.startswith("__"):
                        continue
                    for expr, tensor, owner in reached(name, value, looked):
                        budget -= 1
                        if id(tensor) not in seen:
                            seen.add(id(tensor))
                            if _spans(tensor.grad_fn, seq_ref):
                                self._note_carry(frame, expr, step, tensor, finder, owner, reached=True)
                        if budget <= 0:
                            break
            frame = frame.f_back

    def _note_carry(self, frame: Any, name: str, step: int, value: torch.Tensor, finder: FrameFinder,
                    owner: Any = None, reached: bool = False) -> None:
        """Record the carry at the line that accumulates into ``name``, named as the line
        writes it (``self.stats["loss"]``, found from ``trainer.stats['loss']``); the size
        of its graph now (leak_reach.graph_held). A local with no such line is told at the
        frame's line (as before); one ``reached`` through a local's attribute or entry is not
        told at all: ``out, self.h = rnn(x, self.h)`` is no accumulation to rewrite. Nor is a
        local that every line writing it makes afresh (``preds = torch.cat(kept)`` once an
        epoch): its graph spans steps because what it was made of did (:func:`_made_afresh`)."""
        from .leak_reach import graph_held

        file = frame.f_code.co_filename
        line = _assignment_line(file, name, frame.f_code)
        if line is None and owner is not None:
            file, line = _owner_line(owner, name, finder) or (file, None)
        if line is None and reached:
            return  # reached through an object, and no line writes it so: a wrong line is worse than none
        if line is None and _made_afresh(file, name, frame.f_code):
            return
        line = line or frame.f_lineno
        written = _target_text(file, line, name) or name
        entry = self._carries.setdefault((file, line), {"name": written, "steps": []})
        if step not in entry["steps"]:
            entry["steps"].append(step)
        entry["nodes"], entry["saved"], entry["capped"] = graph_held([value.grad_fn], MAX_NODES)
        entry["at"] = step

    def _snapshot(self, step: int) -> LeaksFields | None:
        sites = []
        ranked = sorted(self._alive.items(), key=lambda kv: (-kv[1]["bytes"], -kv[1]["alive"]))
        for (file, line, module, op), e in ranked[:MAX_SITES]:
            sites.append({"file": file, "line": line, "module": module, "op": op,
                          "code": source_line((file, line)) if file else "", "alive": e["alive"],
                          "bytes": e["bytes"], "steps": sorted(e["steps"]), "grad": e["grad"],
                          "scalar": e["scalar"]})  # fmt: skip
            if e.get("holder"):
                sites[-1]["holder"] = e["holder"]
            if "graph_nodes" in e:
                sites[-1].update(graph_nodes=e["graph_nodes"], graph_bytes=e["graph_bytes"],
                                 graph_capped=e["graph_capped"])
        carries = [{"file": f, "line": ln, "name": e["name"], "code": source_line((f, ln)), "steps": e["steps"],
                    "nodes": e.get("nodes", 0), "saved": e.get("saved", 0), "capped": e.get("capped", False),
                    "at": e.get("at", step)}
                   for (f, ln), e in self._carries.items()]  # fmt: skip
        # kept between the steps, where no sampled step's survivor names the same line
        named = {((s.get("holder") or {}).get("file"), (s.get("holder") or {}).get("line")) for s in sites}
        between = [b for b in self._between.found() if (b["file"], b["line"]) not in named]
        for b in between:
            b["code"] = source_line((b["file"], b["line"]))
        if not sites and not carries and not between and self._last_sent is None:
            return None  # (once something was sent, an empty snapshot says it is gone)
        state = (tuple((s["file"], s["line"], s["op"], s["alive"], tuple(s["steps"]),
                        (s.get("holder") or {}).get("size")) for s in sites),
                 tuple((c["file"], c["line"], c["nodes"]) for c in carries),
                 tuple((b["file"], b["line"], b["size"]) for b in between))  # fmt: skip
        if state == self._last_sent:
            return None
        self._last_sent = state
        return {"step": step, "lag": LAG, "sites": sites, "carries": carries, "between": between}


def _survivor(key: Key, samples: list[_Sample]) -> torch.Tensor | None:
    """The first tensor of ``key`` still alive among ``samples``' (the one a holder is searched for)."""
    return next((t for s in samples for ref, k in s.refs if k == key and (t := ref()) is not None), None)


def _size_graphs(per_key: dict[Key, dict[str, Any]], roots: dict[Key, list[Any]]) -> None:
    """``graph_nodes`` and ``graph_bytes`` (saved tensors still held) of the graphs each
    line's survivors keep: a kept loss is 4 bytes of its own, and its graph may hold a
    step's activations (leak_reach.graph_held). The ``SIZED_SITES`` lines that keep the
    most, ``SIZED_NODES`` nodes each (about 7 us a node): only lines with survivors pay it."""
    from .leak_reach import graph_held

    for key in sorted(roots, key=lambda k: -per_key[k]["bytes"])[:SIZED_SITES]:
        nodes, saved, capped = graph_held(roots[key], SIZED_NODES)
        per_key[key].update(graph_nodes=nodes, graph_bytes=saved, graph_capped=capped)


def _spans(root: Any, seq_ref: int) -> bool:
    """Whether the graph from ``root`` holds nodes made both before and after ``seq_ref``."""
    before = after = False
    for _, seq in GraphWalk([root], MAX_NODES):
        if seq < _NO_SEQ:
            if seq < seq_ref:
                before = True
            else:
                after = True
            if before and after:
                return True
    return False


def _holds(value: Any, tensor: torch.Tensor) -> bool:
    """Whether a container (list, tuple, deque, dict values, one level deep) holds ``tensor``.

    Kinds are told by ``type()`` here and below, never ``isinstance``: on an object of
    another type ``isinstance`` reads its ``__class__``, which runs the class's own
    ``__getattribute__`` (a lazy proxy's load, a config's attribute map) for every object
    of the script a leak check looks at."""
    kind = type(value)
    if issubclass(kind, dict):
        items: Any = value.values()
    elif issubclass(kind, (list, tuple)) or kind.__name__ == "deque":
        items = value
    else:
        return False
    try:
        # In C, not a Python generator resumed per item: a leak check asks this of every
        # list, dict and deque of the user frames, of their objects and of their globals
        # (a tokenised corpus kept as a list of ints), for each leaking site, at each check
        if any(map(operator.is_, items, repeat(tensor))):
            return True
        if not any(issubclass(kind, (tuple, list)) for kind in set(map(type, items))):
            return False  # no tuple or list among the items: nothing one level deep
        nested = compress(items, map(issubclass, map(type, items), repeat((tuple, list))))
        return any(map(operator.is_, chain.from_iterable(nested), repeat(tensor)))
    except Exception:
        return False


def _keyed(name: str, value: Any, survivor: torch.Tensor) -> tuple[str, Any]:
    """``history['loss']`` and that list when ``value`` is a dict one of whose values (a
    list, tuple or deque under a str or int key) holds ``survivor``: the line that keeps it
    is ``history["loss"].append(...)`` and its growth is that list's, not the dict's.
    ``(name, value)`` otherwise (``cache[step] = out``: the dict itself grows)."""
    if issubclass(type(value), dict):
        try:
            for key, inner in list(value.items())[:200]:
                if inner is survivor:
                    break
                if type(key) in (str, int) and not issubclass(type(inner), dict) and _holds(inner, survivor):
                    return f"{name}[{key!r}]", inner  # as ast.unparse writes it (leak_owner.dotted)
        except Exception:
            pass
    return name, value


def held_bytes(container: Any) -> int | None:
    """Bytes of the tensors a kept container holds (its items, or a dict's values, and the
    tensors one level inside them: a list of tuples, of dicts), each storage once; None
    where it holds none or cannot be read. Its growth between two checks is what the
    container adds to memory: the items it gains between the sampled steps (an evaluation
    pass's, of another batch size) need not be the size of those the sampled steps made
    (issue 28: a Trainer's compute_loss keeping train and eval logits was told 1.1 MiB a
    step where the process grew 1.5). A longer container is sized from an even sample of
    ``MAX_HELD_ITEMS`` items, scaled to its length."""
    try:
        items = list(container.values()) if issubclass(type(container), dict) else list(container)
    except Exception:
        return None
    if not items:
        return None
    stride = max(1, -(-len(items) // MAX_HELD_ITEMS))
    storages: set[int] = set()
    total = 0
    for item in items[::stride]:
        kind = type(item)
        inner = item.values() if issubclass(kind, dict) else item if issubclass(kind, (list, tuple)) else (item,)
        for t in inner:
            found = storage_of(t) if issubclass(type(t), torch.Tensor) else None
            if found is not None and found[0] not in storages:
                storages.add(found[0])
                total += found[1]
    return total * stride if storages else None


def _holder_in(frame: Any, survivor: torch.Tensor, scanned: set[int]) -> tuple[str, Any] | None:
    """(name, container) of a frame's locals, its objects' attributes or its globals holding ``survivor``."""
    local = list(frame.f_locals.items())
    for name, value in local:
        if _holds(value, survivor):
            return _keyed(name, value, survivor)
    for name, value in local:
        attrs = own_dict(value)  # not getattr: no __getattribute__ of the script's runs
        if attrs is not None and not issubclass(type(value), type) and type(value).__name__ != "module":
            for attr, inner in list(attrs.items())[:200]:
                if _holds(inner, survivor):
                    return _keyed(f"{name}.{attr}", inner, survivor)
    glob = frame.f_globals
    if id(glob) not in scanned and glob is not frame.f_locals:
        scanned.add(id(glob))
        for name, value in list(glob.items()):
            if not name.startswith("__") and _holds(value, survivor):
                return _keyed(name, value, survivor)
    return None


MAX_OWNER_SEARCHES = 4
REPLAYED = {"name": "itertools.cycle", "file": "", "line": 0, "code": "", "bounded": True}
"""The holder of a survivor an ``itertools.cycle`` keeps (``leak_owner.replayed``): the
first pass it replays, bounded, so no leak (``check`` drops bounded holders)."""


def _owner_of(survivor: torch.Tensor, finder: FrameFinder,
              heap: Referrers | None) -> tuple[dict[str, Any], Any, str] | None:  # fmt: skip
    """The user object's attribute holding ``survivor`` (probe/leak_owner.py): the holder
    fields (no size or step yet), a weak reference to the object and the attribute."""
    from .leak_owner import find_owner, replayed

    found = find_owner(survivor, finder.is_user, _adding_lines, heap)
    if found is None:
        return (dict(REPLAYED), None, "") if replayed(survivor, heap) else None
    try:
        owner = weakref.ref(found["object"])
    except TypeError:
        return None
    line = found["line"]
    return ({"name": found["name"], "file": found["file"], "line": line, "code": source_line((found["file"], line)),
             "bounded": found["bounded"]}, owner, found["attr"])


_ADDS = frozenset({"append", "extend", "insert", "add", "appendleft", "update", "setdefault"})


def _adding_lines(file: str, name: str) -> list[int]:
    """Lines of code (not strings or comments) in ``file`` that add to ``name``:
    ``name.append(...)`` and the like, ``name += ...``, ``name[...] = ...``."""
    import ast

    from .leak_owner import dotted, parsed, statements

    tree = parsed(file)  # one cache of the user's parsed files for both leak readers
    if tree is None:
        return []
    nodes, _, derived = statements(tree)  # one walk of a file, not one per call
    known = derived.get(("adding", name))
    if known is not None:
        return list(known)
    # `history['loss']` (a list in a dict, found by its key) is also added to where the
    # code computes the key: any `history[...]` or `history.setdefault(...)`
    keyed = name.split("[", 1)[0] + "[*]" if name.endswith("]") and "[" in name else ""
    lines = []
    for node in nodes:
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _ADDS:
            target = node.func.value
        elif isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
            target = node.targets[0].value
        if target is not None and (dotted(target) == name or (keyed and _any_key(target) == keyed)):
            lines.append(int(getattr(node, "lineno", 0)))
    derived[("adding", name)] = sorted(lines)
    return sorted(lines)


def _any_key(node: Any) -> str:
    """``history[*]`` for a list of a dict reached by a key the code computes:
    ``history[name]``, ``history.setdefault(name, [])``, ``history.get(name)`` (a forward
    hook's ``activations.setdefault(name, []).append(out)``, whose list the probe finds
    as ``activations['block0']``); '' for anything else."""
    from .leak_owner import dotted

    if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
        root = dotted(node.value)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ("setdefault", "get")):
        root = dotted(node.func.value)
    else:
        return ""
    return f"{root}[*]" if root else ""


def _adding_line(file: str, name: str, stack: list[Any], grad: bool) -> int | None:
    """The line that adds the leaked tensor to ``name``: among the lines whose added value
    can be that tensor (not ``x.item()``, nor ``x.detach()`` for a tensor with history;
    leak_owner.may_keep), the first inside a user function on the stack, innermost first
    (the loop that appends); elsewhere in the file only when one line alone qualifies
    (a helper that appends, called earlier); None rather than a guess."""
    import linecache

    from .leak_owner import may_keep, parsed

    found = _adding_lines(file, name)
    tree = parsed(file) if found else None
    found = [n for n in found if tree is None or may_keep(tree, n, name, grad)]
    if not found:
        return None
    count = len(linecache.getlines(file)) or max(found)
    for code in stack:
        if code.co_filename != file:
            continue
        first, last = code_range(code, count)
        inside = [n for n in found if first <= n <= last]
        if inside:
            return inside[0]
    return found[0] if len(found) == 1 else None


def code_range(code: Any, count: int) -> tuple[int, int]:
    if code.co_name == "<module>":
        return 1, count
    last = max((ln for _, _, ln in code.co_lines() if ln), default=count)
    return code.co_firstlineno, min(last, count)


def _assignment_line(file: str, name: str, code: Any, span: tuple[int, int] | None = None) -> int | None:
    """The line in ``code`` (a function, or the module) that accumulates into ``name``: an
    assignment to it whose value reads it (``name += loss``, ``name = name + loss``, an
    exponential average ``name = 0.98 * name + 0.02 * loss``, ``name = loss if name is None
    else ...``), read from the file's syntax tree; None when there is none.

    A regular expression over the lines took only ``name +=`` and ``name = name ...``: an
    average's line was missed and the finding named the line the frame stood on at the
    step boundary (``opt.step()``)."""
    import linecache

    from .leak_owner import parsed, statements

    lines = linecache.getlines(file)
    tree = parsed(file) if lines else None  # the leak readers' one cache of parsed files
    if tree is None:
        return None
    first, last = span or code_range(code, len(lines))
    found: list[tuple[int, ast.expr]] = []
    for node in statements(tree)[0]:  # the tree's assignments in its walk's order
        if not first <= getattr(node, "lineno", 0) <= last:
            continue
        if isinstance(node, ast.AugAssign) and _names(node.target, name):
            found.append((node.lineno, node.value))
        elif (isinstance(node, ast.Assign) and any(_names(t, name) for t in node.targets)
              and any(_names(n, name) for n in ast.walk(node.value))):
            found.append((node.lineno, node.value))
    found.sort(key=lambda lv: lv[0])
    # a line that accumulates numbers (`x += loss.item()`) cannot hold a graph: prefer others
    tensors = [ln for ln, value in found if not _makes_a_number(value)]
    return (tensors or [ln for ln, _ in found])[0] if found else None


def _made_afresh(file: str, name: str, code: Any) -> bool:
    """Whether ``code`` writes the plain local ``name`` and no line that writes it reads it
    (``tp = torch.cat(train_preds)``, tuple targets included): the value is made anew, so
    no step's graph is chained to the previous one through it.

    A Kaggle-style loop appended each batch's output (with its graph) to a list made anew
    every epoch and concatenated it after the epoch: the concatenation, alive through the
    next epoch, held nodes of several steps and was told as "`tp` keeps every step's
    autograd graph alive" at the line the frame stood on (``opt.step()``), with the fix
    ``tp += loss.item()``, a line that is not in the script. A name no line writes (a
    parameter), or one a line writes from itself (``out, h = rnn(x, h)``), stays told."""
    import linecache

    from .leak_owner import parsed, statements

    lines = linecache.getlines(file)
    tree = parsed(file) if lines else None
    if tree is None or "." in name or "[" in name:
        return False
    first, last = code_range(code, len(lines))
    written = False
    for node in statements(tree)[0]:
        if not isinstance(node, (ast.Assign, ast.AugAssign)) or not first <= getattr(node, "lineno", 0) <= last:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        if not any(isinstance(t, ast.Name) and t.id == name for target in targets for t in ast.walk(target)):
            continue
        if isinstance(node, ast.AugAssign) or any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.value)):
            return False
        written = True
    return written


def _names(node: Any, name: str) -> bool:
    """Whether ``node`` is ``name``: a plain name, or an attribute or constant-key entry
    written as leak_owner.dotted writes it (``self.total``, ``stats['loss']``)."""
    if isinstance(node, ast.Name):
        return node.id == name
    if isinstance(node, (ast.Attribute, ast.Subscript)) and ("." in name or "[" in name):
        from .leak_owner import dotted

        return dotted(node) == name
    return False


def _owner_line(owner: Any, name: str, finder: FrameFinder) -> tuple[str, int] | None:
    """(file, line) of the accumulation into ``name`` (``trainer.stats['loss']``, reached
    through the local ``trainer``) in a method of the owner's class, where it is written
    ``self.stats['loss']``: the one such line of those methods (the tensor-adding one
    where a method has two: _assignment_line); None when there is none or several."""
    from .leak_owner import _code_lines, _user_methods

    rest = name.split(".", 1)[1] if "." in name.split("[", 1)[0] else ""
    if not rest:
        return None
    found: list[tuple[str, int]] = []
    for code in _user_methods(owner, finder.is_user):
        line = _assignment_line(code.co_filename, f"self.{rest}", code, _code_lines(code))
        if line is not None and (code.co_filename, line) not in found:
            found.append((code.co_filename, line))
    return found[0] if len(found) == 1 else None


def _target_text(file: str, line: int, name: str) -> str:
    """The target accumulated into at ``line`` as the script writes it
    (``self.stats["loss"]``), '' when the line has none that reads as ``name`` or its
    ``self.`` form."""
    import linecache

    from .leak_owner import dotted, parsed, source_segment, statements

    if "." not in name and "[" not in name:
        return ""
    tree = parsed(file)
    if tree is None:
        return ""
    tail = name.split(".", 1)[1] if "." in name.split("[", 1)[0] else ""
    names = {name, f"self.{tail}"} if tail else {name}
    lines = linecache.getlines(file)
    for node in statements(tree)[1].get(line, ()):
        if getattr(node, "lineno", 0) != line or not isinstance(node, (ast.AugAssign, ast.Assign)):
            continue
        for target in [node.target] if isinstance(node, ast.AugAssign) else node.targets:
            if dotted(target) in names:
                return source_segment(lines, target) or dotted(target)
    return ""


def _makes_a_number(value: Any) -> bool:
    """``loss.item()``, ``float(loss)``, ``loss.detach()``, ``.tolist()``: no graph is added."""
    for node in ast.walk(value):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in ("item", "detach", "tolist"):
                return True
            if isinstance(func, ast.Name) and func.id == "float":
                return True
    return False
