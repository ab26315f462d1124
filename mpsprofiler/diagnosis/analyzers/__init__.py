"""Builtin analyzers; importing this package registers them (see ``..facts``)."""

from __future__ import annotations
