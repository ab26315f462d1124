"""Secrets in a script's command line never reach a recording or a report.

``train.py --api-key sk-123 --wandb-token=abc`` runs with its real argv, but what mpsprof
records (``events.jsonl``, ``summary.json``) and shows (TUI, Markdown command block made
for pasting into issues, HTML, JSON) carries ``--api-key *** --wandb-token=***``.

An argument is secret when its name contains one of :data:`SECRET_WORDS`: ``--NAME VALUE``,
``--NAME=VALUE``, ``-NAME VALUE`` and ``NAME=VALUE`` (Hydra / key=value configs) forms; the
password of a URL (``https://user:pw@host``) too. Redacting a harmless value by mistake
costs a little information; leaking a token costs much more, so the match is broad.

Used at the source (the launcher writes the ``run`` event, the probe scrubs exception
and warning texts) and again when a recording is read, for recordings made before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "pwd", "auth", "credential", "cookie",
                "session_id", "private")
_SECRET_NAME = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
_KEY_VALUE = re.compile(r"^(-{0,2}[A-Za-z_][\w.\-]*)=(.*)$", re.DOTALL)
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][\w+.\-]*://[^/\s:@]*:)(?P<pw>[^/\s@]+)(?=@)")


def is_secret_name(name: str) -> bool:
    """``--api-key``, ``--hf_token``, ``db.password``: a name whose value must not be shown."""
    return bool(_SECRET_NAME.search(name.lstrip("-")))


def redact_argv(argv: Any) -> Any:
    """argv with secret values replaced by ``***``; anything but a list is returned as is."""
    if not isinstance(argv, list):
        return argv
    out: list[Any] = []
    mask_next = False
    for arg in argv:
        if not isinstance(arg, str):
            out.append(arg)
            mask_next = False
            continue
        if mask_next and not arg.startswith("--"):
            out.append(MASK)
            mask_next = False
            continue
        mask_next = False
        match = _KEY_VALUE.match(arg)
        if match and is_secret_name(match.group(1)):
            out.append(f"{match.group(1)}={MASK}")
            continue
        if arg.startswith("-") and len(arg) > 1 and is_secret_name(arg):
            mask_next = True
        out.append(redact_text(arg))
    return out


def redact_text(text: str) -> str:
    """The password of any URL in ``text`` masked."""
    if "://" not in text:
        return text
    return _URL_PASSWORD.sub(lambda m: m.group("head") + MASK, text)


def secret_values(argv: Iterable[Any]) -> list[str]:
    """The values :func:`redact_argv` masks (longest first), to scrub them from other texts
    (an exception message that quotes an argument). Very short values are left out: masking
    every ``1`` in a message would say nothing and hide much."""
    argv = list(argv)
    masked = redact_argv(argv)
    values: set[str] = set()
    for original, shown in zip(argv, masked, strict=True):
        if not isinstance(original, str) or original == shown:
            continue
        value = original.split("=", 1)[1] if shown.endswith("=" + MASK) and "=" in original else original
        if shown != MASK and not shown.endswith("=" + MASK):
            value = _url_password(original) or ""
        if len(value) >= 4:
            values.add(value)
    return sorted(values, key=len, reverse=True)


def _url_password(text: str) -> str | None:
    match = _URL_PASSWORD.search(text)
    return match.group("pw") if match else None


def scrub(text: str, values: list[str]) -> str:
    """``text`` with every secret value masked."""
    for value in values:
        if value in text:
            text = text.replace(value, MASK)
    return redact_text(text)


def redact_env(variables: Any) -> Any:
    """Recorded environment variables (``PYTORCH_*`` ...) with the value of each one whose
    name says token, key, password ... masked; anything but a dict is returned as is."""
    if not isinstance(variables, dict):
        return variables
    return {k: (MASK if isinstance(k, str) and is_secret_name(k) else v) for k, v in variables.items()}


TEXT_KINDS = frozenset({"exception", "warning", "probe_error"})
"""Event kinds carrying the script's own texts, which may quote its arguments."""


def scrub_fields(value: Any, values: list[str]) -> Any:
    """Every string inside ``value`` (dicts, lists) scrubbed of the secret ``values``."""
    if isinstance(value, str):
        return scrub(value, values)
    if isinstance(value, dict):
        return {k: scrub_fields(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_fields(v, values) for v in value]
    return value


class StreamScrubber:
    """:func:`scrub` for a byte stream that arrives in arbitrary chunks (the script's
    output in TUI mode, on its way to ``output.log`` and the Log panel): a secret cut in
    two by a read is still masked, because the end of a chunk that could begin one is
    held back until the next chunk (or :meth:`flush`). A URL's password is masked within
    a chunk."""

    def __init__(self, values: Iterable[str]) -> None:
        self._values = sorted({v.encode("utf-8", "surrogateescape") for v in values if v}, key=len, reverse=True)
        self._carry = b""

    def feed(self, data: bytes) -> bytes:
        buf = self._carry + data
        for value in self._values:
            if value in buf:
                buf = buf.replace(value, MASK.encode())
        keep = 0
        for value in self._values:
            for n in range(min(len(value) - 1, len(buf)), keep, -1):
                if buf.endswith(value[:n]):
                    keep = n
                    break
        self._carry = buf[len(buf) - keep:] if keep else b""
        return _mask_urls(buf[: len(buf) - keep])

    def flush(self) -> bytes:
        """What was held back (the stream ended)."""
        rest, self._carry = self._carry, b""
        return _mask_urls(rest)


def _mask_urls(data: bytes) -> bytes:
    if b"://" not in data:
        return data
    return redact_text(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
