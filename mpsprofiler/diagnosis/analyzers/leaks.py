"""Leak facts from the probe's leak tracking (:mod:`mpsprofiler.probe.ops_leaks`).

Two patterns, each with the user's line, so the fix can match the pattern found:

* ``graph_carry_*``: a variable whose autograd graph spans step boundaries
  (``total_loss += loss``): every step's graph stays alive; the fix is ``.item()`` or
  ``.detach()``;
* ``leak_site_*``: a line whose tensors, made on sampled steps, are still alive steps
  later, from at least two sampled steps (a one-time buffer survives from one only).
  ``leak_site_grad`` tells graphs kept alive (``losses.append(loss)``) from a container
  of plain tensors growing (``cache.append(h.detach().clone())``).
"""

from __future__ import annotations

import os
from typing import Any

from ...session.session import Session
from ...units import fmt_bytes
from . import robust
from .common import MIB, is_asynchronous
from .leak_fix import added_line_fix, carry_fix, growth_kib_per_step, keep_fix
from .registry import analyzer

MIN_SAMPLES = 2
FLAT_SEEN_MIB = 4.0
"""What a line's pile-up must add over the steady steps after it was seen before the process's
memory can say it stopped: under this, RSS's own scatter (allocator pages, other threads)
hides it, and the sampled steps alone decide."""
FLAT_SHARE = 0.25
"""Memory that grew by less than this share of what the line's rate predicts did not keep
growing: the container was bounded after the sampled steps (``itertools.cycle(loader)``
keeps the first pass's batches and replays them: 30 KiB a step from steps 3 and 5, flat RSS
from step 32 to 399)."""


def _where(file: str, line: int) -> str:
    return f"{os.path.basename(file)}:{line}" if file else "?"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


LEAK_FACTS: tuple[str, ...] = (
    "graph_carry_code", "graph_carry_count", "graph_carry_file", "graph_carry_first_step",
    "graph_carry_fix_code", "graph_carry_line", "graph_carry_name", "graph_carry_nodes", "graph_carry_saved",
    "graph_carry_size", "graph_carry_size_step", "leak_site_alive", "leak_site_code", "leak_site_count",
    "leak_site_file", "leak_site_first_step", "leak_site_fix_code", "leak_site_grad", "leak_site_holder",
    "leak_site_holder_code", "leak_site_holder_line",
    "leak_site_is_carry", "leak_site_keep_line", "leak_site_kept_by", "leak_site_kib",
    "leak_site_kib_per_step", "leak_site_lag", "leak_site_memory_flat", "leak_site_mib_per_100_steps", "leak_site_line", "leak_site_mib", "leak_site_module",
    "leak_site_op", "leak_site_samples", "leak_site_table", "leak_place_sentence",
    "leak_site_graph_size", "leak_site_graph_nodes", "leak_site_graph_saved", "leak_site_own", "leak_site_held",
    "leak_site_own_per_step", "leak_site_held_per_step",
    "leak_site_number", "leak_site_item_code",
    "leak_between_code", "leak_between_fix_code", "leak_between_held", "leak_between_holder", "leak_between_line",
    "leak_between_size", "leak_between_size0", "leak_between_step", "leak_between_step0",
)
"""Every fact the ``leaks`` analyzer may return (declared: no other analyzer may provide one)."""


@analyzer("leaks", provides=LEAK_FACTS)
def leak_facts(session: Session) -> dict[str, Any]:
    leaks = session.leaks
    facts: dict[str, Any] = {"graph_carry_count": len(leaks.carries)}
    if leaks.carries:
        c = leaks.carries[0]
        facts.update(graph_carry_line=_where(c.file, c.line), graph_carry_file=c.file, graph_carry_code=c.code,
                     graph_carry_name=c.name, graph_carry_first_step=min(c.steps) if c.steps else None,
                     graph_carry_fix_code=carry_fix(c.file, c.line, c.name))  # fmt: skip
        facts.update(_carry_size(c))
    # made on two sampled steps, and more alive than one step's own: kept, not replaced
    sites = [s for s in leaks.sites if len(s.steps) >= MIN_SAMPLES and s.alive >= MIN_SAMPLES
             and (s.alive_one is None or s.alive > s.alive_one)]
    facts["leak_site_count"] = len(sites)
    # the sentence naming the line that keeps the tensors: a code rules/tensor-leak.yaml words
    facts["leak_place_sentence"] = "not_found"
    if not sites:
        facts.update(_between(leaks.between))
        return facts
    top = sites[0]
    samples = len(top.steps)
    rate = _rate(top, samples)
    facts.update(
        leak_site_line=_where(top.file, top.line),
        leak_site_file=top.file,
        leak_site_code=top.code or top.op,
        leak_site_module=top.module or "(training loop)",
        leak_site_op=top.op,
        leak_site_alive=top.alive,
        leak_site_mib=round(top.bytes / MIB, 3),
        leak_site_kib=round(top.bytes / 1024, 1),
        leak_site_keep_line=_where(top.holder_file, top.holder_line) if top.holder_line else _where(top.file, top.line),
        leak_site_kib_per_step=round(rate, 1),
        leak_site_mib_per_100_steps=round(rate * 100 / 1024, 1),
        leak_site_samples=samples,
        leak_site_lag=leaks.lag,
        leak_site_grad=top.grad,
        leak_site_first_step=min(top.steps),
        leak_site_table=_table(sites),
        leak_site_holder=top.holder or None,
        leak_site_holder_line=_where(top.holder_file, top.holder_line) if top.holder_line else None,
        leak_site_holder_code=top.holder_code or None,
        leak_site_kept_by=_kept_by(top),
        # the same line as a graph kept across steps: one finding (graph-kept-across-steps) says it
        leak_site_memory_flat=_memory_flat(session, rate, min(top.steps)),
        leak_site_is_carry=any((c.file, c.line) in ((top.file, top.line), (top.holder_file, top.holder_line))
                               for c in leaks.carries),
    )
    facts.update(_graph_size(top, rate))
    if top.holder and top.holder_line:
        facts["leak_place_sentence"] = "holder_code" if top.holder_code else "holder"
    kept = keep_fix(top)
    facts["leak_site_fix_code"] = kept.get("leak_site_fix_code") or _generic_fix(top.grad)
    # the number alternative only where the script's uses of the container take numbers
    facts["leak_site_number"] = kept.get("leak_site_number", "none")
    facts["leak_site_item_code"] = kept.get("leak_site_item_code")
    return facts


def grown_most(kept: list[Any]) -> Any | None:
    """The list the script grew most between the steps with graphs: the one the findings
    name, and the one ``mpsprof patch`` edits."""
    return max(kept, key=lambda b: b.size - b.size0) if kept else None


def _between(kept: list[Any]) -> dict[str, Any]:
    """The list grown most between the steps with graphs (an evaluation pass's appends,
    which no sampled step sees: probe/leak_between.py), where no sampled step named a line:
    ``leak_place_sentence`` ``between`` with its line, its growth and the line rewritten to
    keep no graph (``between_code`` where the line could not be rewritten)."""
    k = grown_most(kept)
    if k is None:
        return {}
    code, fix = added_line_fix(k.file, k.line, k.name, grad=True) or (k.code, None)
    return {"leak_place_sentence": "between" if fix else "between_code", "leak_between_holder": k.name,
            "leak_between_line": _where(k.file, k.line), "leak_between_code": code or k.name,
            "leak_between_size0": k.size0, "leak_between_step0": k.step0, "leak_between_size": k.size,
            "leak_between_step": k.step, "leak_between_fix_code": fix,
            "leak_between_held": fmt_bytes(k.saved) if k.saved else "none"}


def _carry_size(c: Any) -> dict[str, Any]:
    """What the carried graph held when last measured: ``graph_carry_size`` is a code
    ``rules/tensor-leak.yaml`` words (``saved``: tensors saved for a backward still held;
    ``freed``: nodes only, ``backward()`` freed what they saved; None: not measured)."""
    if not c.nodes:
        return {"graph_carry_size": None}
    return {"graph_carry_size": "saved" if c.saved else "freed", "graph_carry_size_step": c.at,
            "graph_carry_nodes": f"{c.nodes:,}" + (" or more" if c.capped else ""),
            "graph_carry_saved": fmt_bytes(c.saved)}


def _graph_size(site: Any, kib_per_step: float) -> dict[str, Any]:
    """What a line's kept tensors hold with their graphs, in all and per step. The tensors'
    own bytes alone read "0.0 KiB" for kept losses (4 bytes each) whatever their graphs held:
    ``leak_site_held`` adds the tensors the graphs saved for a backward that has not run (a
    step's activations); where ``backward()`` freed them (``freed``), what stays is the
    graphs' nodes, counted, not sized (their C++ objects are not tensors). The per-step
    amounts (``kib_per_step``: the line's rate, see ``_rate``) are what the process gains
    each step from this line, to set beside its memory growth: the sampled steps' totals
    alone ("4 tensors, 256 KiB") gave no rate (issue 28)."""
    own = fmt_bytes(site.bytes)
    own_per_step = fmt_bytes(kib_per_step * 1024)
    if not site.grad or site.graph_nodes is None:
        return {"leak_site_graph_size": "unmeasured" if site.grad else None, "leak_site_own": own,
                "leak_site_own_per_step": own_per_step}
    held = site.bytes + site.graph_bytes
    held_per_step = kib_per_step * 1024 * held / site.bytes if site.bytes else None
    return {"leak_site_graph_size": "saved" if site.graph_bytes else "freed", "leak_site_own": own,
            "leak_site_own_per_step": own_per_step,
            "leak_site_graph_nodes": f"{site.graph_nodes:,}" + (" or more" if site.graph_capped else ""),
            "leak_site_graph_saved": fmt_bytes(site.graph_bytes),
            "leak_site_held": fmt_bytes(held), "leak_site_held_per_step": fmt_bytes(held_per_step)}


def _memory_flat(session: Session, kib_per_step: float, seen: int) -> bool:
    """Whether the process's memory stayed flat over the steady steps after the line's
    pile-up was seen, where that pile-up at its rate would have shown (``FLAT_SEEN_MIB``):
    RSS, and on a GPU its allocated memory too (the kept tensors may be on either side).
    A trend over the memory samples' clock (two a second: a short run's steady window has
    a few, too few for the memory rules' per-step trend, enough for a slope)."""
    steps = session.steps
    held = [p for p in steps.series.points() if p.i >= max(steps.warmup, seen)]
    if len(held) < 2:
        return False
    expected = kib_per_step * 1024.0 * (held[-1].i - held[0].i)
    if expected < FLAT_SEEN_MIB * MIB:
        return False
    t0, t1 = held[0].end, held[-1].end
    samples = [m for m in session.memory.series.points() if t0 <= m.ts <= t1]
    kinds = ["rss", "allocated"] if is_asynchronous(session) else ["rss"]
    for kind in kinds:
        pts = [(m.ts, getattr(m, kind)) for m in samples if getattr(m, kind) is not None]
        trend = robust.trend([p[0] for p in pts], [p[1] for p in pts])
        if trend is None or trend.slope * (t1 - t0) >= FLAT_SHARE * expected:
            return False
    return True


def _rate(site: Any, samples: int) -> float:
    """KiB per step: from the container's growth when measured (appends every Nth step
    count), else the tensors kept per sampled step."""
    grown = growth_kib_per_step(site)
    return grown if grown is not None else site.bytes / samples / 1024


def _generic_fix(grad: bool) -> str:
    if grad:
        return ("losses.append(loss.item())             # not losses.append(loss)\n"
                "recent = collections.deque(maxlen=100) # bounded, if tensors must be kept\n"
                "recent.append(out.detach())")
    return ("import collections\n"
            "cache = collections.deque(maxlen=64)          # keeps the last 64 batches only\n"
            "cache.append(h.detach().clone())\n"
            "# or keep a summary: stats.append(h.detach().mean().item())")


def _kept_by(site: Any) -> str:
    """Which sentence names the container and the line that adds to it: a code
    ``rules/tensor-leak.yaml`` words (``not_found``; ``kept``, with ``_at`` where the adding
    line is known and ``_code`` where its code is)."""
    if not site.holder:
        return "not_found"
    return "kept" + ("_at" if site.holder_line else "") + ("_code" if site.holder_code else "")


def _table(sites: list[Any]) -> str:
    lines = ["| file:line | code | module | tensors alive | MiB | from sampled steps | graph |",
             "|---|---|---|---:|---:|---|---|"]  # fmt: skip
    for s in sites[:8]:
        code = f"`{_cell(s.code)}`" if s.code else _cell(s.op)
        lines.append(f"| {_cell(_where(s.file, s.line))} | {code} | {_cell(s.module or '(training loop)')} "
                     f"| {s.alive} | {s.bytes / MIB:.2f} | {', '.join(map(str, s.steps))} | {'yes' if s.grad else 'no'} |")
    return "\n".join(lines)
