"""What the installed torch contains, read from its own ``native_functions.yaml`` (the
file torchgen ships, the one the dispatcher is generated from), so that no test assumes
which release added which kernel: a test's expectation follows the torch it runs with."""

from __future__ import annotations

from functools import cache


@cache
def _dispatch_tables() -> dict[str, dict[str, str]]:
    import yaml

    from mpsprofiler.kernels.readiness import find_native_functions_yaml

    path = find_native_functions_yaml()
    assert path is not None, "this torch ships no native_functions.yaml"
    # libyaml's loader where PyYAML has it: the pure-Python one takes seconds on this file,
    # and test modules call this while pytest collects them, once per xdist worker
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    entries = yaml.load(path.read_text(encoding="utf-8"), Loader=loader) or []
    return {str(e["func"]).split("(", 1)[0]: dict(e.get("dispatch") or {}) for e in entries if "func" in e}


def has_mps_kernel(func: str) -> bool:
    """Whether the installed torch's ``func`` (``_ctc_loss``, ``mm.out`` ...) dispatches to
    an MPS kernel of its own (a ``MPS`` key in its dispatch table, alone or in a list)."""
    table = _dispatch_tables().get(func, {})
    return any("MPS" in [k.strip() for k in keys.split(",")] for keys in table)
