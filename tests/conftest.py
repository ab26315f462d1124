"""Shared test setup: real torch on CPU, one thread (2-core machines oversubscribe)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
