"""Backend-specific kernels, and the ops a Mac runs for the same call.

A CPU or CUDA run records the kernel its backend selected (oneDNN's ``mkldnn_rnn_layer``
for ``nn.LSTM``, cuDNN attention for ``F.scaled_dot_product_attention``). Those kernels
have no MPS entry in ``native_functions.yaml``, yet a Mac never runs them: the user's call
dispatches to an MPS kernel there. Judging the kernel instead of the call would predict a
fallback for nearly every LSTM and transformer, so predictions first map such kernels back
through the explicit table in ``rules/data/mps_backend_kernels.yaml``.

Only the standard library and PyYAML are imported: the probe and the diagnosis both use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..resources import rules_data_file

BACKENDS_NAME = "mps_backend_kernels.yaml"

BACKEND_SPECIFIC = re.compile(
    r"mkldnn|onednn|cudnn|miopen|_for_cpu|flash_attention|efficient_attention|"
    r"cudnn_attention|_fused_(adam|adamw|sgd|adagrad)_$|_thnn_fused|_native_multi_head"
)
"""Names of kernels one backend picks for a call (cuDNN, oneDNN, MIOpen, fused attention
or optimizers). A new torch release adds such kernels before the table has a row for them:
one without a row is not judged by its own entry (it would predict a CPU fallback for a
call a Mac runs on its GPU), it is unknown."""


def looks_backend_specific(op: str) -> bool:
    """Whether ``op``'s name is that of a backend-specific kernel (see BACKEND_SPECIFIC)."""
    return BACKEND_SPECIFIC.search(base_name(op)) is not None


@dataclass(frozen=True)
class BackendRow:
    """One row of the table: kernels of one backend for one user-level call."""

    row: str
    backend: str
    kernels: tuple[str, ...]
    called_as: str
    mps_runs: tuple[str, ...]
    note: str = ""
    source: str = ""


@dataclass(frozen=True)
class BackendTable:
    rows: tuple[BackendRow, ...]
    not_calls: frozenset[str]
    path: str = ""
    reviewed_through: str = ""
    """The newest torch release whose backend-specific kernels the table was checked against."""

    def row_for(self, op: str) -> BackendRow | None:
        """The row of a kernel, by its name without namespace and overload."""
        base = base_name(op)
        for row in self.rows:
            if base in row.kernels:
                return row
        return None


def base_name(op: str) -> str:
    """``aten::_flash_attention_forward.quantized`` -> ``_flash_attention_forward``."""
    text = op.split("::", 1)[-1]
    if text.startswith("aten."):
        text = text[5:]
    return text.split(".", 1)[0]


def backends_path() -> Path | None:
    return rules_data_file(BACKENDS_NAME)


def _strings(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list) else []
    return tuple(str(x).strip() for x in items if isinstance(x, str) and x.strip())


def load_backend_table(path: Path | None = None) -> BackendTable:
    """The table; empty (every kernel judged by the yaml alone) if the file is missing or bad."""
    path = path or backends_path()
    if path is None:
        return BackendTable((), frozenset())
    try:
        import yaml

        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except Exception:
        return BackendTable((), frozenset())
    if not isinstance(data, dict):
        return BackendTable((), frozenset())
    rows = []
    for item in data.get("rows") or []:
        if not isinstance(item, dict):
            continue
        kernels, runs = _strings(item.get("kernels")), _strings(item.get("mps_runs"))
        name = str(item.get("row") or "").strip()
        if not (name and kernels and runs):
            continue
        rows.append(BackendRow(name, str(item.get("backend") or ""), tuple(base_name(k) for k in kernels),
                               str(item.get("called_as") or ""), runs, str(item.get("note") or ""),
                               str(item.get("source") or "")))  # fmt: skip
    return BackendTable(tuple(rows), frozenset(_strings(data.get("not_calls"))), str(path),
                        str(data.get("reviewed_through") or ""))
