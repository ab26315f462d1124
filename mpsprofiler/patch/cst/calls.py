"""Edits of one call's arguments: DataLoader keywords, ``set_num_threads(N)``.

Kept apart from the statement-level edits because the hard part here is layout: a new
argument must follow the call's own style (one per line, trailing comma, comments staying
on the line of the argument they follow), and an argument given by position or through
``**kwargs`` must be changed where it is, never duplicated (a TypeError).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from .nodes import NotFound, _code, _expr, _innermost, _parse, _replace, call_name

WIDTH = 100
"""Columns (the statement's indent included, a comment after the call not) past which a
call written on one line is wrapped one argument a line when a change lengthens it."""


def find_call(module: cst.Module, line: int, names: Sequence[str],
              keep: Callable[[cst.Call], bool] | None = None) -> cst.Call:
    """The innermost call of one of ``names`` spanning ``line`` (of those ``keep`` takes, where given)."""
    calls = _innermost(module, line, lambda n: isinstance(n, cst.Call) and call_name(n) in names
                       and (keep is None or keep(n)))
    if not calls:
        raise NotFound(f"no {'/'.join(names)}(...) call at line {line}")
    call = calls[0]
    assert isinstance(call, cst.Call)
    return call


def set_keywords(source: str, line: int, names: Sequence[str], changes: dict[str, str],
                 positional: Sequence[str] = (), keep: Callable[[cst.Call], bool] | None = None) -> str:
    """The call to ``names`` spanning ``line`` with the keyword ``changes`` (name -> source
    text of the value): an argument written is replaced in place (by keyword, or by position
    where ``positional``, the callee's positional parameters in order, says it is that one),
    a new one is appended in the call's own style (one per line when the call is written one
    per line), each comment staying on the line of the argument it follows. ``keep``: which
    of the calls at the line may be the one (:func:`find_call`)."""
    module = _parse(source)
    call = find_call(module, line, names, keep)
    args = list(call.args)
    plain = 0  # the leading arguments given by position (before any *args or keyword)
    while plain < len(args) and args[plain].keyword is None and not args[plain].star:
        plain += 1
    starred = next((a for a in args if a.star == "*"), None)
    written = {a.keyword.value for a in args if a.keyword is not None}
    for k in changes:
        if k not in positional or k in written:
            continue
        at = positional.index(k)
        if at < plain:  # ``DataLoader(ds, 16, True, None, None, 0)``: num_workers is the 6th
            args[at] = args[at].with_changes(value=_expr(changes[k]))
            written.add(k)
        elif starred is not None:
            raise NotFound(f"the {call_name(call)}(...) call at line {line} passes arguments through "
                           f"*{_code(starred.value)}, which may hold {k} already (a keyword would then be a "
                           "TypeError)")
    args = [a.with_changes(value=_expr(changes[a.keyword.value])) if a.keyword is not None
            and a.keyword.value in changes else a for a in args]
    spread = [i for i, a in enumerate(args) if a.star == "**"]
    if spread and set(changes) - written:
        # ``DataLoader(ds, **train_kwargs)`` (pytorch/examples mnist): the dict may hold the
        # argument already (an explicit keyword would then be a TypeError), so the values
        # are merged over it, where they win whatever it holds
        i = spread[-1]
        extra = ", ".join(f'"{k}": {v}' for k, v in changes.items() if k not in written)
        args[i] = args[i].with_changes(value=_expr("{**" + _code(args[i].value) + ", " + extra + "}"))
        return _replace(module, call, call.with_changes(args=args))
    new = [cst.Arg(value=_expr(changes[k]), keyword=cst.Name(k),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))
           for k in changes if k not in written]
    if new:
        args = _append(call, args, new)
    out = _replace(module, call, call.with_changes(args=args))
    if "\n" in _code(call):
        return out  # a call written over lines keeps its own layout (_append follows it)
    before = source.splitlines()[line - 1]
    tail = len(before) - before.find(_code(call)) - len(_code(call))  # `)  # a comment` after the call
    if len(out.splitlines()[line - 1]) - tail <= max(WIDTH, len(before) - tail):
        return out  # short enough, or no longer than the script wrote it
    return _replace(module, call, _one_per_line(call, args))


def _one_per_line(call: cst.Call, args: list[cst.Arg]) -> cst.Call:
    """A call written on one line that the change made too long (``num_workers=7 if split ==
    "train" else 0, persistent_workers=split == "train"`` appended to a DataLoader in a loop
    ran to 186 columns): one argument per line at one level deeper than the statement, a
    trailing comma and ``)`` on a line of its own, as black writes it and as the finding's
    fix shows a call past its width (source_edit.rewrite_call)."""
    def line_break(extra: str) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(), empty_lines=[], indent=True,
                                           last_line=cst.SimpleWhitespace(extra))

    empty = cst.SimpleWhitespace("")
    out = [a.with_changes(comma=cst.Comma(whitespace_after=line_break("    ")), whitespace_after_arg=empty)
           for a in args[:-1]]
    out.append(args[-1].with_changes(comma=cst.Comma(whitespace_after=line_break("")), whitespace_after_arg=empty))
    return call.with_changes(whitespace_before_args=line_break("    "), args=out)


def _append(call: cst.Call, args: list[cst.Arg], new: list[cst.Arg]) -> list[cst.Arg]:
    """``args`` with ``new`` after the last, in the call's style. The line break after the
    last argument (with its comment: ``batch_size=4,  # small``) stays after that argument;
    the new ones go on lines of their own at the arguments' indent, and the call's own
    ending (trailing comma, the line break before ``)``) moves after the last new one."""
    empty = cst.SimpleWhitespace("")
    if not args:
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        return [*(a.with_changes(comma=sep) for a in new[:-1]), new[-1]]
    last = args[-1]
    comma, after = last.comma, last.whitespace_after_arg
    before = comma.whitespace_before if isinstance(comma, cst.Comma) else empty
    brk = (comma.whitespace_after if isinstance(comma, cst.Comma)
           and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace) else after
           if isinstance(after, cst.ParenthesizedWhitespace) else None)
    if brk is None:  # the arguments end on one line: ", " between, the call's ending after the last
        sep = cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        out = [*args[:-1], last.with_changes(comma=sep.with_changes(whitespace_before=before),
                                              whitespace_after_arg=empty)]
        out += [a.with_changes(comma=sep) for a in new[:-1]]
        return [*out, new[-1].with_changes(comma=comma, whitespace_after_arg=after)]
    indent = _arguments_indent(call, args, brk)

    def line_break(first: cst.TrailingWhitespace) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(first_line=first, empty_lines=[], indent=indent.indent,
                                           last_line=indent.last_line)

    head = cst.Comma(whitespace_before=before, whitespace_after=cst.ParenthesizedWhitespace(
        first_line=brk.first_line, empty_lines=brk.empty_lines, indent=indent.indent, last_line=indent.last_line))
    closing = cst.ParenthesizedWhitespace(first_line=cst.TrailingWhitespace(newline=brk.first_line.newline),
                                          empty_lines=[], indent=brk.indent, last_line=brk.last_line)
    out = [*args[:-1], last.with_changes(comma=head, whitespace_after_arg=empty if brk is after else after)]
    out += [a.with_changes(comma=cst.Comma(whitespace_after=line_break(cst.TrailingWhitespace()))) for a in new[:-1]]
    if isinstance(comma, cst.Comma):  # a trailing comma written: kept, the line break after it
        return [*out, new[-1].with_changes(comma=cst.Comma(whitespace_after=closing))]
    return [*out, new[-1].with_changes(whitespace_after_arg=closing)]


def _arguments_indent(call: cst.Call, args: list[cst.Arg], brk: cst.ParenthesizedWhitespace
                      ) -> cst.ParenthesizedWhitespace:
    """Where the call's arguments start their lines: after ``(`` or an earlier argument's
    line break, else one level (4 spaces) deeper than the closing ``)``."""
    found: list[cst.BaseParenthesizableWhitespace] = [call.whitespace_before_args]
    for a in args[:-1]:
        found += [a.comma.whitespace_after if isinstance(a.comma, cst.Comma) else a.whitespace_after_arg,
                  a.whitespace_after_arg]
    for ws in reversed(found):
        if isinstance(ws, cst.ParenthesizedWhitespace):
            return ws
    return brk.with_changes(last_line=cst.SimpleWhitespace(brk.last_line.value + "    "))


def set_first_argument(source: str, line: int, names: Sequence[str], value: str) -> str:
    """``set_num_threads(16)`` -> ``set_num_threads(N)``: the call's first argument replaced."""
    module = _parse(source)
    call = find_call(module, line, names)
    if not call.args or call.args[0].star:
        raise NotFound(f"the {call_name(call)}(...) call at line {line} has no plain first argument")
    args = [call.args[0].with_changes(value=_expr(value)), *call.args[1:]]
    return _replace(module, call, call.with_changes(args=args))
