"""Child entry point: install the probe, then run the script exactly as ``python`` would.

``python -m mpsprofiler.probe.boot SCRIPT ARGS...`` or ``... boot -m MODULE ARGS...``.
What "exactly" means here: ``sys.argv``, ``sys.path[0]``, ``__file__`` (absolute, as
Python 3.9+ makes it), the ``__main__`` module's globals, the traceback of an uncaught
exception (our own frames removed, wherever the exception passed through them; the
``runpy`` frames that ``python -m`` shows kept),
``sys.exit`` codes and messages, and death by SIGINT after an uncaught KeyboardInterrupt.
A plain script is compiled and run in a fresh ``__main__`` module the way Python's
``pymain_run_file`` does (runpy would change ``sys.argv[0]`` and ``__file__``); ``-m``,
directories and zip files go through ``runpy._run_module_as_main`` like ``python`` itself.
:func:`prepare_main` readies a script that the launcher compiled to start the probe
itself (launcher/start_code.py): the script's frame is the outermost, as under python.
:func:`prepare` readies the other targets (``-m``, directories, zip files, a script that
does not compile) and returns a :class:`Job` whose ``run`` the launcher's start program
(:mod:`.importlib_bootstrap_start`) calls from its own module frame: one frame of ours
below the target's, which warnings skip and whose recursion cost the limit makes up for
(``inspect.stack()`` and ``sys.getrecursionlimit()`` show it there).
The probe's settings come in ``MPSPROF_CHANNEL`` / ``MPSPROF_OPTIONS`` and are removed
from the environment before the script runs, so the script and its subprocesses see the
user's environment.
"""

from __future__ import annotations

import builtins
import functools
import io
import json
import os
import runpy
import signal
import sys
import traceback
import types
from collections.abc import Callable
from importlib.machinery import SourceFileLoader
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..events.payloads import Frame

from ..resources import is_own_file as _ours
from . import plain_frames

_BOOT_MODULE = sys.modules.get(__name__)
"""Keep this module alive once the script's module replaces it as ``__main__``."""


def _start_probe() -> Any:
    spec = os.environ.pop("MPSPROF_CHANNEL", "")
    raw_options = os.environ.pop("MPSPROF_OPTIONS", "{}")
    spill_dir = os.environ.pop("MPSPROF_SPILL", "") or None
    if not spec:
        return None
    channel = None
    try:
        from .channel import HEADLESS_INTERVAL, INTERVAL, open_channel
        from .probe import Probe

        options = json.loads(raw_options) if raw_options else {}
        if options.get("line_buffered"):
            # output goes to a file the TUI tails: show lines as they are printed
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]
                except Exception:
                    pass
        channel = open_channel(spec, spill_dir, HEADLESS_INTERVAL if options.get("headless") else INTERVAL)
        probe = Probe(channel, options)
        probe.install()
        return probe
    except Exception as exc:  # the training runs even if the probe cannot
        sys.stderr.write(f"mpsprof: profiler disabled ({type(exc).__name__}: {exc})\n")
        _close_channel(channel, spec)
        return None


def _close_channel(channel: Any, spec: str) -> None:
    """Leave no descriptor of ours open for the script's subprocesses to inherit."""
    try:
        if channel is not None:
            channel.close(timeout=0.5)
        elif spec.startswith("fd:"):
            os.close(int(spec[3:]))
    except Exception:
        pass


def _trim(tb: TracebackType | None) -> TracebackType | None:
    """Drop this package's frames that the exception passed through: plain ``python``
    has none of them (the start program below the script, the wrappers around torch's
    DataLoader ``__next__`` and ``_engine_run_backward``), nor torch's entries that only
    our module hooks and op dispatch mode make (``plain_frames``). Frames of ours at the
    end of the chain stay: there the exception was raised by mpsprof itself, and its
    traceback must say where."""
    entries: list[TracebackType] = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    last_foreign = max((i for i, e in enumerate(entries) if not _ours(e.tb_frame.f_code.co_filename)), default=-1)
    try:  # torch's own entries that our hooks and dispatch mode made (plain_frames)
        dispatch = plain_frames.dispatch_entries(entries, _ours)
    except Exception:
        dispatch = set()
    kept = [e for i, e in enumerate(entries)
            if i > last_foreign or not (_ours(e.tb_frame.f_code.co_filename) or i in dispatch)]
    try:
        kept = plain_frames.fast_path(kept, _ours)
    except Exception:
        pass
    try:
        for here, after in zip(kept, kept[1:], strict=False):
            here.tb_next = after
        if kept:
            kept[-1].tb_next = None
    except (TypeError, ValueError):  # not writable: leave the chain as it is
        return entries[0] if entries else None
    return kept[0] if kept else None


def _trim_chain(exc: BaseException) -> None:
    """Trim the tracebacks of the exceptions ``exc`` was raised from or during too."""
    seen = {id(exc)}
    todo = [exc.__cause__, exc.__context__]
    while todo:
        other = todo.pop()
        if other is None or id(other) in seen:
            continue
        seen.add(id(other))
        other.__traceback__ = _trim(other.__traceback__)
        todo += [other.__cause__, other.__context__]


def _frames(exc: BaseException, tb: TracebackType | None) -> list[Frame]:
    out: list[Frame] = []
    for frame in traceback.extract_tb(tb, limit=64):
        name = frame.filename
        out.append({"file": name, "line": frame.lineno, "func": frame.name, "code": frame.line or "", "user": _is_user(name)})
    if isinstance(exc, SyntaxError) and exc.filename:
        # the script did not compile: the place to fix is the error's own line
        out.append({"file": exc.filename, "line": exc.lineno, "func": "<module>",
                    "code": (exc.text or "").strip(), "user": _is_user(exc.filename)})
    return out


def _is_user(name: str) -> bool:
    """The user's own code: not a library, not the stdlib, not mpsprofiler's hooks."""
    return not (
        _ours(name)
        or "site-packages" in name
        or "dist-packages" in name
        or name.startswith(sys.base_prefix)
        or name.startswith("<")
    )


def _flush_std() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def _is_runnable_path(path: str) -> bool:
    """A directory or zip file that ``python PATH`` runs through its ``__main__``."""
    if os.path.isdir(path):
        return True
    try:
        import zipfile

        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _fresh_main() -> types.ModuleType:
    """A new ``__main__`` module with the globals Python gives a script's module."""
    main = types.ModuleType("__main__")
    main.__dict__["__annotations__"] = {}
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    return main


class _DoesNotCompile(Exception):
    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def python_abspath(script: str) -> str:
    """The script's path as ``python SCRIPT`` makes it for ``__file__`` and the code's file
    name: the working directory joined to a relative path, nothing normalized
    (``_Py_abspath`` in CPython's Python/fileutils.c: ``./../x.py`` stays in it)."""
    return script if os.path.isabs(script) else os.path.join(os.getcwd(), script)


def _file_job(script: str) -> Callable[[], Any]:
    """Compile the script into a fresh ``__main__``; the returned call execs it."""
    path = python_abspath(script)
    with io.open_code(path) as fh:
        source = fh.read()
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        raise _DoesNotCompile(exc) from None
    main = _fresh_main()
    main.__file__ = path
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = SourceFileLoader("__main__", path)
    # a partial of a builtin: calling it adds no Python frame below the script's
    return functools.partial(exec, code, main.__dict__)


def _module_job(name: str, alter_argv: bool) -> Callable[[], Any]:
    _fresh_main()
    return functools.partial(runpy._run_module_as_main, name, alter_argv=alter_argv)  # type: ignore[attr-defined]


def _secret_values(args: list[str]) -> list[str]:
    try:
        from ..redact import secret_values

        return secret_values(args)
    except Exception:  # noqa: BLE001 - never stop the script over it
        return []


def _path0(args: list[str]) -> tuple[str | None, bool]:
    """What ``python ARGS`` puts first on ``sys.path`` (None: nothing, ``PYTHONSAFEPATH``
    / ``-P``), and whether the target is a directory or zip file run by its ``__main__``.

    CPython (``pymain_run_python``): a directory or zip file always goes first (its
    ``__main__`` is found there); else, unless ``safe_path``, the working directory for
    ``-m`` and the script's directory (links resolved) for a script.
    """
    safe = bool(getattr(sys.flags, "safe_path", False))
    if args and args[0] == "-m":
        return (None if safe else os.getcwd()), False
    script = args[0]
    if _is_runnable_path(script):
        return os.path.abspath(script), True
    return (None if safe else os.path.dirname(os.path.realpath(script))), False


def _unshadow(path0: str | None, startup: set[str] | None) -> None:
    """Forget the modules mpsprof imported that the script would find elsewhere.

    mpsprof imports stdlib modules (json, traceback, ...) that plain ``python`` has not
    loaded when the script starts; a ``json.py`` in the script's directory is then the
    script's ``json`` under python. Such a module is dropped from ``sys.modules`` (our
    code keeps its own reference), so the script's import finds the user's file.
    """
    if path0 is None or startup is None:
        return
    try:
        names = os.listdir(path0)
    except OSError:
        return
    found = set()
    for entry in names:
        stem = entry.split(".", 1)[0]
        if entry.endswith((".py", ".pyc", ".so", ".pyd")) or "." not in entry:
            found.add(stem)
    for name in list(sys.modules):
        top = name.split(".", 1)[0]
        if top in found and top not in startup and top != "mpsprofiler" and name not in startup:
            sys.modules.pop(name, None)


class Job:
    """The script, ready to run: ``run`` is a C-level call (a ``functools.partial`` of
    ``exec`` or of ``runpy._run_module_as_main``), so the start program that calls it
    is the only frame of ours below the script's; ``fail`` / ``close`` do what Python
    does after it."""

    def __init__(self, run: Callable[[], Any], probe: Any) -> None:
        self.run = run
        self.probe = probe

    def fail(self, exc: BaseException) -> None:
        """An uncaught exception: report it as Python does, then exit (never returns)."""
        _handle_uncaught(exc, self.probe)

    def close(self) -> None:
        if self.probe is not None:
            self.probe.close()


START_FRAMES = 2
"""Recursion levels the start program adds below the script's frame: its own module
frame and the C call of ``exec`` (measured: a recursive function reaches the same depth
as under python with the limit raised by this much)."""


def prepare(args: list[str], *, bootstrapped: bool = True, startup: set[str] | None = None) -> Job:
    """Install the probe and ready the script (``sys.argv``, ``sys.path``, ``__main__``).

    ``bootstrapped``: started by the launcher's start program, which removed the entry
    python put first on ``sys.path``; else (``python -m mpsprofiler.probe.boot``,
    torchrun's ranks) python put the working directory there unless ``safe_path``, and
    it is removed here. A script that does not compile never returns (python reports it).
    """
    args = list(args)
    if not bootstrapped and not getattr(sys.flags, "safe_path", False) and sys.path:
        del sys.path[0]
    probe = _start_probe()
    executable = sys.orig_argv[0] if getattr(sys, "orig_argv", None) else sys.executable
    sys.orig_argv = [executable, *args]
    if probe is not None:
        probe.secrets = _secret_values(args)
    path0, runnable = _path0(args)  # runnable: a directory or zip file with __main__.py
    if args and args[0] == "-m":
        module, script = args[1], None
        sys.argv = ["-m", *args[2:]]  # runpy replaces argv[0] with the module's path
    else:
        module, script = None, args[0]
        sys.argv = [script, *args[1:]]
    if path0 is not None:
        sys.path.insert(0, path0)
    _unshadow(path0, startup)
    try:
        if module is not None:
            run = _module_job(module, alter_argv=True)
        elif runnable:
            run = _module_job("__main__", alter_argv=False)
        else:
            run = _file_job(script or "")
    except _DoesNotCompile as exc:
        _let_python_report(exc.error, script or "", args[1:], probe)
        raise AssertionError("unreachable") from None
    except BaseException as exc:  # noqa: BLE001 - an unreadable script, a missing module
        _handle_uncaught(exc, probe)
        raise AssertionError("unreachable") from None
    if bootstrapped:
        try:
            sys.setrecursionlimit(sys.getrecursionlimit() + START_FRAMES)
        except Exception:
            pass
    return Job(run, probe)


def prepare_main(args: list[str], *, compiled: str, startup: set[str]) -> None:
    """Ready the running ``__main__`` for the rest of its own code (launcher/start_code.py).

    The script was compiled into ``compiled`` and python runs that file as ``__main__``:
    its frame is the script's, the outermost. What python would have set for ``python
    SCRIPT`` is set here: ``sys.argv``, ``sys.orig_argv``, ``sys.path[0]`` (the prelude
    already removed the compiled file's folder), ``__file__`` and ``__loader__``. The
    script's wrapped body calls :func:`end_main` at its end.
    """
    probe = _start_probe()
    script = args[0]
    orig = list(getattr(sys, "orig_argv", None) or [sys.executable, compiled, *args[1:]])
    if compiled in orig:
        orig[orig.index(compiled)] = script
    sys.orig_argv = orig
    if probe is not None:
        probe.secrets = _secret_values(args)
    path0, _ = _path0(args)
    sys.argv = [script, *args[1:]]
    if path0 is not None:
        sys.path.insert(0, path0)
    _unshadow(path0, startup)
    path = python_abspath(script)
    main = sys.modules["__main__"]
    main.__file__ = path
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = SourceFileLoader("__main__", path)

    global _MAIN_PROBE
    _MAIN_PROBE = probe


_MAIN_PROBE: Any = None
"""The probe of a script started by :func:`prepare_main`, for :func:`end_main`."""


def end_main(failed: bool) -> None:
    """The end of the compiled script's body: an uncaught exception (the one being
    handled) is reported as python does and the process exits; else the probe closes."""
    global _MAIN_PROBE
    probe, _MAIN_PROBE = _MAIN_PROBE, None
    exc = sys.exc_info()[1] if failed else None
    if exc is not None:
        _handle_uncaught(exc, probe)
    if probe is not None:
        probe.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m mpsprofiler.probe.boot [-m] TARGET ARGS...`` (kept for hand use; the
    launcher and torchrun's ranks start through launcher/start_code.py)."""
    job = prepare(sys.argv[1:] if argv is None else argv, bootstrapped=False)
    try:
        job.run()
    except SystemExit:
        job.close()
        raise
    except BaseException as exc:  # noqa: BLE001 - we re-create Python's own handling
        job.fail(exc)
    job.close()


def _let_python_report(error: BaseException, script: str, args: list[str], probe: Any) -> None:
    """The script does not compile: record that, then let ``python`` itself say so.

    Python's file tokenizer words some errors differently from ``compile()`` (null
    bytes, undeclared encodings); exec'ing the interpreter on the same file gives the
    user exactly its message and exit status. No line of the script has run.
    """
    if probe is not None:
        try:
            if isinstance(error, SyntaxError):
                probe.record_exception(error, _frames(error, None))
            else:
                # compile() refuses null bytes with ValueError (Python 3.11), where some
                # 3.11 releases' file reader runs the file anyway (3.11.2 stops at the NUL):
                # whether the script fails is Python's to say, so no crash is recorded;
                # the recording says the script ran without the profiler.
                probe.fail("script", error)
        except Exception:
            pass
        probe.close()
    _flush_std()
    try:
        os.execv(sys.executable, [sys.executable, script, *args])
    except OSError:
        _handle_uncaught(error, None)


def _handle_uncaught(exc: BaseException, probe: Any) -> None:
    tb = _trim(exc.__traceback__)
    _trim_chain(exc)
    # sys.excepthook prints the exception's own __traceback__, not the tb argument
    exc = exc.with_traceback(tb)
    if probe is not None:
        try:
            probe.record_exception(exc, _frames(exc, tb))
        except Exception:
            pass
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
    sys.excepthook(type(exc), exc, tb)
    _flush_std()
    if probe is not None:
        probe.close()
    if isinstance(exc, KeyboardInterrupt):
        # Python exits by SIGINT after an uncaught KeyboardInterrupt (bpo-1054041),
        # once it has waited for threads and run the atexit functions
        import atexit
        import threading

        try:
            threading._shutdown()  # type: ignore[attr-defined]
        except Exception:
            pass
        atexit._run_exitfuncs()
        _flush_std()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    sys.exit(1)


if __name__ == "__main__":
    main()
