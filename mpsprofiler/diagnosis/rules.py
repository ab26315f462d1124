"""Rule model, loader and validator for the YAML rule files.

Rules are data: a file is parsed into a YAML node tree (never constructed into Python
objects), every key is checked with its line, the condition is compiled by the
whitelist of :mod:`.conditions` and the templates by :mod:`.template`. A broken file never raises out of the
loader: its problems become :class:`RuleError` entries with a path, line and column,
and the good rules of other files (and of the same file, when it parses) still load.
The format is documented for users in ``rules/README.md``.
"""

from __future__ import annotations

import ast
import difflib
import errno
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..devices.kinds import DEVICE_KINDS
from ..resources import rules_dir
from ..rundir import open_regular, real_path
from .conditions import Condition, ConditionError, compile_condition
from .findings import SEVERITIES
from .template import Template, TemplateError, compile_template

MAX_FILE_BYTES = 1 << 20
"""Larger files are refused unread: a hostile or generated file must not stall startup."""
MAX_NODES = 50_000
MAX_DEPTH = 32
RULE_SUFFIXES = (".yaml", ".yml")

REQUIRED_KEYS = ("id", "title", "severity", "when", "evidence", "fix")
OPTIONAL_KEYS = ("devices", "threshold_reason", "references", "first_step", "requires", "enabled", "cause", "phrases")
KNOWN_KEYS = REQUIRED_KEYS + OPTIONAL_KEYS
_LIST_KEYS = ("devices", "references", "requires")
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
_FACT = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_STR = "tag:yaml.org,2002:str"


@dataclass(frozen=True)
class RuleError:
    """A problem in a rule file. ``level`` is ``error`` (the rule or file did not load),
    ``warning`` (it loaded, but look again) or ``note`` (e.g. a rule overridden by id)."""

    path: Path | None
    line: int
    column: int
    message: str
    level: str = "error"

    def __str__(self) -> str:
        prefix = "" if self.level == "error" else f"{self.level}: "
        return f"{self.path or '<rules>'}:{self.line}:{self.column}: {prefix}{self.message}"


@dataclass
class Rule:
    """One loaded, validated rule with its condition and templates compiled."""

    id: str
    title: str
    severity: str
    when: str
    evidence: str
    fix: str
    devices: frozenset[str] = frozenset(DEVICE_KINDS)
    threshold_reason: str | None = None
    references: tuple[str, ...] = ()
    first_step: str | None = None
    requires: tuple[str, ...] = ()
    enabled: bool = True
    phrases: dict[str, dict[str, Template]] = field(default_factory=dict)
    """``phrases: {fact: {value: text}}``: a fact whose value is a name (an enum the analyzer
    chose) is written in the texts as the rule's own words for that value, so the advice is
    in the rule file, not in Python. A value the table lacks counts as a missing fact."""
    cause: str | None = None
    """Rules naming the same cause are degrees of one problem: only the most severe of them
    that fires is shown (see :func:`~mpsprofiler.diagnosis.findings.one_per_cause`)."""
    source: Path | None = None
    line: int = 0
    column: int = 1
    overrides: str | None = None  # "path:line" of the rule this one replaced
    broken: str | None = None
    """Why evaluating the rule failed for good (a regex out of time): it is skipped."""
    condition: Condition | None = field(default=None, repr=False)
    title_template: Template = field(default=Template("", ()), repr=False)
    evidence_template: Template = field(default=Template("", ()), repr=False)
    fix_template: Template = field(default=Template("", ()), repr=False)

    @property
    def fact_names(self) -> tuple[str, ...]:
        """Facts a finding reports: those of the condition, title and evidence."""
        names: dict[str, None] = {}
        for group in (
            self.condition.names if self.condition else (),
            self.title_template.fields,
            self.evidence_template.fields,
        ):
            for name in group:
                names.setdefault(name)
        return tuple(names)


@dataclass
class RuleSet:
    """Rules by id in load order (later files override earlier ones) plus load problems."""

    rules: list[Rule] = field(default_factory=list)
    errors: list[RuleError] = field(default_factory=list)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    def __len__(self) -> int:
        return len(self.rules)

    def get(self, rule_id: str) -> Rule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    @property
    def ok(self) -> bool:
        """True when no file had an error (warnings and notes do not count)."""
        return not any(e.level == "error" for e in self.errors)

    def add_all(self, rules: Iterable[Rule]) -> None:
        """Add rules in order; an id defined twice in one file is an error (first kept)."""
        index = {r.id: i for i, r in enumerate(self.rules)}
        for rule in rules:
            i = index.get(rule.id)
            if i is None:
                index[rule.id] = len(self.rules)
                self.rules.append(rule)
                continue
            old = self.rules[i]
            if old.source == rule.source:
                self.errors.append(
                    RuleError(rule.source, rule.line, rule.column, f"duplicate rule id '{rule.id}' "
                              f"(first defined at line {old.line}); this one is ignored")
                )  # fmt: skip
                continue
            rule.overrides = f"{old.source}:{old.line}"
            self.rules[i] = rule
            self.errors.append(
                RuleError(rule.source, rule.line, rule.column,
                          f"rule '{rule.id}' overrides the one at {rule.overrides}", "note")
            )  # fmt: skip

    def extend(self, other: RuleSet) -> None:
        self.errors.extend(other.errors)
        self.add_all(other.rules)


# --------------------------------------------------------------------------- loading


def builtin_rules_dir() -> Path:
    """The packaged rules: ``mpsprofiler/_rules`` in a wheel, else the repo's ``rules/``."""
    return rules_dir()


def rule_files(directory: Path) -> list[Path]:
    """Rule files of a directory (not recursive), sorted by name; hidden files skipped."""
    try:
        entries = sorted(directory.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    return [p for p in entries if p.suffix in RULE_SUFFIXES and not p.name.startswith(".")
            and p.is_file()]  # fmt: skip


def load_rules(paths: Iterable[Path]) -> RuleSet:
    """Load rule files and directories in order; never raises."""
    ruleset = RuleSet()
    seen: set[Path] = set()  # the same file named twice (e.g. --rules rules/) loads once
    for path in paths:
        path = Path(path)
        try:
            if path.is_dir():
                os.listdir(path)  # a folder that cannot be read is said below, not skipped silently
            for file in rule_files(path) if path.is_dir() else [path]:
                key = real_path(file)
                if key not in seen:
                    seen.add(key)
                    ruleset.extend(load_file(file))
        except Exception as exc:  # noqa: BLE001 - one broken path must not cost the others (the builtins)
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else f"{type(exc).__name__}: {exc}"
            ruleset.errors.append(RuleError(path, 1, 1, f"cannot load: {why}"))
    return ruleset


def load_builtin_and_user(user_dirs: Iterable[Path] = ()) -> RuleSet:
    """Builtin rules, then each user directory (or file): a user rule replaces a builtin
    rule with the same id."""
    return load_rules([builtin_rules_dir(), *user_dirs])


def check_file(path: Path) -> list[RuleError]:
    """All problems of one rule file (errors, warnings and notes); empty when clean."""
    return load_file(Path(path)).errors


def load_file(path: Path) -> RuleSet:
    """Load one rule file; never raises."""
    ruleset = RuleSet()
    try:  # the one guarded opener: regular files only (a FIFO or a device is never read)
        with open_regular(path) as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        ruleset.errors.append(RuleError(path, 1, 1, "no such file"))
        return ruleset
    except OSError as exc:
        why = "a symbolic link loop" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
        ruleset.errors.append(RuleError(path, 1, 1, f"cannot read: {why}"))
        return ruleset
    rules, errors = parse_rules_text(data, path)
    ruleset.errors.extend(errors)
    ruleset.add_all(rules)
    return ruleset


def parse_rules_text(data: bytes | str, path: Path | None = None) -> tuple[list[Rule], list[RuleError]]:
    """Parse and validate the contents of one rule file; never raises."""
    errors: list[RuleError] = []
    try:
        rules = _parse(data, path, errors)
    except Exception as exc:  # last resort: the loader must not take a training run down
        errors.append(RuleError(path, 1, 1, f"internal error while loading: {type(exc).__name__}: {exc}"))
        rules = []
    errors.sort(key=lambda e: (e.line, e.column))
    return rules, errors


class _Loader(yaml.SafeLoader):
    """Composes nodes only, and refuses aliases and absurd sizes (billion laughs)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._count = 0
        self._depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
        if isinstance(event, yaml.AliasEvent):
            mark: Any = event.start_mark  # the stubs' Mark union: this pure-Python loader makes yaml.error.Mark
            raise ComposerError(None, None, "YAML aliases (*name) are not allowed in rule files", mark)
        self._count += 1
        if self._count > MAX_NODES:
            raise ComposerError(None, None, f"more than {MAX_NODES} YAML nodes", event.start_mark)
        if self._depth >= MAX_DEPTH:
            raise ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _parse(data: bytes | str, path: Path | None, errors: list[RuleError]) -> list[Rule]:
    def err(line: int, col: int, message: str, level: str = "error") -> None:
        errors.append(RuleError(path, line, col, message, level))

    if len(data) > MAX_FILE_BYTES:
        err(1, 1, f"file larger than {MAX_FILE_BYTES // 1024} KiB; not loaded")
        return []
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            head = data[: exc.start]
            line = head.count(b"\n") + 1
            col = exc.start - (head.rfind(b"\n") + 1) + 1
            err(line, col, f"not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8")
            return []
    else:
        text = data
    if not text.strip():
        err(1, 1, "empty file: expected a mapping with a 'rules:' list")
        return []
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # the reader already refuses control characters here
        root = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = str(exc.problem or exc.context or "YAML error")
        ctx = exc.context_mark
        if exc.context and ctx is not None and mark is not None and ctx.line != mark.line:
            message += f" ({exc.context} at line {ctx.line + 1}, column {ctx.column + 1})"
        err(mark.line + 1 if mark else 1, mark.column + 1 if mark else 1, f"YAML: {message}")
        return []
    except yaml.reader.ReaderError as exc:
        before = text[: exc.position]
        err(before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1,
            f"YAML: unacceptable character #x{exc.character:04x}" if isinstance(exc.character, int)
            else f"YAML: {exc.reason}")  # fmt: skip
        return []
    except (yaml.YAMLError, RecursionError) as exc:
        err(1, 1, f"YAML: {exc}")
        return []
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        err(1, 1, "empty file: expected a mapping with a 'rules:' list")
        return []
    if not isinstance(root, MappingNode):
        err(*_pos(root), "top level must be a mapping with a 'rules:' list")
        return []
    rules_node: Node | None = None
    for key, value in root.value:
        name = key.value if isinstance(key, ScalarNode) else None
        if name == "rules":
            rules_node = value
        else:
            err(*_pos(key), f"unknown top-level key {name!r}{_suggest(str(name), ['rules'])}")
    if rules_node is None:
        err(*_pos(root), "missing top-level 'rules:' list")
        return []
    if not isinstance(rules_node, SequenceNode):
        err(*_pos(rules_node), "'rules' must be a list of rules (each item starts with '- id:')")
        return []
    if not rules_node.value:
        err(*_pos(rules_node), "'rules' is empty", "warning")
    lines = text.splitlines()
    rules = []
    for item in rules_node.value:
        rule = _build_rule(item, path, lines, errors)
        if rule is not None:
            rules.append(rule)
    return rules


def _pos(node: Node) -> tuple[int, int]:
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


def _suggest(word: str, choices: Iterable[str]) -> str:
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


def _phrases(node: Node, lines: list[str], err: _ErrFn) -> dict[str, dict[str, Template]]:
    """``phrases:``, a mapping of fact names to mappings of values to texts (templates)."""
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
            if not (isinstance(value, ScalarNode) and isinstance(phrase, ScalarNode) and phrase.tag == _STR
                    and phrase.value.strip()):
                err(phrase, f"each phrase of '{name}' must be text, keyed by the value it stands for")
                continue
            try:
                texts[str(value.value)] = compile_template(phrase.value.strip())
            except TemplateError as exc:
                err(phrase, f"phrases of '{name}': {exc.message}", at=_locate(phrase, exc.offset, lines))
        out[name] = texts
    return out


def _build_rule(item: Node, path: Path | None, lines: list[str], errors: list[RuleError]) -> Rule | None:
    """Validate one ``- id: ...`` mapping; None (with errors recorded) when unusable."""
    n_errors = len(errors)

    def err(node: Node, message: str, level: str = "error", at: tuple[int, int] | None = None) -> None:
        line, col = at or _pos(node)
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
            err(key, f"unknown key '{key.value}'{_suggest(key.value, KNOWN_KEYS)}")
        else:
            keys[key.value] = (key, value)
    node_of = {name: value for name, (_, value) in keys.items()}
    text = {n: _text(n, v, err) for n, v in node_of.items() if n not in _LIST_KEYS + ("enabled", "phrases")}
    lists = {n: _texts(n, v, err) for n, v in node_of.items() if n in _LIST_KEYS}

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
            f"{', '.join(SEVERITIES)}{_suggest(severity, SEVERITIES)}")  # fmt: skip
    for kind, node in lists.get("devices", []):
        if kind not in DEVICE_KINDS:
            err(node, f"unknown device '{kind}' (use {', '.join(DEVICE_KINDS)}){_suggest(kind, DEVICE_KINDS)}")
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
    phrases = _phrases(node_of["phrases"], lines, err) if "phrases" in node_of else {}
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
        references=tuple(r for r, _ in lists.get("references", [])),
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
