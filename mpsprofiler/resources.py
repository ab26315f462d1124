"""Where the files that ship with mpsprofiler are: rule files and their data, the bundled
example scripts, the report's stylesheet and JSON schema, the package's own folder.

One owner, so no module guesses a path with ``__file__`` and ``parents[n]``: in a wheel the
repo's ``rules/`` and ``examples/`` are packaged as ``mpsprofiler/_rules`` and
``mpsprofiler/_examples`` (pyproject's ``force-include``); in a checkout they sit next to the
package. Standard library only: the probe asks here too (which frames are ours).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
"""The installed ``mpsprofiler`` package: frames from files below it are the profiler's."""
OWN_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
"""The package folder as code objects name it (not resolved through symlinks), with a trailing separator."""
_OWN_PREFIXES = tuple({OWN_DIR, str(PACKAGE_DIR) + os.sep})
"""The package folder as code objects name it (``abspath``) and resolved (through symlinks)."""
_EXAMPLE_PREFIXES = tuple(p + "_examples" + os.sep for p in _OWN_PREFIXES)

DEMO = "slow_dataloader.py"
"""The bundled script ``mpsprof demo`` runs."""


def _packaged_or_repo(packaged: str, repo: str) -> Path:
    inside = PACKAGE_DIR / packaged
    return inside if inside.is_dir() else PACKAGE_DIR.parent / repo


def rules_dir() -> Path:
    """The builtin rules folder: ``mpsprofiler/_rules`` in a wheel, else the repo's ``rules/``."""
    return _packaged_or_repo("_rules", "rules")


def rules_data_file(name: str) -> Path | None:
    """A data file of the rules (``rules/data/NAME``, kept out of the loader's folder scan;
    or ``rules/NAME``), None when neither exists."""
    base = rules_dir()
    for path in (base / "data" / name, base / name):
        if path.is_file():
            return path
    return None


def examples_dir() -> Path:
    """The bundled example scripts: ``mpsprofiler/_examples`` in a wheel, else ``examples/``."""
    return _packaged_or_repo("_examples", "examples")


def demo_script() -> Path:
    return examples_dir() / DEMO


def is_own_file(filename: str) -> bool:
    """True for the profiler's own source files; the bundled examples are user code."""
    return filename.startswith(_OWN_PREFIXES) and not filename.startswith(_EXAMPLE_PREFIXES)


def report_stylesheet() -> str:
    """The HTML report's stylesheet (inlined into every page)."""
    return (PACKAGE_DIR / "report" / "report.css").read_text(encoding="utf-8")


def report_schema_text() -> str:
    """The JSON Schema of ``mpsprof report --format json`` (``report/schema.json``)."""
    return (PACKAGE_DIR / "report" / "schema.json").read_text(encoding="utf-8")
