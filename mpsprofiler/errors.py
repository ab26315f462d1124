"""Errors every command shares, kept below the commands that raise them.

``UsageError`` lives here rather than in ``cli`` so that subcommand modules (``compare``,
``experiment``) can raise it without importing the CLI that imports them.
"""

from __future__ import annotations


class UsageError(Exception):
    """Bad command-line input: printed as ``mpsprof: error: ...`` with exit status 2."""
