"""Evaluation of rules over facts: the condition language, ``evaluate`` and the CLI.

Conditions are parsed once when a rule loads (``compile_condition``), checked against a
whitelist of syntax, and evaluated with ``simpleeval`` over the flat facts dict. Whatever
a condition does at run time (a missing fact, ``None > 0.1``, a division by zero) it
counts as "not matched" and, when asked, is reported as a :class:`Diagnostic`; nothing
escapes into the training run or the TUI.
"""

from __future__ import annotations

import argparse
import ast
import functools
import json
import operator as op
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simpleeval import EvalWithCompoundTypes, NameNotDefined, NumberTooHigh, safe_add, safe_mult

try:  # Python's re cannot be interrupted: a backtracking regex could hang the run
    import regex as _regex
except ImportError:  # pragma: no cover - a dependency; without it matches() is refused
    _regex = None

from .findings import Finding, FindingTracker, as_step, sort_findings

__all__ = [
    "FUNCTIONS", "Condition", "ConditionError", "Diagnostic", "FindingTracker",
    "add_rules_arguments", "compile_condition", "evaluate", "main_rules",
]  # fmt: skip

if TYPE_CHECKING:
    from .rules import Rule, RuleSet

MAX_CONDITION_CHARS = 2000
MAX_MATCH_TEXT = 4096
"""``matches`` looks at this many characters of the text: bounds regex backtracking."""
MAX_REGEX_CHARS = 500
MATCH_TIMEOUT = 0.05
"""Seconds one ``matches`` may take (the ``regex`` module stops itself; it may overrun a
few times on a loaded machine). Sane patterns take microseconds on MAX_MATCH_TEXT
characters; one that runs out (``(a+)+$``: catastrophic backtracking) breaks its rule."""


class RuleBroken(Exception):
    """A rule that cannot be evaluated safely: it is switched off and reported."""
_MAX_POWER_BITS = 4096

# --------------------------------------------------------------------------- functions


def _contains(container: Any, item: Any) -> bool:
    if container is None:
        raise TypeError("contains(): the container is None")
    return item in container


def _startswith(text: Any, prefix: Any) -> bool:
    if not isinstance(text, str):
        raise TypeError(f"startswith(): expected text, got {type(text).__name__}")
    if isinstance(prefix, (list, tuple)):
        prefix = tuple(str(p) for p in prefix)
    elif not isinstance(prefix, str):
        raise TypeError(f"startswith(): expected a prefix string, got {type(prefix).__name__}")
    return text.startswith(prefix)


def _matches(pattern: Any, text: Any) -> bool:
    if not isinstance(pattern, str) or not isinstance(text, str):
        raise TypeError("matches(): expected (regex, text) strings")
    if _regex is None:
        raise RuleBroken("matches() needs the 'regex' package (pip install regex)")
    text = text[:MAX_MATCH_TEXT]
    try:
        return _compiled(pattern).search(text, timeout=MATCH_TIMEOUT) is not None
    except TimeoutError:
        raise RuleBroken(f"matches({pattern!r}, ...) ran out of time ({MATCH_TIMEOUT:g} s) on {len(text)} characters: "
                         "the regex backtracks catastrophically (nested repeats like (a+)+); rule switched off") from None


@functools.lru_cache(maxsize=256)
def _compiled(pattern: str) -> Any:
    return _regex.compile(pattern)  # type: ignore[union-attr]


def _round(value: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int) or abs(ndigits) > 20:
        raise ValueError("round(): ndigits must be an integer within -20..20")
    return round(value, ndigits)


def _power(a: Any, b: Any) -> Any:
    """``**`` that refuses results with more than a few thousand bits (``9**9**9``)."""
    if isinstance(a, int) and isinstance(b, int) and b > 1 and abs(a) > 1:
        if b * abs(a).bit_length() > _MAX_POWER_BITS:
            raise NumberTooHigh(f"{a} ** {b} is too large")
    return a**b


def _mod(a: Any, b: Any) -> Any:
    """Numbers only: ``"%999999999d" % x`` would build a huge string."""
    if isinstance(a, str) or isinstance(b, str):
        raise TypeError("'%' works on numbers only")
    return a % b


FUNCTIONS: dict[str, Any] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "any": any,
    "all": all,
    "round": _round,
    "contains": _contains,
    "startswith": _startswith,
    "matches": _matches,
}
_ARITY: dict[str, tuple[int, int]] = {
    "len": (1, 1), "min": (1, 64), "max": (1, 64), "abs": (1, 1), "any": (1, 1),
    "all": (1, 1), "round": (1, 2), "contains": (2, 2), "startswith": (2, 2), "matches": (2, 2),
}  # fmt: skip

OPERATORS: dict[type, Any] = {
    ast.Add: safe_add, ast.Sub: op.sub, ast.Mult: safe_mult, ast.Div: op.truediv,
    ast.FloorDiv: op.floordiv, ast.Mod: _mod, ast.Pow: _power,
    ast.Not: op.not_, ast.USub: op.neg, ast.UAdd: op.pos,
    ast.Eq: op.eq, ast.NotEq: op.ne, ast.Gt: op.gt, ast.Lt: op.lt, ast.GtE: op.ge, ast.LtE: op.le,
    ast.In: lambda x, y: op.contains(y, x), ast.NotIn: lambda x, y: not op.contains(y, x),
    ast.Is: lambda x, y: x is y, ast.IsNot: lambda x, y: x is not y,
}  # fmt: skip

_ALLOWED_NODES: tuple[type, ...] = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.BinOp, ast.UnaryOp, ast.Compare,
    ast.IfExp, ast.Call, ast.Name, ast.Load, ast.Constant, ast.List, ast.Tuple, ast.Set,
    ast.Subscript, ast.Slice, *OPERATORS,
)  # fmt: skip
_REFUSED: dict[type, str] = {
    ast.Attribute: "attribute access is not allowed (use startswith(), contains(), matches())",
    ast.Lambda: "lambdas are not allowed",
    ast.ListComp: "comprehensions are not allowed (use any()/all() over a list fact)",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed (use any()/all() over a list fact)",
    ast.NamedExpr: "assignment (:=) is not allowed",
    ast.JoinedStr: "f-strings are not allowed",
    ast.Dict: "dict literals are not allowed",
    ast.Starred: "* unpacking is not allowed",
}

# --------------------------------------------------------------------------- compiling


class ConditionError(ValueError):
    """A condition that cannot be used; ``offset`` is the character index of the problem."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True)
class Condition:
    """A checked, parsed condition; ``names`` are the facts it reads."""

    source: str
    node: ast.expr
    names: tuple[str, ...]


def compile_condition(text: str) -> Condition:
    """Parse and whitelist-check a ``when`` expression once, at load time."""
    if len(text) > MAX_CONDITION_CHARS:
        raise ConditionError(f"condition longer than {MAX_CONDITION_CHARS} characters")
    # YAML block scalars keep newlines; a condition is one expression, so newlines are
    # plain spaces. Replacing char-for-char keeps offsets valid for error positions.
    flat = text.replace("\r", " ").replace("\n", " ")
    body = flat.lstrip()
    lead = len(flat) - len(body)
    if not body.strip():
        raise ConditionError("empty condition")
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as exc:
        offset = (exc.offset or 0) - 1 if exc.offset else len(body.rstrip())
        raise ConditionError(f"syntax error: {exc.msg}", lead + max(offset, 0)) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ConditionError(f"cannot parse condition: {exc}", lead) from None
    names: dict[str, None] = {}
    called: set[int] = set()
    for node in ast.walk(tree):
        where = lead + _char_offset(body, getattr(node, "col_offset", 0))
        if not isinstance(node, _ALLOWED_NODES):
            why = _REFUSED.get(type(node), f"{type(node).__name__} is not allowed in a condition")
            raise ConditionError(why, where)
        if isinstance(node, ast.Call):
            _check_call(node, where)
            called.add(id(node.func))
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (str, int, float, bool, type(None))):
                raise ConditionError(f"{type(node.value).__name__} literals are not allowed", where)
            if isinstance(node.value, str) and len(node.value) > 1000:
                raise ConditionError("string literal longer than 1000 characters", where)
        elif isinstance(node, ast.Name) and id(node) not in called:
            if node.id.startswith("_"):
                raise ConditionError(f"name '{node.id}' may not start with '_'", where)
            if node.id in FUNCTIONS:
                raise ConditionError(f"'{node.id}' is a function; call it: {node.id}(...)", where)
            names.setdefault(node.id)
    return Condition(text, tree.body, tuple(names))


def _check_call(node: ast.Call, where: int) -> None:
    if not isinstance(node.func, ast.Name):
        why = _REFUSED.get(type(node.func), "only the listed functions may be called")
        raise ConditionError(why, where)
    name = node.func.id
    if name.startswith("_"):
        raise ConditionError(f"name '{name}' may not start with '_'", where)
    if name not in FUNCTIONS:
        allowed = ", ".join(sorted(FUNCTIONS))
        raise ConditionError(f"unknown function '{name}' (allowed: {allowed})", where)
    if node.keywords:
        raise ConditionError(f"{name}(): keyword arguments are not allowed", where)
    low, high = _ARITY[name]
    if not low <= len(node.args) <= high:
        raise ConditionError(f"{name}() takes {low}..{high} arguments, got {len(node.args)}", where)
    if name == "matches":
        pattern = node.args[0]
        if not (isinstance(pattern, ast.Constant) and isinstance(pattern.value, str)):
            raise ConditionError("matches(): the regex must be a quoted string", where)
        if len(pattern.value) > MAX_REGEX_CHARS:
            raise ConditionError(f"matches(): regex longer than {MAX_REGEX_CHARS} characters", where)
        try:
            (_regex or re).compile(pattern.value)
        except (re.error, getattr(_regex, "error", re.error)) as exc:
            raise ConditionError(f"matches(): bad regex: {exc}", where) from None


def _char_offset(text: str, byte_offset: int) -> int:
    """ast gives UTF-8 byte offsets; error positions are characters."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


# --------------------------------------------------------------------------- evaluating


@dataclass(frozen=True)
class Diagnostic:
    """Why a rule did not fire although it applied: shown by ``rules check --facts``.

    ``kind`` is ``skipped`` (a fact in ``requires`` is absent), ``missing`` (the
    condition names an absent fact), ``type-error`` (e.g. ``None > 0.1``) or ``error``.
    """

    rule: str
    kind: str
    message: str


def _evaluator(facts: Mapping[str, Any]) -> EvalWithCompoundTypes:
    ev = EvalWithCompoundTypes(operators=OPERATORS, functions=dict(FUNCTIONS), names=facts)
    ev.allowed_attrs = {}  # belt and braces: the loader already refuses attribute access
    return ev


def normalize_device(device_kind: str | None) -> str | None:
    """``"mps:0"`` / ``"CUDA"`` -> ``"mps"`` / ``"cuda"``; None means every device."""
    if device_kind is None:
        return None
    return str(device_kind).split(":", 1)[0].strip().lower()


def evaluate(
    ruleset: RuleSet | Iterable[Rule],
    facts: Mapping[str, Any],
    device_kind: str | None,
    *,
    diagnostics: list[Diagnostic] | None = None,
) -> list[Finding]:
    """Rules that apply to ``device_kind`` and fire on ``facts``, most severe first.

    ``device_kind=None`` evaluates every rule regardless of its ``devices``. Never raises.
    """
    kind = normalize_device(device_kind)
    ev = _evaluator(facts)
    found: list[Finding] = []
    for rule in ruleset:
        if not rule.enabled or rule.condition is None or rule.broken:
            continue
        if kind is not None and kind not in rule.devices:
            continue
        finding = _evaluate_rule(rule, ev, facts, diagnostics)
        if finding is not None:
            found.append(finding)
    return sort_findings(found)


def _evaluate_rule(
    rule: Rule, ev: EvalWithCompoundTypes, facts: Mapping[str, Any], diags: list[Diagnostic] | None
) -> Finding | None:
    for name in rule.requires:
        if facts.get(name) is None:
            if diags is not None:
                diags.append(Diagnostic(rule.id, "skipped", f"required fact '{name}' is absent"))
            return None
    assert rule.condition is not None
    try:
        matched = bool(ev.eval(rule.condition.source, previously_parsed=rule.condition.node))
    except NameNotDefined as exc:
        if diags is not None:
            diags.append(Diagnostic(rule.id, "missing", f"fact '{exc.name}' is absent"))
        return None
    except RuleBroken as exc:  # switched off for the rest of the run; diagnose() reports it
        rule.broken = str(exc)
        if diags is not None:
            diags.append(Diagnostic(rule.id, "error", str(exc)))
        return None
    except TypeError as exc:
        if diags is not None:
            diags.append(Diagnostic(rule.id, "type-error", str(exc)))
        return None
    except Exception as exc:  # a rule must never break the run
        if diags is not None:
            diags.append(Diagnostic(rule.id, "error", f"{type(exc).__name__}: {exc}"))
        return None
    if not matched:
        return None
    used = {n: _copy(facts[n]) for n in rule.fact_names if n in facts}
    return Finding(
        rule=rule.id,
        severity=rule.severity,
        title=rule.title_template.render(facts),
        evidence=rule.evidence_template.render(facts),
        fix=rule.fix_template.render(facts),
        first_step=as_step(facts.get(rule.first_step)) if rule.first_step else None,
        references=list(rule.references),
        facts=used,
    )


def _copy(value: Any) -> Any:
    """Findings outlive the facts dict, which the analyzers may keep mutating."""
    return list(value) if isinstance(value, (list, tuple, set)) else value


# --------------------------------------------------------------------------- CLI


def add_rules_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``mpsprof rules``: list (default) and ``check FILE... [--facts F]``."""
    rules_help = "also load rule files from DIR (repeatable); a rule with a builtin's id replaces it"
    parser.add_argument("--rules", dest="rules_dirs", action="append", type=Path, metavar="DIR",
                        help=rules_help)  # fmt: skip
    sub = parser.add_subparsers(dest="rules_command", metavar="{list,check}")
    lister = sub.add_parser("list", help="list the rules (the default)")
    check = sub.add_parser("check", help="validate rule files; optionally evaluate them")
    check.add_argument("files", nargs="*", type=Path, metavar="FILE",
                       help="rule files or directories (default: the builtin rules)")  # fmt: skip
    check.add_argument("--facts", type=Path, metavar="JSON",
                       help="a JSON object of facts: also show which rules fire on it")  # fmt: skip
    check.add_argument("--device", choices=("mps", "cuda", "cpu"),
                       help="with --facts: only rules for this device (default: all)")  # fmt: skip
    for p in (lister, check):  # a separate dest: a subparser would overwrite the parent's
        p.add_argument("--rules", dest="rules_dirs_sub", action="append", type=Path,
                       metavar="DIR", help=rules_help)  # fmt: skip


def main_rules(args: argparse.Namespace) -> int:
    """``mpsprof rules``: 0 when all rule files are valid, 1 on errors, 2 on bad input."""
    from .rules import builtin_rules_dir, load_builtin_and_user, load_rules

    dirs = [*(getattr(args, "rules_dirs", None) or []), *(getattr(args, "rules_dirs_sub", None) or [])]
    if getattr(args, "rules_command", None) != "check":
        ruleset = load_builtin_and_user(dirs)
        _print_listing(ruleset, builtin_rules_dir())
        for problem in ruleset.errors:
            print(problem, file=sys.stderr)
        return 0 if ruleset.ok else 1
    files = list(getattr(args, "files", None) or [])
    ruleset = load_rules([*files, *dirs] if files else [builtin_rules_dir(), *dirs])
    for problem in ruleset.errors:
        print(problem)
    errors = sum(1 for e in ruleset.errors if e.level == "error")
    if errors:
        print(f"{errors} error{'s' if errors != 1 else ''}; {len(ruleset)} rules loaded")
    else:
        print(f"ok: {len(ruleset)} rules")
    facts_path = getattr(args, "facts", None)
    if facts_path is not None:
        facts = _read_facts(Path(facts_path))
        if facts is None:
            return 2
        _print_evaluation(ruleset, facts, getattr(args, "device", None))
    return 1 if errors else 0


def _print_listing(ruleset: RuleSet, builtin_dir: Path) -> None:
    """One block per rule, as wide as the terminal (at least 60 columns): the id, severity
    and devices on one line, the title below it with each fact a ``<placeholder>``."""
    import shutil
    import textwrap

    width = max(60, min(120, shutil.get_terminal_size((80, 24)).columns))
    id_width = min(30, max((len(rule.id) for rule in ruleset), default=0))
    for rule in ruleset:
        src = rule.source
        builtin = src is not None and src.parent == builtin_dir
        origin = "" if builtin else f"  from {src}:{rule.line}"
        if rule.overrides:
            replaced = "a builtin rule" if rule.overrides.startswith(str(builtin_dir)) else rule.overrides
            origin += f" (replaces {replaced})"
        devices = ", ".join(k for k in ("mps", "cuda", "cpu") if k in rule.devices)
        severity = rule.severity if rule.enabled else "disabled"
        print(f"{rule.id.ljust(id_width)}  {severity:<9} {devices}{origin}")
        print(textwrap.fill(readable_title(rule), width, initial_indent="    ", subsequent_indent="    "))
    print(f"{len(ruleset)} rules (builtin ones in {builtin_dir}); `mpsprof rules check FILE` validates a rule file")


def readable_title(rule: Rule) -> str:
    """A rule's title with ``<fact name>`` where the finding fills in a figure."""
    pieces = rule.title_template.pieces
    if not pieces:
        return rule.title.strip()
    return "".join(p if isinstance(p, str) else f"<{p.name.replace('_', ' ')}>" for p in pieces).strip()


def _read_facts(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"{path}: cannot read facts: {exc}", file=sys.stderr)
        return None
    if isinstance(data, dict) and isinstance(data.get("facts"), dict):
        data = data["facts"]  # a summary.json-like wrapper
    if not isinstance(data, dict):
        print(f"{path}: facts must be a JSON object of name: value", file=sys.stderr)
        return None
    return data


def _print_evaluation(ruleset: RuleSet, facts: Mapping[str, Any], device: str | None) -> None:
    diagnostics: list[Diagnostic] = []
    findings = evaluate(ruleset, facts, device, diagnostics=diagnostics)
    for f in findings:
        print(f"fires: {f.rule} [{f.severity}] {f.title}")
        print(f"    {f.evidence.strip()}")
    for d in diagnostics:
        print(f"not evaluated: {d.rule}: {d.kind}: {d.message}")
    print(f"{len(findings)} of {len(ruleset)} rules fire")


def broken_rules(ruleset: RuleSet | Iterable[Rule]) -> list[Any]:
    """Rule errors for the rules switched off while being evaluated (see :class:`RuleBroken`)."""
    from .rules import RuleError

    return [RuleError(rule.source, rule.line, rule.column, f"rule '{rule.id}': {rule.broken}")
            for rule in ruleset if rule.broken]
