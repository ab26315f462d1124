"""A size bound for rule-file regexes, checked before they are compiled.

The ``regex`` module (which ``matches()`` uses, for its match timeout) unrolls counted
repeats when it compiles: ``(?:(?:a{1000}){1000}){1000}`` is 31 characters and a
billion-node program (23 GB, killed by the kernel). A timeout cannot stop that: it
applies to matching, and compiling runs in C without checking one. So the pattern's
*expanded size* is bounded first: the number of atoms it would hold with every counted
repeat written out, nested repeats multiplying. That is a pure, linear scan of at most
``MAX_REGEX_CHARS`` characters, so it costs microseconds and cannot itself be attacked;
a pattern within the bound compiles in milliseconds (10,000 atoms: about 3 ms, 3 MB),
which bounds compile time and memory together. (The alternative, compiling in a
subprocess under an RLIMIT_AS, costs a process per rule file and does not exist on
every platform.)

The scan over-counts rather than under-counts: a brace or a character class it cannot
read is taken as one atom or as a repeat, so it errs on the side of refusing.
"""

from __future__ import annotations

import re

MAX_EXPANSION = 10_000
"""Atoms a rule regex may expand to. Real patterns are tens (``\\d{1,3}`` is 3)."""

_COUNT = re.compile(r"\{(\d{0,9})(?:,(\d{0,9}))?\}")
_GROUP_PREFIX = re.compile(r"\((?:\?(?:P?<\w*>|<[=!]|[=!:>|]|[a-zA-Z]*(?:-[a-zA-Z]*)?:?))?")
"""``(`` with what may follow it before the group's content (``?:``, ``?P<name>``, ``?<=``, ``?i:``)."""
_BRACED_ESCAPES = frozenset("pPNxgkuU")
"""Escapes that may take a ``{...}`` argument (``\\p{L}``, ``\\x{263a}``, ``\\g{name}``)."""


class RegexTooLarge(ValueError):
    """The pattern would compile to more than :data:`MAX_EXPANSION` atoms."""


def expansion(pattern: str) -> int:
    """The number of atoms ``pattern`` holds with every counted repeat unrolled (an upper
    bound; ``*``, ``+`` and ``?`` are loops, not copies, and count once)."""
    frames: list[list[int]] = [[0, 0]]  # per open group: [total of finished items, weight of the last atom]
    i, n = 0, len(pattern)

    def atom(weight: int) -> None:
        top = frames[-1]
        top[0] += top[1]
        top[1] = weight

    while i < n:
        c = pattern[i]
        if c == "\\":
            j = i + 2
            if i + 1 < n and pattern[i + 1] in _BRACED_ESCAPES and j < n and pattern[j] == "{":
                close = pattern.find("}", j)
                j = n if close < 0 else close + 1
            atom(1)
            i = j
        elif c == "[":
            i = _class_end(pattern, i)
            atom(1)
        elif c == "(":
            frames.append([0, 0])
            m = _GROUP_PREFIX.match(pattern, i)
            i = m.end() if m else i + 1
        elif c == ")":
            if len(frames) > 1:
                total, last = frames.pop()
                atom(max(1, total + last))
            else:
                atom(1)
            i += 1
        elif c == "|":
            top = frames[-1]
            top[0] += top[1]
            top[1] = 0
            i += 1
        elif c == "{" and (m := _COUNT.match(pattern, i)) and (m.group(1) or m.group(2)):
            low = int(m.group(1) or 0)
            high = int(m.group(2)) if m.group(2) else low
            frames[-1][1] *= max(1, low, high)
            i = m.end()
        elif c in "*+?":
            i += 1
        else:
            atom(1)
            i += 1
    return sum(done + last for done, last in frames)  # an unclosed group (refused anyway) still counts


def _class_end(pattern: str, start: int) -> int:
    """The index after the ``]`` closing the character class opened at ``start``."""
    i, n = start + 1, len(pattern)
    if i < n and pattern[i] == "^":
        i += 1
    if i < n and pattern[i] == "]":
        i += 1
    depth = 1
    while i < n:
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            if pattern.startswith("[:", i):
                close = pattern.find(":]", i + 2)
                if close >= 0:
                    i = close + 2
                    continue
            depth += 1  # a nested set (regex's V1 syntax)
        elif c == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return n


def check_regex(pattern: str) -> None:
    """Raise :class:`RegexTooLarge` if ``pattern`` would compile to too large a program."""
    size = expansion(pattern)
    if size > MAX_EXPANSION:
        raise RegexTooLarge(f"the regex expands to {size:,} atoms when compiled (its counted repeats "
                            f"multiply; at most {MAX_EXPANSION:,}): write fewer or smaller {{n}} repeats")
