"""``mpsprof rules``: list the rules, validate rule files, show which rules fire on facts.

The command's arguments and its text output, apart from the loader (:mod:`.diagnosis.rules`)
and the engine (:mod:`.diagnosis.engine`) it drives: diagnosis stays free of printing, and
this module is the only one that renders a rule set for the terminal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .devices.kinds import DEVICE_KINDS
from .diagnosis import rules
from .diagnosis.engine import Diagnostic, evaluate
from .diagnosis.rules import Rule, RuleSet
from .rundir import read_regular

MAX_FACTS_BYTES = 16 << 20

__all__ = ["add_rules_arguments", "main_rules", "readable_title"]


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
    check.add_argument("--device", choices=DEVICE_KINDS,
                       help="with --facts: only rules for this device (default: all)")  # fmt: skip
    for p in (lister, check):  # a separate dest: a subparser would overwrite the parent's
        p.add_argument("--rules", dest="rules_dirs_sub", action="append", type=Path,
                       metavar="DIR", help=rules_help)  # fmt: skip


def main_rules(args: argparse.Namespace) -> int:
    """``mpsprof rules``: 0 when all rule files are valid, 1 on errors, 2 on bad input."""
    dirs = [*(getattr(args, "rules_dirs", None) or []), *(getattr(args, "rules_dirs_sub", None) or [])]
    if getattr(args, "rules_command", None) != "check":
        ruleset = rules.load_builtin_and_user(dirs)
        _print_listing(ruleset, rules.builtin_rules_dir())
        for problem in ruleset.errors:
            print(problem, file=sys.stderr)
        return 0 if ruleset.ok else 1
    files = list(getattr(args, "files", None) or [])
    ruleset = rules.load_rules([*files, *dirs] if files else [rules.builtin_rules_dir(), *dirs])
    for problem in ruleset.errors:
        print(problem)
    for warning in unknown_facts(ruleset):
        print(warning)
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


def unknown_facts(ruleset: RuleSet) -> list[str]:
    """``FILE:LINE:COL: warning:`` lines for names a rule reads that no analyzer provides:
    in its condition the rule can never fire, in a text (or a phrase table's name) the
    sentence never shows. A typo (``step_msx``) otherwise loads as a valid rule."""
    import difflib

    from .diagnosis.analyzers import ANALYZERS
    from .diagnosis.analyzers.registry import RESERVED_FACTS

    provided = set().union(*(a.provides for a in ANALYZERS)) | RESERVED_FACTS
    out = []
    for rule in ruleset:
        condition = set(rule.condition.names) if rule.condition else set()
        texts = {*rule.title_template.fields, *rule.evidence_template.fields, *rule.fix_template.fields,
                 *rule.requires, *([rule.first_step] if rule.first_step else [])}
        for table, phrases in (rule.phrases or {}).items():
            texts |= {table, *(f for t in phrases.values() for f in t.fields)}
        for name in sorted((condition | texts) - provided):
            close = difflib.get_close_matches(name, provided, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            effect = "the rule can never fire" if name in condition else "its text reads \"(not measured)\" there"
            out.append(f"{rule.source}:{rule.line}:{rule.column}: warning: rule '{rule.id}' reads '{name}', "
                       f"a fact no analyzer provides{hint}: {effect}")
    return out


def _print_listing(ruleset: RuleSet, builtin_dir: Path) -> None:
    """One block per rule, as wide as the terminal (at least 60 columns): the id, severity
    and devices on one line, the title below it with each fact a ``<placeholder>``."""
    width = max(60, min(120, shutil.get_terminal_size((80, 24)).columns))
    id_width = min(30, max((len(rule.id) for rule in ruleset), default=0))
    for rule in ruleset:
        src = rule.source
        builtin = src is not None and src.parent == builtin_dir
        origin = "" if builtin else f"  from {src}:{rule.line}"
        if rule.overrides:
            replaced = "a builtin rule" if rule.overrides.startswith(str(builtin_dir)) else rule.overrides
            origin += f" (replaces {replaced})"
        devices = ", ".join(k for k in DEVICE_KINDS if k in rule.devices)
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
        data = json.loads(read_regular(path, MAX_FACTS_BYTES))  # never a FIFO or a device
    except (OSError, ValueError, RecursionError) as exc:
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
