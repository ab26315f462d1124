"""Validate one rule of a rule file: its YAML mapping node becomes a :class:`Rule`, or errors.

Split from the loader (:mod:`.rules`), which reads the file and composes the YAML node tree
(never Python objects); this module checks each ``- id: ...`` mapping key by key, with the
line and column of every problem, compiles its condition (:mod:`.conditions`) and its
templates (:mod:`.template`), and points at the character of a broken expression inside
the YAML scalar where the scalar's style makes that knowable.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..devices.kinds import DEVICE_KINDS
from .conditions import Condition, ConditionError, compile_condition
from .findings import SEVERITIES
from .rule_model import Rule, RuleError
from .template import Template, TemplateError, compile_template

REQUIRED_KEYS = ("id", "title", "severity", "when", "evidence", "fix")
OPTIONAL_KEYS = ("devices", "threshold_reason", "references", "first_step", "requires", "enabled", "cause", "phrases")
KNOWN_KEYS = REQUIRED_KEYS + OPTIONAL_KEYS
_LIST_KEYS = ("devices", "requires")
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
_FACT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_STR = "tag:yaml.org,2002:str"


def pos(node: Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _locate(node: Node, offset: int, lines: list[str]) -> tuple[int, int]:
    """File position of character ``offset`` inside a scalar's value, where knowable."""
    line, col = node.start_mark.line, node.start_mark.column
    value = node.value if isinstance(node, ScalarNode) else ""
    style = getattr(node, "style", None)
    if style in (None, "'", '"') and node.end_mark.line == line:
        return line + 1, col + (0 if style is None else 1) + offset + 1
    if style == "|":
        row = value.count("\n", 0, offset)
        start = value.rfind("\n", 0, offset) + 1
        content = [ln for ln in lines[line + 1 :] if ln.strip()][:1]
        indent = len(content[0]) - len(content[0].lstrip(" ")) if content else 0
        return line + 2 + row, indent + (offset - start) + 1
    return line + 1, col + 1


def _has_threshold(condition: Condition) -> bool:
    """A number other than 0 or 1 in a condition is a threshold that needs a reason."""
    return any(
        isinstance(n, ast.Constant) and type(n.value) in (int, float) and n.value not in (0, 1)
        for n in ast.walk(condition.node)
    )


def _describe(node: Node) -> str:
    if isinstance(node, SequenceNode):
        return "a list"
    if isinstance(node, MappingNode):
        return "a mapping"
    kinds = {"null": "empty", "bool": "true/false", "int": "a number", "float": "a number"}
    return kinds.get(node.tag.rsplit(":", 1)[-1], f"tagged {node.tag}")


def suggest(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


_ErrFn = Callable[..., None]


def _text(name: str, node: Node, err: _ErrFn) -> str | None:
    if isinstance(node, ScalarNode) and node.tag == _STR:
        if not node.value.strip():
            err(node, f"'{name}' is empty")
        return str(node.value)
    err(node, f"'{name}' must be text, not {_describe(node)}; quote the value")
    return None


def _texts(name: str, node: Node, err: _ErrFn) -> list[tuple[str, Node]]:
    """A list of text items; a single item may be written without brackets."""
    out: list[tuple[str, Node]] = []
    for sub in node.value if isinstance(node, SequenceNode) else [node]:
        if isinstance(sub, ScalarNode) and sub.tag == _STR and sub.value.strip():
            out.append((sub.value.strip(), sub))
        else:
            err(sub, f"'{name}' must be a list of text items")
    return out


def references_of(node: Node, lines: list[str], err: _ErrFn) -> tuple[list[str], dict[str, Condition]]:
    """``references:``, a list whose items are a text (always shown) or a mapping
    ``{ref: text, when: condition}``: a source that applies to one variant of the finding
    only (the phrase a fact chose), shown when its condition holds for the facts. A sync
    finding whose reads were anomaly detection's listed the Trainer's docs, LBFGS's source
    and torch.distributions' switch, which belong to its other variants."""
    refs: list[str] = []
    when: dict[str, Condition] = {}
    for sub in node.value if isinstance(node, SequenceNode) else [node]:
        if isinstance(sub, ScalarNode) and sub.tag == _STR and sub.value.strip():
            refs.append(sub.value.strip())
            continue
        if not isinstance(sub, MappingNode):
            err(sub, "'references' must be a list of texts or {ref: text, when: condition} mappings")
            continue
        items = {k.value: v for k, v in sub.value if isinstance(k, ScalarNode)}
        ref, cond = items.get("ref"), items.get("when")
        if (set(items) - {"ref", "when"} or not isinstance(ref, ScalarNode) or ref.tag != _STR
                or not ref.value.strip() or not isinstance(cond, ScalarNode) or cond.tag != _STR):
            err(sub, "a conditional reference must be {ref: text, when: condition}")
            continue
        try:
            when[ref.value.strip()] = compile_condition(cond.value)
        except ConditionError as exc:
            err(cond, f"references: when: {exc.message}", at=_locate(cond, exc.offset, lines))
            continue
        refs.append(ref.value.strip())
    return refs, when


def phrases_of(node: Node, lines: list[str], err: _ErrFn) -> dict[str, dict[str, Template]]:
    """``phrases:``, a mapping of fact names to mappings of values to texts (templates): a
    rule's own, or the file's (top level), which every rule of the file has for the facts
    it gives no table of its own."""
    out: dict[str, dict[str, Template]] = {}
    if not isinstance(node, MappingNode):
        err(node, "'phrases' must map fact names to {value: text} mappings")
        return out
    for key, table in node.value:
        name = key.value if isinstance(key, ScalarNode) else None
        if name is None or not _FACT.match(name):
            err(key, f"'{name}' is not a fact name (letters, digits, '_', starting with a letter)")
            continue
        if not isinstance(table, MappingNode) or not table.value:
            err(table, f"phrases of '{name}' must be a mapping of values to texts")
            continue
        texts: dict[str, Template] = {}
        for value, phrase in table.value:
            if not (isinstance(value, ScalarNode) and isinstance(phrase, ScalarNode) and phrase.tag == _STR):
                err(phrase, f"each phrase of '{name}' must be text, keyed by the value it stands for")
                continue
            try:
                # a quoted phrase is taken as written (", 3 ms of it CPU work", "" for no words)
                quoted = phrase.style in ('"', "'")
                texts[str(value.value)] = compile_template(phrase.value if quoted else phrase.value.strip())
            except TemplateError as exc:
                err(phrase, f"phrases of '{name}': {exc.message}", at=_locate(phrase, exc.offset, lines))
        out[name] = texts
    return out


def build_rule(item: Node, path: Path | None, lines: list[str], errors: list[RuleError],
               shared: dict[str, dict[str, Template]] | None = None) -> Rule | None:
    """Validate one ``- id: ...`` mapping; None (with errors recorded) when unusable.
    ``shared``: the file's phrases (see :func:`phrases_of`)."""
    n_errors = len(errors)

    def err(node: Node, message: str, level: str = "error", at: tuple[int, int] | None = None) -> None:
        line, col = at or pos(node)
        errors.append(RuleError(path, line, col, message, level))

    if not isinstance(item, MappingNode):
        err(item, "each rule must be a mapping of keys (id:, title:, ...)")
        return None
    keys: dict[str, tuple[Node, Node]] = {}
    misspelt: set[str] = set()  # keys that an unknown key probably meant
    for key, value in item.value:
        if not (isinstance(key, ScalarNode) and key.tag == _STR):
            err(key, "keys must be plain names")
        elif key.value in keys:
            err(key, f"duplicate key '{key.value}'")
        elif key.value not in KNOWN_KEYS:
            misspelt.update(difflib.get_close_matches(key.value, KNOWN_KEYS, n=1, cutoff=0.6))
            err(key, f"unknown key '{key.value}'{suggest(key.value, KNOWN_KEYS)}")
        else:
            keys[key.value] = (key, value)
    node_of = {name: value for name, (_, value) in keys.items()}
    text = {n: _text(n, v, err) for n, v in node_of.items()
            if n not in _LIST_KEYS + ("enabled", "phrases", "references")}
    lists = {n: _texts(n, v, err) for n, v in node_of.items() if n in _LIST_KEYS}
    refs, ref_when = references_of(node_of["references"], lines, err) if "references" in node_of else ([], {})

    enabled = True
    if "enabled" in keys:
        node = node_of["enabled"]
        if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:bool":
            enabled = node.value.lower() in ("true", "yes", "on")
        else:
            err(node, "'enabled' must be true or false")
    rule_id = text.get("id")
    if rule_id is not None and not _ID.match(rule_id):
        err(node_of["id"], f"id '{rule_id}' must be kebab-case (e.g. dataloader-stall)")
    cause = (text.get("cause") or "").strip() or None
    if "cause" in keys and (cause is None or not _ID.match(cause)):
        err(node_of["cause"], f"cause '{cause or ''}' must be kebab-case (e.g. dataloader-stall)")
    # A disabled override needs only its id: it exists to switch a builtin rule off.
    missing = [k for k in (REQUIRED_KEYS if enabled else ("id",)) if k not in keys and k not in misspelt]
    if missing:
        label = f"rule '{rule_id}'" if rule_id else "rule"
        err(item, f"{label} is missing required key{'s' if len(missing) > 1 else ''} "
            + ", ".join(f"'{m}'" for m in missing))  # fmt: skip
    severity = text.get("severity")
    if severity is not None and severity not in SEVERITIES:
        err(node_of["severity"], f"severity '{severity}' must be one of "
            f"{', '.join(SEVERITIES)}{suggest(severity, SEVERITIES)}")  # fmt: skip
    for kind, node in lists.get("devices", []):
        if kind not in DEVICE_KINDS:
            err(node, f"unknown device '{kind}' (use {', '.join(DEVICE_KINDS)}){suggest(kind, DEVICE_KINDS)}")
    devices = frozenset(k for k, _ in lists["devices"]) if "devices" in lists else frozenset(DEVICE_KINDS)
    if not devices and isinstance(node_of.get("devices"), SequenceNode):
        err(node_of["devices"], "'devices' is empty: the rule would never apply")
    first_step = (text.get("first_step") or "").strip() or None
    named = [(first_step, node_of["first_step"])] if first_step else []
    for name, node in named + lists.get("requires", []):
        if not _FACT.match(name):
            err(node, f"'{name}' is not a fact name (letters, digits, '_', starting with a letter)")

    condition = None
    when = text.get("when")
    if when is not None and when.strip():
        try:
            condition = compile_condition(when)
        except ConditionError as exc:
            err(node_of["when"], f"when: {exc.message}", at=_locate(node_of["when"], exc.offset, lines))
        if condition is not None and "threshold_reason" not in keys and _has_threshold(condition):
            err(keys["when"][0], "numbers in 'when' without a 'threshold_reason'", "warning")
    templates: dict[str, Template] = {}
    for name in ("title", "evidence", "fix"):
        if text.get(name) is not None:
            try:
                templates[name] = compile_template(text[name])  # type: ignore[arg-type]
            except TemplateError as exc:
                at = _locate(node_of[name], exc.offset, lines)
                err(node_of[name], f"{name}: {exc.message}", at=at)
    phrases = {**(shared or {}), **(phrases_of(node_of["phrases"], lines, err) if "phrases" in node_of else {})}
    if rule_id is None or any(e.level == "error" for e in errors[n_errors:]):
        return None
    empty = Template("", ())
    return Rule(
        id=rule_id,
        title=(text.get("title") or "").strip() or rule_id,
        severity=severity or "info",
        when=when or "",
        evidence=text.get("evidence") or "",
        fix=text.get("fix") or "",
        devices=devices,
        threshold_reason=text.get("threshold_reason"),
        references=tuple(refs),
        reference_when=ref_when,
        first_step=first_step,
        requires=tuple(r for r, _ in lists.get("requires", [])),
        enabled=enabled,
        cause=cause,
        phrases=phrases,
        source=path,
        line=item.start_mark.line + 1,
        column=item.start_mark.column + 1,
        condition=condition if enabled else None,
        title_template=templates.get("title", empty),
        evidence_template=templates.get("evidence", empty),
        fix_template=templates.get("fix", empty),
    )
