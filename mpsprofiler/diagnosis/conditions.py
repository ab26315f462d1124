"""The condition language of rule files: parsing, whitelist checks and safe evaluation.

A rule's ``when`` is one Python-like expression over facts. It is parsed once when a rule
loads (``compile_condition``), checked against a whitelist of syntax and functions, and
evaluated with ``simpleeval`` (``evaluator``) over the flat facts dict. Its own module
because both the loader (:mod:`.rules`, which compiles) and the engine (:mod:`.engine`,
which evaluates) need it, and neither should import the other for it.
"""

from __future__ import annotations

import ast
import functools
import operator as op
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from simpleeval import EvalWithCompoundTypes, NumberTooHigh, safe_add, safe_mult

from .regex_bounds import RegexTooLarge, check_regex

_regex: ModuleType | None
try:  # Python's re cannot be interrupted: a backtracking regex could hang the run
    import regex as _regex
except ImportError:  # pragma: no cover - a dependency; without it matches() is refused
    _regex = None

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
    try:
        check_regex(pattern)  # a condition the loader did not check must not compile unbounded either
    except RegexTooLarge as exc:
        raise RuleBroken(f"matches(): {exc}") from None
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
    node: ast.expr = field(repr=False, compare=False)  # parsed from ``source``: an object per parse
    names: tuple[str, ...] = ()


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
            check_regex(pattern.value)  # bounded before compiling: the compiler unrolls {n}
            (_regex or re).compile(pattern.value)
        except RegexTooLarge as exc:
            raise ConditionError(f"matches(): {exc}", where) from None
        except (re.error, getattr(_regex, "error", re.error)) as exc:
            raise ConditionError(f"matches(): bad regex: {exc}", where) from None


def _char_offset(text: str, byte_offset: int) -> int:
    """ast gives UTF-8 byte offsets; error positions are characters."""
    return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore"))


def evaluator(facts: Mapping[str, Any]) -> EvalWithCompoundTypes:
    """A simpleeval evaluator over ``facts`` with only this language's operators and functions."""
    ev = EvalWithCompoundTypes(operators=OPERATORS, functions=dict(FUNCTIONS), names=facts)
    ev.allowed_attrs = {}  # belt and braces: the loader already refuses attribute access
    return ev
