"""Diagnosis: analyzers turn a session into named facts; rules turn facts into findings.

Rules are data (top-level ``rules/``, plus the user's ``--rules`` folders) evaluated by
:mod:`.engine`; nothing here knows about any particular rule. :func:`diagnose` lives in
:mod:`.diagnose`; it is re-exported here because every caller asks the package for it.
"""

from __future__ import annotations

from .diagnose import PROVISIONAL_MIN_STEPS, Diagnosis, cached_ruleset, diagnose

__all__ = ["PROVISIONAL_MIN_STEPS", "Diagnosis", "cached_ruleset", "diagnose"]
