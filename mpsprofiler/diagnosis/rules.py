"""Loader for the YAML rule files: files and folders in order, each file to a node tree.

Rules are data: a file is parsed into a YAML node tree (never constructed into Python
objects), every key is checked with its line (:mod:`.rule_check`), the condition is
compiled by the whitelist of :mod:`.conditions` and the templates by :mod:`.template`.
A broken file never raises out of the loader: its problems become :class:`RuleError`
entries with a path, line and column, and the good rules of other files (and of the same
file, when it parses) still load. The types (:class:`Rule`, :class:`RuleSet`,
:class:`RuleError`) live in :mod:`.rule_model` and are importable from here as before.
The format is documented for users in ``rules/README.md``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..resources import rules_dir
from ..rundir import open_regular, real_path
from .rule_check import build_rule, phrases_of, pos, suggest
from .rule_model import Rule as Rule  # re-exported: the types were defined here first
from .rule_model import RuleError as RuleError
from .rule_model import RuleSet as RuleSet

MAX_FILE_BYTES = 1 << 20
"""Larger files are refused unread: a hostile or generated file must not stall startup."""
MAX_NODES = 50_000
MAX_DEPTH = 32
RULE_SUFFIXES = (".yaml", ".yml")


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


_CHECKED_WAY: Any = object()
"""What :func:`_compose_fast` returns for text it leaves to the checked, pure-Python loader."""


def _compose_fast(text: str) -> Any:
    """The node tree of ``text`` from libyaml's composer (where PyYAML was built with it:
    ~6 ms for the 23 shipped rule files against ~85 ms, paid by every run's diagnosis),
    or ``_CHECKED_WAY``: for text the pure-Python reader would refuse (a control
    character), that libyaml cannot parse (every error message comes from the checked
    loader, with its line and column), that holds an alias, or that nests near
    ``MAX_DEPTH`` or holds over ``MAX_NODES`` nodes. libyaml's parser is a state machine,
    so its events are read first and those limits checked on them: its composer recurses
    in C, and a file nested thousands deep would overflow the stack (a crash, not an error).
    Both compose with the same resolver, so a file composes to the same nodes, marks
    included, either way."""
    fast = getattr(yaml, "CSafeLoader", None)
    if fast is None or yaml.reader.Reader.NON_PRINTABLE.search(text):
        return _CHECKED_WAY
    try:
        depth = nodes = 0
        for event in yaml.parse(text, Loader=fast):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                nodes += 1
                if depth >= MAX_DEPTH - 2:
                    return _CHECKED_WAY
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
            elif isinstance(event, yaml.AliasEvent):
                return _CHECKED_WAY
            if nodes > MAX_NODES:
                return _CHECKED_WAY
        return yaml.compose(text, Loader=fast)
    except Exception:
        return _CHECKED_WAY


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
        root = _compose_fast(text)
        if root is _CHECKED_WAY:
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
        err(*pos(root), "top level must be a mapping with a 'rules:' list")
        return []
    rules_node: Node | None = None
    phrases_node: Node | None = None
    for key, value in root.value:
        name = key.value if isinstance(key, ScalarNode) else None
        if name == "rules":
            rules_node = value
        elif name == "phrases":  # shared by the file's rules (rule_check.phrases_of)
            phrases_node = value
        else:
            err(*pos(key), f"unknown top-level key {name!r}{suggest(str(name), ['rules', 'phrases'])}")
    if rules_node is None:
        err(*pos(root), "missing top-level 'rules:' list")
        return []
    if not isinstance(rules_node, SequenceNode):
        err(*pos(rules_node), "'rules' must be a list of rules (each item starts with '- id:')")
        return []
    if not rules_node.value:
        err(*pos(rules_node), "'rules' is empty", "warning")
    lines = text.splitlines()

    def phrase_err(node: Node, message: str, level: str = "error", at: tuple[int, int] | None = None) -> None:
        err(*(at or pos(node)), message, level)

    shared = phrases_of(phrases_node, lines, phrase_err) if phrases_node is not None else {}
    rules = []
    for item in rules_node.value:
        rule = build_rule(item, path, lines, errors, shared)
        if rule is not None:
            rules.append(rule)
    return rules


