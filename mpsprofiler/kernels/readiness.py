"""Which ATen ops have an MPS kernel, answered on any machine.

Every torch wheel ships ``torchgen/packaged/ATen/native/native_functions.yaml``: its
``dispatch:`` entries say which backends have a kernel. That lets a Linux or CUDA run say
what *would* fall back to the CPU on a Mac, where the authoritative check
(``torch._C._dispatch_has_kernel_for_dispatch_key(op, "MPS")``) is not available.

Statuses:

* ``"mps"``: an MPS kernel exists (directly, or through ``structured_delegate``);
* ``"portable"``: composite (decomposed into other ops, or CompositeExplicitAutograd that
  runs on any backend): it runs wherever its pieces run;
* ``"cpu_fallback"``: backend kernels exist, none for MPS: on a Mac it runs on the CPU
  (``PYTORCH_ENABLE_MPS_FALLBACK=1``) or raises ``NotImplementedError``;
* ``"unknown"``: not an op of the file (custom ops, other namespaces).

The yaml takes ~0.1-0.3 s to parse with libyaml, so the derived table is cached on disk
per torch version; overrides for ops registered outside the yaml live in the rules folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..resources import rules_data_file
from .backends import BACKENDS_NAME, BackendRow, BackendTable, base_name, load_backend_table, looks_backend_specific

MPS = "mps"
PORTABLE = "portable"
CPU_FALLBACK = "cpu_fallback"
UNKNOWN = "unknown"
STATUSES = (MPS, PORTABLE, CPU_FALLBACK, UNKNOWN)

CACHE_FORMAT = 2
"""Bumped when the classification changes, so stale caches are not trusted."""
OVERRIDES_NAME = "mps_ops_overrides.yaml"
COMPOSITE_KEYS = frozenset(
    {
        "CompositeImplicitAutograd",
        "CompositeExplicitAutograd",
        "CompositeExplicitAutogradNonFunctional",
    }
)
_YAML_PARTS = ("packaged", "ATen", "native", "native_functions.yaml")


# --------------------------------------------------------------------------- names


def normalize_op(name: str) -> str:
    """``aten::add.Tensor`` / ``aten.add.Tensor`` / ``add.Tensor`` -> ``add.Tensor``;
    ``.default`` (torch's name of the overload-less form) is dropped."""
    text = name.strip()
    if "::" in text:
        namespace, text = text.split("::", 1)
        if namespace != "aten":
            return f"{namespace}::{text}"
    elif text.startswith("aten."):
        text = text[5:]
    text = text.removesuffix(".default")
    return text


def _func_name(signature: str) -> str:
    """``add.Tensor(Tensor self, ...) -> Tensor`` -> ``add.Tensor``."""
    return signature.split("(", 1)[0].strip()


def _dispatch_keys(dispatch: Any) -> set[str]:
    keys: set[str] = set()
    if isinstance(dispatch, Mapping):
        for key in dispatch:
            keys.update(part.strip() for part in str(key).split(",") if part.strip())
    return keys


# --------------------------------------------------------------------------- building


def classify_entries(entries: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Status per op name from parsed ``native_functions.yaml`` entries (no overrides)."""
    return classify_with_keys(entries)[0]


def classify_with_keys(entries: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """(status per op, evidence per ``cpu_fallback`` op): the evidence names the entry
    whose dispatch keys decided (the ``structured_delegate`` target, if any) and its keys."""
    raw: dict[str, str | tuple[str, str]] = {}
    found_keys: dict[str, str] = {}
    for entry in entries:
        if not isinstance(entry, Mapping) or "func" not in entry:
            continue
        name = _func_name(str(entry["func"]))
        keys = _dispatch_keys(entry.get("dispatch"))
        if keys:
            found_keys[name] = ", ".join(sorted(keys))
        if "MPS" in keys:
            raw[name] = MPS
        elif keys & COMPOSITE_KEYS:
            raw[name] = PORTABLE
        elif entry.get("structured_delegate"):
            # dense kernels come from the .out variant; the keys listed here are for
            # sparse / nested / mkldnn layouts.
            raw[name] = ("delegate", str(entry["structured_delegate"]).strip())
        elif keys:
            raw[name] = CPU_FALLBACK
        else:
            raw[name] = PORTABLE  # no dispatch section: CompositeImplicitAutograd
        for generated in str(entry.get("autogen") or "").split(","):
            # autogen'd out= variants call the functional op, so they share its fate.
            if generated.strip():
                raw.setdefault(generated.strip(), ("autogen", name))

    def resolve(name: str, depth: int = 0) -> str:
        value = raw.get(name)
        if value is None:
            return UNKNOWN
        if isinstance(value, str):
            return value
        if depth > 8:
            return UNKNOWN
        kind, target = value
        status = resolve(target, depth + 1)
        if kind == "autogen":
            return CPU_FALLBACK if status == CPU_FALLBACK else (MPS if status == MPS else PORTABLE)
        return status

    def decided_by(name: str, depth: int = 0) -> str:
        value = raw.get(name)
        if isinstance(value, tuple) and depth <= 8:
            return decided_by(value[1], depth + 1)
        return name

    statuses = {name: resolve(name) for name in raw}
    evidence = {}
    for name, status in statuses.items():
        if status == CPU_FALLBACK:
            decider = decided_by(name)
            via = "" if decider == name else f" (structured_delegate `{decider}`)"
            evidence[name] = f"{via}: dispatch {found_keys.get(decider, '?')}"
    return statuses, evidence


def find_native_functions_yaml() -> Path | None:
    """The yaml shipped in the installed torch wheel, found without importing torch."""
    try:
        spec = importlib.util.find_spec("torchgen")
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = Path(base).joinpath(*_YAML_PARTS)
        if path.is_file():
            return path
    return None


def _torch_version() -> str:
    """The installed torch's version, without importing torch (nor ``importlib.metadata``:
    its imports, email's parser among them, cost ~14 ms of CPU at every ``mpsprof report``
    and run summary): torch's own ``__version__`` where it is loaded, else the one its wheel
    writes into ``torch/version.py`` (torch's setup.py: ``__version__ = '2.x.y...'``), else
    the distribution's metadata."""
    torch = sys.modules.get("torch")
    loaded = getattr(torch, "__version__", None)
    if isinstance(loaded, str) and loaded:
        return loaded
    try:
        spec = importlib.util.find_spec("torch")
        origin = spec.origin if spec else None
        if origin:
            text = Path(origin).with_name("version.py").read_text(encoding="utf-8")
            for line in text.splitlines():
                name, _, value = line.partition("=")
                if name.strip() == "__version__" and ":" not in name:
                    found = value.strip().strip("'\"")
                    if found:
                        return found
    except (ImportError, ValueError, OSError):
        pass
    try:
        from importlib.metadata import version

        return version("torch")
    except Exception:
        return "unknown"


def _parse_yaml(path: Path) -> list[Any]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    with path.open("rb") as fh:
        data = yaml.load(fh, Loader=loader)
    return data if isinstance(data, list) else []


def user_cache_dir() -> Path:
    """Where derived tables are cached: ``MPSPROF_CACHE_DIR``, else the platform's cache."""
    explicit = os.environ.get("MPSPROF_CACHE_DIR")
    if explicit:
        return Path(explicit)
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "mpsprof"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mpsprof"


def _cache_path(cache_dir: Path, yaml_path: Path, version: str) -> Path:
    stat = yaml_path.stat()
    key = f"{CACHE_FORMAT}|{version}|{yaml_path}|{stat.st_size}|{int(stat.st_mtime)}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    safe = "".join(c if c.isalnum() or c in ".-_" else "_" for c in version)
    return cache_dir / f"mps_kernels-{safe}-{digest}.json"


def _read_cache(path: Path) -> tuple[dict[str, str], dict[str, str]] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    ops, keys = data.get("ops"), data.get("keys")
    if data.get("format") != CACHE_FORMAT or not isinstance(ops, dict) or not isinstance(keys, dict):
        return None
    return ({str(k): str(v) for k, v in ops.items() if v in STATUSES},
            {str(k): str(v) for k, v in keys.items() if isinstance(v, str)})  # fmt: skip


def _write_cache(path: Path, ops: Mapping[str, str], keys: Mapping[str, str], version: str) -> None:
    """Best effort and atomic: a read-only home must not break anything."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        data = {"format": CACHE_FORMAT, "torch": version, "ops": dict(ops), "keys": dict(keys)}
        tmp.write_text(json.dumps(data), "utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


# --------------------------------------------------------------------------- overrides


def overrides_path() -> Path | None:
    """``rules/data/mps_ops_overrides.yaml`` (kept out of the rule loader's folder scan),
    or ``rules/mps_ops_overrides.yaml``."""
    return rules_data_file(OVERRIDES_NAME)


def load_overrides(path: Path | None = None, own_mps: Callable[[str], bool] | None = None) -> dict[str, str]:
    """op -> status from the overrides file: ``cpu_always`` ops run on the CPU even with an
    MPS registration, ``mps_kernel`` ops have an MPS kernel registered outside the yaml.

    A ``cpu_always`` entry is a line of ``aten/src/ATen/mps/MPSFallback.mm``, and torch
    deletes that line in the release that gives the op an MPS kernel of its own (PR
    #152282 for ``col2im``, #156090 for ``upsample_nearest3d``). So an entry holds only
    while the installed torch's yaml registers no MPS kernel for it (``own_mps``, asked
    of the entry's ``until_mps_kernel``, else of the op itself). Without the yaml
    (``own_mps`` None) that is not known, and the entry says nothing.
    """
    path = path or overrides_path()
    if path is None:
        return {}
    try:
        import yaml

        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except Exception:
        return {}
    if not isinstance(data, dict):
        return {}
    out: dict[str, str] = {}
    for key, status in (("mps_kernel", MPS), ("cpu_always", CPU_FALLBACK)):
        items = data.get(key) or []
        for item in items if isinstance(items, list) else []:
            op, until = _override_entry(item)
            if op is None:
                continue
            if status == CPU_FALLBACK and (own_mps is None or own_mps(until or op)):
                continue
            out[op] = status
    return out


def _override_entry(item: Any) -> tuple[str | None, str | None]:
    """``op`` or ``{op: ..., until_mps_kernel: ...}`` -> (op, until), normalized."""
    if isinstance(item, str):
        return (normalize_op(item), None) if item.strip() else (None, None)
    if isinstance(item, dict) and isinstance(item.get("op"), str) and item["op"].strip():
        until = item.get("until_mps_kernel")
        return normalize_op(item["op"]), normalize_op(until) if isinstance(until, str) and until.strip() else None
    return None, None


MPS_FALLBACK_SOURCE = "MPSFallback.mm"
"""The file whose ``TORCH_LIBRARY_IMPL(aten, MPS, m)`` registers the CPU fallback kernel on
the MPS key for the ops it names (aten/src/ATen/mps/MPSFallback.mm)."""


def registered_from_mps_fallback(dump: str) -> bool | None:
    """Whether an op's MPS kernel is MPSFallback.mm's CPU fallback, from the op's
    ``torch._C._dispatch_dump(op)``: the registry's own record of where each kernel was
    registered (``OperatorEntry::dumpState`` in aten/src/ATen/core/dispatch/OperatorEntry.cpp
    writes a line ``<key>: registered at <file>:<line> :: <signature>`` per kernel; the file
    is the ``TORCH_LIBRARY_IMPL`` block's). None where the op has no MPS kernel of its own.
    On a Mac this is the truth for the installed torch, whatever the release."""
    for line in dump.splitlines():
        if line.startswith("MPS: "):
            return MPS_FALLBACK_SOURCE in line
    return None


# --------------------------------------------------------------------------- the table


class MpsKernelTable:
    """Status of each ATen op on MPS, and the evidence for it; build with :meth:`load`.

    Backend-specific kernels (``rules/data/mps_backend_kernels.yaml``) are judged by the
    ops a Mac runs for the same call, not by their own entries: see
    :mod:`mpsprofiler.kernels.backends`.
    """

    def __init__(
        self,
        ops: Mapping[str, str],
        overrides: Mapping[str, str] | None = None,
        *,
        source: str = "",
        keys: Mapping[str, str] | None = None,
        backends: BackendTable | None = None,
    ) -> None:
        self._ops = dict(ops)
        self._overrides = dict(overrides or {})
        self._keys = dict(keys or {})
        self.backends = backends if backends is not None else load_backend_table()
        self.source = source  # "cache" | "yaml" | "" (built in memory)
        self._by_base: dict[str, list[str]] | None = None

    @classmethod
    def load(
        cls,
        *,
        yaml_path: Path | None = None,
        cache_dir: Path | None = None,
        use_cache: bool = True,
        overrides: Mapping[str, str] | None = None,
        backends: BackendTable | None = None,
    ) -> MpsKernelTable:
        """The table for the installed torch (from the disk cache when possible).

        Never raises: without a yaml the table is empty and every op is ``"unknown"``
        (overrides still apply).
        """
        version = _torch_version()
        path = yaml_path or find_native_functions_yaml()
        if path is None:
            over = load_overrides() if overrides is None else dict(overrides)
            return cls({}, over, source="", backends=backends)
        cache = None
        if use_cache:
            try:
                cache = _cache_path(cache_dir or user_cache_dir(), path, version)
            except OSError:
                cache = None
        cached = _read_cache(cache) if cache is not None else None
        source = "cache"
        if cached is None:
            source = "yaml"
            try:
                cached = classify_with_keys(_parse_yaml(path))
            except Exception:
                cached = ({}, {})
            if cache is not None and cached[0]:
                _write_cache(cache, cached[0], cached[1], version)
        ops = cached[0]
        own_mps = (lambda op: ops.get(op) == MPS) if ops else None  # an unreadable yaml tells nothing
        over = load_overrides(own_mps=own_mps) if overrides is None else dict(overrides)
        return cls(ops, over, source=source, keys=cached[1], backends=backends)

    def __len__(self) -> int:
        return len(self._ops)

    def status(self, op: str) -> str:
        """``"mps"`` | ``"portable"`` | ``"cpu_fallback"`` | ``"unknown"`` for an op name:
        for a backend-specific kernel, the status of what a Mac runs instead."""
        own = self.own_status(op)
        row = self._row(op, own)
        if row is not None:
            mapped = self._row_status(row, op)
            if mapped is not None:
                return mapped[0]
        elif self._unmapped_kernel(op, own):
            return UNKNOWN
        return own

    def _unmapped_kernel(self, op: str, own: str) -> bool:
        """A backend-specific kernel the table has no row for (new in this torch): what a
        Mac runs for its call is not known, so it is no fallback prediction. Asked only
        where :meth:`_row` found no row."""
        return own == CPU_FALLBACK and looks_backend_specific(op) and base_name(op) not in self.backends.not_calls

    def _row(self, op: str, own: str) -> BackendRow | None:
        """The backend row of a kernel that has no MPS kernel of its own."""
        if own == MPS or not self.backends.rows:
            return None
        return self.backends.row_for(op)

    def own_status(self, op: str) -> str:
        """The status of ``op`` itself from the yaml and the overrides (no mapping)."""
        name = normalize_op(op)
        forced = self._overrides.get(name)
        if forced is not None:
            return forced
        found = self._ops.get(name)
        if found is not None:
            return found
        if "." in name or "::" in name:
            return UNKNOWN
        return self._status_of_base(name)

    def _row_status(self, row: BackendRow, kernel: str) -> tuple[str, str] | None:
        """(status, op) of what a Mac runs for ``kernel``: the first of the row's ops that
        this torch runs on MPS (a backward kernel looks at backward ops first), else the
        first it has without an MPS kernel; None when this torch knows none of them."""
        runs = list(row.mps_runs)
        if "backward" in kernel:
            runs.sort(key=lambda op: "backward" not in op)
        fallback = None
        for op in runs:
            status = self.own_status(op)
            if status in (MPS, PORTABLE):
                return status, op
            if status == CPU_FALLBACK and fallback is None:
                fallback = (status, op)
        return fallback

    def explain(self, op: str) -> str:
        """Evidence for :meth:`status`, a line a user can check in the named file."""
        own = self.own_status(op)
        row = self._row(op, own)
        if row is not None:
            mapped = self._row_status(row, op)
            if mapped is not None:
                status, target = mapped
                head = (f"{BACKENDS_NAME} row `{row.row}`: `{base_name(op)}` is a {row.backend} kernel "
                        f"for {row.called_as}; a Mac runs `{target}`")  # fmt: skip
                if status == CPU_FALLBACK:
                    return f"{head}, which has no MPS kernel ({self._own_evidence(target)})"
                kind = "an MPS kernel" if status == MPS else "composite: decomposed into ops with MPS kernels"
                return f"{head} ({kind} in native_functions.yaml)"
        elif self._unmapped_kernel(op, own):
            return (f"`{base_name(op)}` is a backend-specific kernel that {BACKENDS_NAME} does not map yet "
                    f"(new in torch {_torch_version()}?): which op a Mac runs for its call is not known")  # fmt: skip
        return self._own_evidence(op)

    def _own_evidence(self, op: str) -> str:
        name = normalize_op(op)
        forced = self._overrides.get(name)
        if forced == CPU_FALLBACK:
            return f"{OVERRIDES_NAME} cpu_always: `{name}` runs on the CPU on a Mac even with an MPS registration"
        if forced == MPS:
            return f"{OVERRIDES_NAME} mps_kernel: `{name}` has an MPS kernel registered outside the yaml"
        status = self.own_status(op)
        if status == CPU_FALLBACK:
            keys = self._keys.get(name) or next((self._keys[n] for n in self._by_base_names(name) if n in self._keys), "")
            return f"native_functions.yaml `{name}`{keys or ': no MPS dispatch entry'}, none for MPS"
        if status == MPS:
            return f"native_functions.yaml `{name}`: MPS kernel"
        if status == PORTABLE:
            return f"native_functions.yaml `{name}`: composite, runs where its pieces run"
        return f"`{name}` is not in native_functions.yaml"

    def _by_base_names(self, base: str) -> list[str]:
        self._status_of_base(base) if self._by_base is None else None
        return (self._by_base or {}).get(base, [])

    def _status_of_base(self, base: str) -> str:
        """An overload-less name (``aten::ctc_loss``) that only exists with overloads."""
        if self._by_base is None:
            index: dict[str, list[str]] = {}
            for name in self._ops:
                index.setdefault(name.split(".", 1)[0], []).append(name)
            self._by_base = index
        statuses = {self.own_status(n) for n in self._by_base.get(base, ())}
        for status in (MPS, CPU_FALLBACK, PORTABLE):
            if status in statuses:
                return status
        return UNKNOWN


_DEFAULT: MpsKernelTable | None = None


def default_table() -> MpsKernelTable:
    """One table per process, loaded on first use."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = MpsKernelTable.load()
    return _DEFAULT


def predict_fallbacks(op_names: Iterable[str], table: MpsKernelTable | None = None) -> dict[str, str]:
    """Status of each op name on a Mac (filter on ``"cpu_fallback"`` for the fallbacks)."""
    table = table or default_table()
    return {op: table.status(op) for op in op_names}
