"""Child entry point: install the probe, then run the script exactly as ``python`` would.

``python -m mpsprofiler.probe.boot SCRIPT ARGS...`` or ``... boot -m MODULE ARGS...``.
What "exactly" means here: ``sys.argv``, ``sys.path[0]``, ``__name__ == "__main__"``,
the traceback of an uncaught exception (our own frames removed), ``sys.exit`` codes and
messages, and death by SIGINT after an uncaught KeyboardInterrupt. The probe's settings
come in ``MPSPROF_CHANNEL`` / ``MPSPROF_OPTIONS`` and are removed from the environment
before the script runs, so the script and its subprocesses see the user's environment.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import traceback
from types import TracebackType
from typing import Any

_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _start_probe() -> Any:
    spec = os.environ.pop("MPSPROF_CHANNEL", "")
    raw_options = os.environ.pop("MPSPROF_OPTIONS", "{}")
    if not spec:
        return None
    try:
        from .channel import open_channel
        from .probe import Probe

        options = json.loads(raw_options) if raw_options else {}
        if options.get("line_buffered"):
            # output goes to a file the TUI tails: show lines as they are printed
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
                except Exception:
                    pass
        probe = Probe(open_channel(spec), options)
        probe.install()
        return probe
    except Exception as exc:  # the training runs even if the probe cannot
        sys.stderr.write(f"mpsprof: profiler disabled ({type(exc).__name__}: {exc})\n")
        return None


def _is_own_frame(filename: str) -> bool:
    return filename.startswith(_OWN_DIR) or os.path.basename(filename) == "runpy.py" or filename.startswith("<frozen runpy")


def _trim(tb: TracebackType | None) -> TracebackType | None:
    """Drop the leading frames of this module and runpy, as plain ``python`` shows none."""
    while tb is not None and _is_own_frame(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    return tb


def _frames(tb: TracebackType | None) -> list[dict[str, Any]]:
    out = []
    for frame in traceback.extract_tb(tb, limit=64):
        name = frame.filename
        user = not (
            "site-packages" in name
            or "dist-packages" in name
            or name.startswith(sys.base_prefix)
            or name.startswith("<")
        )
        out.append({"file": name, "line": frame.lineno, "func": frame.name, "code": frame.line or "", "user": user})
    return out


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    probe = _start_probe()
    module = None
    if args and args[0] == "-m":
        module = args[1]
        sys.argv = [module, *args[2:]]  # runpy replaces argv[0] with the module's path
        sys.path[0] = os.getcwd()
    else:
        script = args[0]
        sys.argv = [script, *args[1:]]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
    try:
        if module is not None:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    except SystemExit:
        if probe is not None:
            probe.close()
        raise
    except BaseException as exc:  # noqa: BLE001 - we re-create Python's own handling
        tb = _trim(exc.__traceback__)
        if probe is not None:
            try:
                probe.record_exception(exc, _frames(tb))
            except Exception:
                pass
        sys.excepthook(type(exc), exc, tb)
        _flush_std()
        if probe is not None:
            probe.close()
        if isinstance(exc, KeyboardInterrupt):
            # Python exits by SIGINT after an uncaught KeyboardInterrupt (bpo-1054041)
            import atexit

            atexit._run_exitfuncs()
            _flush_std()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)
    if probe is not None:
        probe.close()


if __name__ == "__main__":
    main()
