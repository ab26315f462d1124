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

On Linux the listing reads each process's ``/proc/<pid>/stat`` alone (name, parent, CPU
times and start time are all in it: proc(5)), one pass with no process objects, and the
training's tree comes from that pass's parent pids; a program is named (its command line
read) only once it has used CPU during the run, once per process. Elsewhere psutil lists
them. Issue 34: psutil's objects took 6.3 ms of the parent's CPU per listing of ~100
processes, and the tree was a second listing (``children(recursive=True)``).
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
    """:func:`_label` of a psutil process (its name as psutil gives it, its command line)."""
    name = str(proc.info.get("name") or "?")
    try:
        argv = proc.cmdline()
    except Exception:
        return name
    return _label(name, argv)


def _label(name: str, argv: list[str]) -> str:
    """The program's name and, for an interpreter, its script's base name or ``-c``/``-m``
    (``python spin.py``, ``python -m pytest``): never the whole command line, which may
    hold secrets. Another mpsprof run's training is named by its script."""
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


PROC = "/proc"
Row = tuple[int, Any, Any, Any, str, Any]
"""One listed process: (pid, parent pid, start time as seconds since the epoch, CPU seconds
(user + system; None where they may not be read), its name (Linux: the kernel's 15-character ``comm``), a psutil process or None)."""


def _boot_time() -> float:
    """``btime`` of ``/proc/stat``: the epoch seconds a process's start ticks count from."""
    with open(f"{PROC}/stat", "rb") as f:
        for line in f:
            if line.startswith(b"btime"):
                return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def _proc_rows(ticks: float, boot: float) -> list[Row]:
    """Every process from its ``/proc/<pid>/stat`` alone (proc(5): the name between the first
    ``(`` and the last ``)``, then state, ppid, ..., utime and stime (fields 14-15), starttime
    (22)), in the figures psutil gives: CPU seconds ``utime / ticks + stime / ticks``, start
    ``starttime / ticks + btime``. A process gone between the listing and its read is left out."""
    rows: list[Row] = []
    read, close, open_, flags = os.read, os.close, os.open, os.O_RDONLY
    for entry in os.listdir(PROC):
        if not entry.isdigit():
            continue
        try:
            fd = open_(f"{PROC}/{entry}/stat", flags)
        except OSError:
            continue
        try:
            data = read(fd, 4096)
        except OSError:
            continue
        finally:
            close(fd)
        rpar = data.rfind(b")")
        fields = data[rpar + 2:].split()
        try:
            rows.append((int(entry), int(fields[1]), float(fields[19]) / ticks + boot,
                         float(fields[11]) / ticks + float(fields[12]) / ticks,
                         os.fsdecode(data[data.find(b"(") + 1:rpar]), None))
        except (IndexError, ValueError):
            continue
    return rows


def _proc_name(pid: int, comm: str) -> str:
    """:func:`_label` of a listed Linux process, named as psutil names it: the kernel keeps 15
    characters of a name, so a longer one is taken from the command line's first word where
    that begins with them (psutil's ``Process.name``)."""
    try:
        with open(f"{PROC}/{pid}/cmdline", "rb") as f:
            data = f.read()
    except OSError:
        return comm
    text = os.fsdecode(data)
    argv: list[str] = []
    if text:  # split as psutil's ``cmdline`` does (a setproctitle()'d one uses spaces)
        sep = "\0" if text.endswith("\0") else " "
        argv = (text[:-1] if text.endswith(sep) else text).split(sep)
        if sep == "\0" and len(argv) == 1 and " " in text:
            argv = text.split(" ")
    name = comm
    if len(comm) >= 15 and argv:
        extended = os.path.basename(argv[0])
        if extended.startswith(comm):
            name = extended
    return _label(name, argv)


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
        self._last: dict[tuple[int, float], tuple[float, str | None]] = {}
        """(pid, create time) -> (CPU seconds at the latest listing, name: None until it used CPU)."""
        self._named_as: dict[tuple[int, float], str] = {}
        """(pid, create time) -> the listed name (``comm``) it had when it was named."""
        self._proc: tuple[float, float] | bool | None = None
        """(clock ticks a second, boot time) where ``/proc`` is read; False: psutil lists."""
        self._t0 = 0.0
        self._wall0 = 0.0
        self._sent: list[str] | None = None
        self._sent_at = 0.0

    def start(self, root_pid: int) -> None:
        if not isinstance(self._source(), tuple):  # no /proc: psutil lists, if there is one
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
        try:
            self._t0, self._wall0 = time.monotonic(), time.time()
            self._read(self._list(), root_pid)
            while not self._stop.wait(self._interval):
                self._read(self._list(), root_pid)
                self._send()
        except Exception:
            return

    def _source(self) -> tuple[float, float] | bool:
        """(clock ticks a second, boot time) where ``/proc`` is read, False where psutil lists."""
        if self._proc is None:
            try:
                self._proc = (float(os.sysconf("SC_CLK_TCK")), _boot_time()) if os.path.isdir(f"{PROC}/self") else False
            except (OSError, ValueError, RuntimeError):
                self._proc = False
        return self._proc

    def _list(self, psutil: Any = None) -> list[Row]:
        """Every process: from ``/proc`` where there is one (Linux), else psutil's listing.
        psutil is imported only for that listing: on Linux the launcher never loads it
        (~30 ms of the parent's CPU at each ``mpsprof run``, psutil's own imports)."""
        source = self._source()
        if isinstance(source, tuple):
            return _proc_rows(*source)
        if psutil is None:
            import psutil
        return _psutil_rows(psutil)

    def _read(self, rows: list[Row], root_pid: int) -> None:
        """Fold one listing into the CPU figures. The training's tree is ``root_pid`` and the
        processes descending from it by the listing's own parent pids: a DataLoader worker is
        the training's even where it or its parent is gone by the time it is read, and no
        second listing is made for the tree. A process is named once, when it has first used
        CPU since the run began: a program that used none adds nothing to any name's figure.
        It is named again if it has exec'd another program since (same pid and start time,
        another listed name): ``sh -c 'exec heavy'`` or a launcher that execs the real work
        would otherwise be charged to its first name for the whole run."""
        parents = {row[0]: row[1] for row in rows}
        tree = {root_pid}
        me = os.getpid()
        first, last, wall0, named_as = self._first, self._last, self._wall0, self._named_as
        for pid, _, created, cpu, comm, proc in rows:
            if cpu is None or pid == 0 or pid == me or _descends(pid, tree, parents):
                continue
            key = (pid, created)
            start = first.get(key)
            if start is None:
                # started during the run: all its CPU time is the run's; else from now on
                start = first[key] = 0.0 if created >= wall0 else cpu
                name = None
            else:
                name = last[key][1]
                if name is not None and named_as.get(key) != comm:
                    name = None  # exec'd since it was named
            if name is None and cpu != start:
                name = _proc_name(pid, comm) if proc is None else _name(proc)
                named_as[key] = comm
            last[key] = (cpu, name)

    def _send(self, min_window: float = MIN_WINDOW_S) -> None:
        window = time.monotonic() - self._t0
        if window < min_window:
            return
        by_name: dict[str, float] = {}
        for key, (cpu, name) in self._last.items():  # one program in several processes: one line
            if name is None:
                continue  # no CPU used since the run began (see _read)
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


def _psutil_rows(psutil: Any) -> list[Row]:
    """Every process psutil may read (a system without ``/proc``: macOS), as rows (:data:`Row`)."""
    rows: list[Row] = []
    for proc in psutil.process_iter(["name", "create_time", "cpu_times", "ppid"]):
        times, created = proc.info.get("cpu_times"), proc.info.get("create_time")
        # one whose times may not be read is listed all the same: its children descend from it
        rows.append((proc.pid, proc.info.get("ppid"), None if created is None else float(created),
                     None if times is None or created is None else float(times.user + times.system),
                     str(proc.info.get("name") or "?"), proc))
    return rows


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
        sampler._read(sampler._list(psutil), me.pid)
        psutil.cpu_percent(None)
        time.sleep(seconds)
        busy = psutil.cpu_percent(None) / 100.0 * logical
        sampler._read(sampler._list(psutil), me.pid)
        window = max(time.monotonic() - sampler._t0, 1e-3)
        mine = (sum(me.cpu_times()[:2]) - mine0) / window
        sampler._send(min_window=0.0)
        top = (sampler._latest or {}).get("top") or []
        return {"others_busy_cores": round(max(0.0, busy - mine), 2), "others_top": top}
    except Exception:
        return None
