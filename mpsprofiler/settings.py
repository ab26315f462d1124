"""``--set NAME=VALUE``: the few changes mpsprof can make to a run without editing the script.

A fix a finding proposes is usually one argument of a DataLoader, one environment
variable or one call: mpsprof applies it from outside, for one run, so the user can see
what it does before touching the code. The names are few on purpose; each is checked
here, in the parent, so a typo is a usage error before anything runs.

=====================================  =========================================================
``dataloader.num_workers=N``           every DataLoader the script creates (N >= 0)
``dataloader.persistent_workers=B``    true / false
``dataloader.prefetch_factor=N``       batches queued per worker (N >= 1)
``dataloader.pin_memory=B``            true / false
``dataloader.ID.NAME=VALUE``           one DataLoader only: ID is its creation order (1 = first)
``env.NAME=VALUE``                     PYTORCH_MPS_HIGH_WATERMARK_RATIO, PYTORCH_MPS_LOW_WATERMARK_RATIO,
                                       PYTORCH_ENABLE_MPS_FALLBACK, OMP_NUM_THREADS
``torch.num_threads=N``                ``torch.set_num_threads(N)`` once torch is imported (wins
                                       over the script's own calls)
``memory.empty_cache_every=N``         ``empty_cache()`` on the training device every N steps
``torch.detect_anomaly=false``         autograd's anomaly detection kept off (the script's
                                       ``set_detect_anomaly(True)`` is passed on as off)
=====================================  =========================================================

The parsed form is plain JSON (it travels to the probe in ``MPSPROF_OPTIONS``)::

    {"dataloader": {"*": {"num_workers": 4}, "2": {"pin_memory": false}},
     "env": {"OMP_NUM_THREADS": "2"}, "torch": {"num_threads": 2}, "memory": {"empty_cache_every": 10}}
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from .devices.mps_rules import DECIMAL, HIGH, HIGH_WATERMARK_UPPER_BOUND, LOW, paired_low, validate_env

LOADER_FIELDS = ("num_workers", "persistent_workers", "prefetch_factor", "pin_memory")
ENV_NAMES = (
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO",
    "PYTORCH_MPS_LOW_WATERMARK_RATIO",
    "PYTORCH_ENABLE_MPS_FALLBACK",
    "OMP_NUM_THREADS",
)
WATERMARK_MAX = HIGH_WATERMARK_UPPER_BOUND
"""The MPS allocator accepts watermark ratios from 0 to 2 (0 switches the limit off):
``default_high_watermark_upper_bound`` (aten/src/ATen/mps/MPSAllocator.h), checked by
``setHighWatermarkRatio`` in MPSAllocator.mm."""

HELP = (
    "change the run without editing the script (repeatable): dataloader.num_workers=N, "
    "dataloader.persistent_workers=true, dataloader.prefetch_factor=N, dataloader.pin_memory=false "
    "(dataloader.ID.NAME for one loader, ID = creation order), env.OMP_NUM_THREADS=N, "
    "env.PYTORCH_MPS_HIGH_WATERMARK_RATIO=R, env.PYTORCH_MPS_LOW_WATERMARK_RATIO=R, "
    "env.PYTORCH_ENABLE_MPS_FALLBACK=1, torch.num_threads=N, torch.detect_anomaly=false, "
    "memory.empty_cache_every=N"
)


class SettingError(ValueError):
    """An unknown name or a bad value in ``--set``: a usage error."""


def _int_at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise SettingError(f"expected a whole number, got {text!r}") from None
        if value < low:
            raise SettingError(f"must be at least {low}, got {value}")
        return value

    return parse


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise SettingError(f"expected true or false, got {text!r}")


def _off(text: str, name: str) -> bool:
    """``false`` only: mpsprof can keep a debugging mode off, never turn one on for a run."""
    if _bool(text):
        raise SettingError(f"{name} can only be false (mpsprof keeps the mode off; the script turns it on)")
    return False


def _ratio(text: str) -> str:
    """A plain decimal number only: torch reads the variable with C's ``strtod``, which
    stops at the first character it cannot take (``0_1`` reads as 0, no limit, where
    Python's ``float`` reads 1.0), so anything else would not be the ratio it looks like."""
    if re.fullmatch(DECIMAL, text.strip()) is None:
        raise SettingError(f"expected a number such as 1.0, got {text!r}")
    value = float(text.strip())
    if not 0.0 <= value <= WATERMARK_MAX:
        raise SettingError(f"must be between 0 and {WATERMARK_MAX:g} (0 switches the limit off), got {text}")
    return text.strip()


def _flag(text: str) -> str:
    if text.strip() not in ("0", "1"):
        raise SettingError(f"expected 0 or 1, got {text!r}")
    return text.strip()


_LOADER_PARSERS: dict[str, Callable[[str], Any]] = {
    "num_workers": _int_at_least(0),
    "persistent_workers": _bool,
    "prefetch_factor": _int_at_least(1),
    "pin_memory": _bool,
}
_ENV_PARSERS: dict[str, Callable[[str], str]] = {
    "PYTORCH_MPS_HIGH_WATERMARK_RATIO": _ratio,
    "PYTORCH_MPS_LOW_WATERMARK_RATIO": _ratio,
    "PYTORCH_ENABLE_MPS_FALLBACK": _flag,
    "OMP_NUM_THREADS": lambda text: str(_int_at_least(1)(text)),
}
_OTHER_PARSERS: dict[tuple[str, str], Callable[[str], Any]] = {
    ("torch", "num_threads"): _int_at_least(1),
    ("torch", "detect_anomaly"): lambda text: _off(text, "torch.detect_anomaly"),
    ("memory", "empty_cache_every"): _int_at_least(1),
}


def parse_settings(items: list[str], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``["dataloader.num_workers=4", ...]`` -> the JSON form above; raises SettingError.

    ``environ`` (default: this process's) is what the run inherits besides: the launcher
    puts the settings' variables over it (launcher/child.py), so a ratio pair is checked
    as the run will have it."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise SettingError(f"--set {item!r}: expected NAME=VALUE (e.g. dataloader.num_workers=4)")
        try:
            _add(out, name, value)
        except SettingError as exc:
            raise SettingError(f"--set {name}: {exc}") from None
    _pair_watermarks(out.get("env") or {}, os.environ if environ is None else environ)
    return out


WATERMARK_WHY = "torch refuses a low watermark ratio above the high one"
AUTO_LOW_NOTE = f"added by mpsprof: {WATERMARK_WHY}"
"""How reports mark the low ratio :func:`parse_settings` adds to a high one given alone."""
REPLACED_LOW_NOTE = "replaced by mpsprof, your shell had {shell}: " + WATERMARK_WHY
"""The same, where the shell had a low ratio of its own (``{shell}``) that the run did not get."""
SHELL_NOTE = "your shell had {shell}"
"""A variable ``--set`` gave that the shell had set to another value."""


def shell_replaced(settings: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The shell's values of the variables the run gets another value of from ``--set``
    (asked, or the low ratio :func:`parse_settings` paired): a report must not call a
    value "added" where it took the place of the user's own."""
    inherited = os.environ if environ is None else environ
    env = settings.get("env") or {}
    return {name: inherited[name] for name, value in env.items() if name in inherited and inherited[name] != value}


def _pair_watermarks(env: dict[str, str], inherited: Mapping[str, str]) -> None:
    """Never a run torch refuses: a high ratio given alone gets a low one where the low
    ratio it would run with (the shell's, else torch's default) is above it.

    torch checks low <= high when the MPS allocator starts (``setLowWatermarkRatio`` in
    aten/src/ATen/mps/MPSAllocator.mm) and the default low ratio is 1.4 on unified memory.
    The machine's memory kind is unknown here, so assume unified (the stricter default).
    The pair is checked with the shell's value of the variable not given."""
    if HIGH not in env and LOW not in env:
        return
    high = env.get(HIGH)
    if high is not None and LOW not in env:
        shell = {LOW: inherited[LOW]} if LOW in inherited else {}
        low = f"{paired_low(float(high)):g}"
        if validate_env({HIGH: high, **shell}, unified=True) is not None and validate_env({HIGH: high, LOW: low}) is None:
            env[LOW] = low
    merged = {name: inherited[name] for name in (HIGH, LOW) if name in inherited}
    merged.update({name: env[name] for name in (HIGH, LOW) if name in env})
    error = validate_env(merged, unified=True)
    if error is not None:
        said = " and ".join(f"{name}={merged[name]}" + ("" if name in env else " (from your shell)")
                            for name in (HIGH, LOW) if name in merged)  # fmt: skip
        raise SettingError(f"{said}: torch refuses it at MPS start (`{error}`): the low ratio must be between 0 "
                           "and the high one (2.0 when the high one is 0)")


def _add(out: dict[str, Any], name: str, value: str) -> None:
    parts = name.split(".")
    group = parts[0]
    if group == "dataloader":
        if len(parts) == 2:
            loader, field = "*", parts[1]
        elif len(parts) == 3 and parts[1].isdigit() and int(parts[1]) >= 1:
            loader, field = str(int(parts[1])), parts[2]
        else:
            raise SettingError("expected dataloader.NAME or dataloader.ID.NAME (ID = 1 for the first loader)")
        parser = _LOADER_PARSERS.get(field)
        if parser is None:
            raise SettingError(f"unknown DataLoader setting {field!r}; known: {', '.join(LOADER_FIELDS)}")
        out.setdefault("dataloader", {}).setdefault(loader, {})[field] = parser(value)
        return
    if group == "env" and len(parts) == 2:
        env_parser = _ENV_PARSERS.get(parts[1])
        if env_parser is None:
            raise SettingError(f"mpsprof sets only these variables: {', '.join(ENV_NAMES)} "
                               "(set others in your shell)")
        out.setdefault("env", {})[parts[1]] = env_parser(value)
        return
    other = _OTHER_PARSERS.get((group, parts[1])) if len(parts) == 2 else None
    if other is None:
        raise SettingError("unknown name; known: dataloader.num_workers, dataloader.persistent_workers, "
                           "dataloader.prefetch_factor, dataloader.pin_memory, env.NAME, torch.num_threads, "
                           "torch.detect_anomaly, memory.empty_cache_every")
    out.setdefault(group, {})[parts[1]] = other(value)


def describe(settings: dict[str, Any]) -> list[str]:
    """The settings as the user would write them (``dataloader.num_workers=4``), for reports."""
    lines: list[str] = []
    # construction numbers in their order (4, 6, 8, 10; not 10, 4, 6, 8 as strings sort)
    for loader, fields in sorted((settings.get("dataloader") or {}).items(),
                                 key=lambda kv: (kv[0] != "*", int(kv[0]) if kv[0].isdigit() else 0, kv[0])):
        prefix = "dataloader." if loader == "*" else f"dataloader.{loader}."
        for field, value in fields.items():
            lines.append(f"{prefix}{field}={_text(value)}")
    for name, value in (settings.get("env") or {}).items():
        lines.append(f"env.{name}={value}")
    for group in ("torch", "memory"):
        for name, value in (settings.get(group) or {}).items():
            lines.append(f"{group}.{name}={_text(value)}")
    return lines


def label(settings: dict[str, Any], loader: str | None = None) -> str:
    """The change as try and the TUI title it: ``num_workers=4`` for every DataLoader,
    ``num_workers=4 (DataLoader 2)`` for one (the creation order ``--set dataloader.2.*`` uses),
    ``num_workers=4 (DataLoaders 1, 3, 5)`` for one built anew every epoch,
    the other settings as written (``env.OMP_NUM_THREADS=1``). ``loader``: the name the
    user knows the one loader changed by (``DataLoader 1`` for the script's first, whose
    construction number also counts a framework's copies; ``the Trainer's evaluation
    DataLoader``), said instead of its construction numbers."""
    parts: list[str | tuple[str, list[str]]] = []  # a loader's fields together: "a=1, b=2 (DataLoader 2)"
    loaders: dict[str, list[str]] = {}
    for line in describe(settings):
        if line.startswith("dataloader."):
            rest = line[len("dataloader."):]
            number, _, field = rest.partition(".")
            if number.isdigit() and field:
                if number not in loaders:
                    loaders[number] = []
                    parts.append((number, loaders[number]))
                loaders[number].append(field)
                continue
            line = rest
        parts.append(line)
    # the same change to several constructions (a loader built anew every epoch): said once
    merged: list[str | tuple[list[str], list[str]]] = []
    for p in parts:
        last = merged[-1] if merged else None
        if not isinstance(p, str) and isinstance(last, tuple) and last[1] == p[1]:
            last[0].append(p[0])
        else:
            merged.append(p if isinstance(p, str) else ([p[0]], p[1]))
    named = loader if loader and sum(not isinstance(p, str) for p in merged) == 1 else None
    return ", ".join(p if isinstance(p, str) else
                     f"{', '.join(p[1])} ({named})" if named else
                     f"{', '.join(p[1])} (DataLoader{'s' if len(p[0]) > 1 else ''} {', '.join(p[0])})" for p in merged)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def merge(*settings: dict[str, Any]) -> dict[str, Any]:
    """Later settings win, field by field (a candidate on top of the user's ``--set``)."""
    out: dict[str, Any] = {}
    for s in settings:
        for group, body in s.items():
            if group == "dataloader":
                loaders = out.setdefault("dataloader", {})
                for loader, fields in body.items():
                    loaders.setdefault(loader, {}).update(fields)
            else:
                out.setdefault(group, {}).update(body)
    return out
