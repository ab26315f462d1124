"""Where a script that crashed for want of a device names that device, and the line that
chooses it from what the machine has.

A script written on one machine names its device as a string: ``torch.device("mps")`` on a
Mac, ``"cuda"`` in a tutorial. Elsewhere torch refuses it with the messages
:data:`.crash.MISSING_DEVICE` lists. The crash's line is where the device is *used*
(``model.to(device)``); the fix goes where it is *named*. So the user's file is read for
the string literals that name the missing device where a device is given: the argument of
``torch.device(...)`` or ``.to(...)``, a ``device=``, ``map_location=`` or ``default=``
keyword (argparse), the default of ``os.environ.get(...)``, or the value of an assignment
(``DEVICE = "mps"``). Comparisons (``if device == "mps":``) are not places that choose it.

The replacement asks torch what the machine has, the named device first, as the PyTorch
docs' MPS page checks it (``torch.backends.mps.is_available()``,
https://pytorch.org/docs/stable/notes/mps.html) and ``torch.cuda.is_available()``
(https://pytorch.org/docs/stable/notes/cuda.html#best-practices). ``.cuda()`` calls name
no string: their lines are listed, for the fix to say where ``.to(device)`` goes.
"""

from __future__ import annotations

import ast
import os
import re
from typing import Any

from ...session.session import Session
from .crash import missing_device, user_frame
from .registry import analyzer
from .source_edit import read_tree, short_path

DEVICE_CHOICE_FACTS: tuple[str, ...] = (
    "device_missing", "device_missing_cause", "device_sites", "device_sites_n", "device_site_place",
    "device_fix_code", "device_fix_kind", "device_cuda_calls",
)  # fmt: skip
MAX_LISTED = 5

NAMING_KEYWORDS = frozenset({"device", "map_location", "default"})
"""Keywords whose string value names a device (``default=`` of an argparse option)."""


def chooser(literal: str, quote: str = '"', torch: str = "torch") -> str:
    """The expression that picks ``literal`` (``"mps"``, ``"cuda:1"``) where the machine has
    it, else the other accelerator, else the CPU (``torch``: the name torch is bound to)."""
    first = literal.split(":", 1)[0]
    other = "cuda" if first == "mps" else "mps"
    test = {"mps": f"{torch}.backends.mps.is_available()", "cuda": f"{torch}.cuda.is_available()"}
    q = quote
    return (f"{q}{literal}{q} if {test[first]} else {q}{other}{q} if {test[other]} else {q}cpu{q}")


def _names_device(value: str, device: str) -> bool:
    return re.fullmatch(rf"{device}(?::\d+)?", value) is not None


def device_literals(tree: ast.Module, device: str) -> list[ast.Constant]:
    """The string literals of ``tree`` that name ``device`` where a device is chosen (see
    the module docstring), in source order."""
    found: list[ast.Constant] = []

    def take(node: ast.AST | None) -> None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _names_device(node.value, device):
            found.append(node)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("device", "to") and node.args:
                take(node.args[0])
            elif name == "get" and len(node.args) == 2:  # os.environ.get("DEVICE", "mps")
                take(node.args[1])
            for kw in node.keywords:
                if kw.arg in NAMING_KEYWORDS:
                    take(kw.value)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            take(node.value)
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def cuda_calls(tree: ast.Module) -> list[int]:
    """Lines that call ``.cuda()`` (a device no string names)."""
    return sorted({n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                   and n.func.attr == "cuda"})


def _rewritten_line(source: str, node: ast.Constant) -> str | None:
    """The source line of ``node`` with the literal replaced by :func:`chooser` (byte
    offsets: ast counts UTF-8 bytes)."""
    if node.end_lineno != node.lineno or node.end_col_offset is None:
        return None
    raw = source.splitlines()[node.lineno - 1].encode("utf-8")
    text = raw[node.col_offset:node.end_col_offset].decode("utf-8")
    quote = text[-1] if text[-1:] in ("'", '"') else '"'
    if text[:1] not in ("'", '"'):  # a prefixed or implicit-concatenated string: leave it
        return None
    # a conditional expression needs no parentheses as an argument, a keyword's value or
    # an assignment's (the only places device_literals takes)
    new = raw[:node.col_offset] + chooser(str(node.value), quote).encode() + raw[node.end_col_offset:]
    return new.decode("utf-8").strip()


def device_files(session: Session) -> list[str]:
    """The files that may name the device, absolute: the crash's own file, then the script
    the run ran (relative paths are the run's working directory's, not this process's);
    the patch planner reads the same ones."""
    crash = session.crash
    frame = user_frame(crash) if crash is not None else None
    cwd = str(session.run.get("cwd") or "")
    paths = (str(frame.get("file") or "") if frame is not None else "",
             "" if session.run.get("module") else str(session.run.get("target") or ""))
    return list(dict.fromkeys(os.path.realpath(os.path.join(cwd, p)) for p in paths if p.endswith(".py")))


@analyzer("device_choice", provides=DEVICE_CHOICE_FACTS)
def device_choice_facts(session: Session) -> dict[str, Any]:
    crash = session.crash
    device = missing_device(crash.message or "") if crash is not None else None
    if crash is None or device is None:
        return {}
    facts: dict[str, Any] = {"device_missing": device, "device_missing_cause": device, "device_sites_n": 0,
                             "device_fix_kind": "top", "device_fix_code": f"device = torch.device({chooser(device)})"}
    frame = user_frame(crash)
    crash_file = str(frame.get("file") or "") if frame is not None else ""
    crash_line = frame.get("line") if frame is not None else None
    cwd = session.run.get("cwd")
    sites: list[tuple[str, ast.Constant, str]] = []
    calls: list[str] = []
    for path in device_files(session):
        read = read_tree(path)
        if read is None:
            continue
        source, tree = read
        sites.extend((path, node, source) for node in device_literals(tree, device))
        if device == "cuda":
            calls.extend(f"{short_path(path, cwd)}:{line}" for line in cuda_calls(tree))
    facts["device_sites_n"] = len(sites)
    facts["device_sites"] = [f"{short_path(p, cwd)}:{n.lineno}" for p, n, _ in sites][:MAX_LISTED] or None
    facts["device_cuda_calls"] = calls[:MAX_LISTED] or None
    if sites:  # the crash's own line first, where it names the device itself
        here = os.path.realpath(os.path.join(str(cwd or ""), crash_file)) if crash_file else ""
        path, node, source = next((s for s in sites if s[0] == here and s[1].lineno == crash_line), sites[0])
        line = _rewritten_line(source, node)
        facts["device_site_place"] = f"{short_path(path, cwd)}:{node.lineno}"
        if line is not None:
            facts["device_fix_kind"], facts["device_fix_code"] = "site", line
    return facts
