"""Which other programs use the machine's CPUs while the training runs (the launcher's side).

The training's thread and worker advice counts the cores left free (see
``diagnosis/analyzers/threads.py``); the figure there is the machine's busy share less the
training's own CPU. This names who took the rest: every ``INTERVAL`` seconds the parent
reads the CPU times of every process outside the training's tree (the child, its
DataLoader workers and other descendants) and outside mpsprof itself, and sends an
``others`` event with the busiest few, as cores' worth of CPU over the run so far.

Sampled here, in the parent, not in the training process: a process listing costs a few
milliseconds per second of run on a machine with a few hundred processes, which the
training never pays. A process the parent may not read (another user's, on macOS) is
skipped; any failure stops the sampler, never the run.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

INTERVAL = 2.0
"""Seconds between two process listings (a cheap pass: CPU times, names)."""
TOP = 3
MIN_WINDOW_S = 2.0
MIN_CORES = 0.05
"""A process using less than 5% of a core is not worth naming."""

RESEND_S = 10.0
"""The same names are sent again (with their new figures) at most every 10 s."""


def _name(proc: Any) -> str:
    """The program's name and, for an interpreter, its script's base name or ``-c``/``-m``
    (``python spin.py``, ``python -m pytest``): never the whole command line, which may
    hold secrets. Another mpsprof run's training is named by its script."""
    name = str(proc.info.get("name") or "?")
    try:
        argv = proc.cmdline()
    except Exception:
        return name
    if not ("python" in name.lower() or name.lower() in ("node", "ruby", "perl", "bash", "sh")):
        return name
    rest = argv[1:]
    while rest and rest[0].startswith("-") and rest[0] not in ("-c", "-m"):
        rest = rest[1:] if rest[0] not in ("-X", "-W") else rest[2:]  # options (-u, -O, -X dev)
    if not rest:
        return name
    if rest[0] == "-m" and len(rest) >= 2:
        return f"{name} -m {rest[1][:24]}"
    if rest[0] == "-c":
        return f"{name} -c"
    script = os.path.basename(rest[0])
    if script == "importlib_bootstrap_start.py" and len(rest) >= 2:  # mpsprof's start program
        return f"{name} {os.path.basename(rest[1])[:40]} (mpsprof run)"
    return f"{name} {script[:40]}"


class OtherPrograms:
    """A daemon thread: ``start(root_pid)``; the reader thread ``take()``s each new reading
    (the ``others`` event's fields) and writes it with the child's events, so one thread
    writes the recording; ``stop()`` returns the last reading, for the end of the run."""

    def __init__(self, interval: float = INTERVAL) -> None:
        self._interval = interval
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None
        self._latest: dict[str, Any] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._first: dict[tuple[int, float], float] = {}
        """(pid, create time) -> CPU seconds when first seen (0 for one started during the run)."""
        self._last: dict[tuple[int, float], tuple[float, str]] = {}
        self._t0 = 0.0
        self._wall0 = 0.0
        self._sent: list[str] | None = None
        self._sent_at = 0.0

    def start(self, root_pid: int) -> None:
        try:
            import psutil  # noqa: F401
        except ImportError:
            return
        self._thread = threading.Thread(target=self._loop, args=(root_pid,), name="mpsprof-others", daemon=True)
        self._thread.start()

    def take(self) -> dict[str, Any] | None:
        """A reading not taken yet, or None."""
        with self._lock:
            pending, self._pending = self._pending, None
        return pending

    def stop(self) -> dict[str, Any] | None:
        """Stop sampling; the latest reading (taken or not), or None when there was none."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        with self._lock:
            self._pending = None
            return self._latest

    def _loop(self, root_pid: int) -> None:
        import psutil

        try:
            root = psutil.Process(root_pid)
            self._t0, self._wall0 = time.monotonic(), time.time()
            self._read(psutil, root)
            while not self._stop.wait(self._interval):
                self._read(psutil, root)
                self._send()
        except Exception:
            return

    def _tree(self, psutil: Any, root: Any) -> set[int]:
        """The training's pids: the root and its descendants."""
        tree = {root.pid}
        try:
            tree |= {c.pid for c in root.children(recursive=True)}
        except psutil.Error:
            pass
        return tree

    def _read(self, psutil: Any, root: Any) -> None:
        # the listing first, then the training's tree: a DataLoader worker started between
        # the two is in the tree (read the other way round, it was listed as another
        # program); one listed but gone by the time the tree is read still descends from
        # the training by the parent pids the listing holds
        procs = list(psutil.process_iter(["name", "create_time", "cpu_times", "ppid"]))
        tree = self._tree(psutil, root)
        parents = {proc.pid: proc.info.get("ppid") for proc in procs}
        for proc in procs:
            if proc.pid == 0 or proc.pid == os.getpid() or _descends(proc.pid, tree, parents):
                continue
            times, created = proc.info.get("cpu_times"), proc.info.get("create_time")
            if times is None or created is None:
                continue
            cpu = float(times.user + times.system)
            key = (proc.pid, float(created))
            if key not in self._first:
                # started during the run: all its CPU time is the run's; else from now on
                self._first[key] = 0.0 if created >= self._wall0 else cpu
                self._last[key] = (cpu, _name(proc))
            else:
                self._last[key] = (cpu, self._last[key][1])

    def _send(self, min_window: float = MIN_WINDOW_S) -> None:
        window = time.monotonic() - self._t0
        if window < min_window:
            return
        by_name: dict[str, float] = {}
        for key, (cpu, name) in self._last.items():  # one program in several processes: one line
            by_name[name] = by_name.get(name, 0.0) + (cpu - self._first[key]) / window
        used = sorted(((cores, name) for name, cores in by_name.items()), reverse=True)
        top: list[dict[str, Any]] = [{"name": name, "cores": round(cores, 2)} for cores, name in used[:TOP]
                                     if cores >= MIN_CORES]
        fields: dict[str, Any] = {"window_s": round(window, 1), "top": top}
        names = [str(t["name"]) for t in top]
        with self._lock:
            self._latest = fields
            if names == self._sent and window - self._sent_at < RESEND_S:
                return
            self._sent, self._sent_at = names, window
            self._pending = fields


def _descends(pid: int, tree: set[int], parents: dict[int, Any]) -> bool:
    """Whether ``pid`` is in ``tree`` or a descendant of one of its pids, by ``parents``
    (pid -> parent pid, as listed)."""
    seen: set[int] = set()
    while isinstance(pid, int) and pid > 0 and pid not in seen:
        if pid in tree:
            return True
        seen.add(pid)
        pid = parents.get(pid)  # type: ignore[assignment]
    return False


def measure_once(seconds: float = 0.5) -> dict[str, Any] | None:
    """``mpsprof doctor``'s reading without a run: the cores' worth of CPU every other
    process used over ``seconds`` (the machine's busy share less this process's own) and
    the busiest few, as ``{"others_busy_cores": ..., "others_top": [...]}``; None without psutil."""
    try:
        import psutil
    except ImportError:
        return None
    try:
        logical = psutil.cpu_count() or 1
        me = psutil.Process()
        mine0 = sum(me.cpu_times()[:2])
        sampler = OtherPrograms()
        sampler._t0, sampler._wall0 = time.monotonic(), time.time()
        sampler._read(psutil, me)
        psutil.cpu_percent(None)
        time.sleep(seconds)
        busy = psutil.cpu_percent(None) / 100.0 * logical
        sampler._read(psutil, me)
        window = max(time.monotonic() - sampler._t0, 1e-3)
        mine = (sum(me.cpu_times()[:2]) - mine0) / window
        sampler._send(min_window=0.0)
        top = (sampler._latest or {}).get("top") or []
        return {"others_busy_cores": round(max(0.0, busy - mine), 2), "others_top": top}
    except Exception:
        return None
