"""Periodic memory and CPU sampling on a daemon thread.

Process figures include the DataLoader worker children (their RSS is real memory the
training costs, and copy-on-read growth shows there first). CPU utilisation is the
process tree's CPU seconds over wall seconds, in percent of one core.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from .. import events
from ..devices import DeviceBackend

FAST_INTERVAL = 0.5
SLOW_INTERVAL = 2.0
SLOW_AFTER = 600.0
"""After ten minutes a sample every 2 s is plenty and keeps long recordings small."""


class MemorySampler:
    def __init__(
        self,
        emit: Callable[..., None],
        backend_fn: Callable[[], DeviceBackend],
        clock: Callable[[], float],
        on_error: Callable[[BaseException], None],
        before_sample: Callable[[], None] | None = None,
    ) -> None:
        import psutil

        self._on_error = on_error
        self._before_sample = before_sample
        self._psutil = psutil
        self._emit = emit
        self._backend_fn = backend_fn
        self._clock = clock
        self._proc = psutil.Process()
        self._stop = threading.Event()
        self._cpu_prev: tuple[float, float] | None = None
        self._children: dict[int, Any] = {}
        self._thread = threading.Thread(target=self._run, name="mpsprof-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        started = self._clock()
        while not self._stop.is_set():
            try:
                if self._before_sample is not None:
                    self._before_sample()
                self.sample()
            except Exception as exc:
                # reported once, through the probe (it then knows the instrument is off
                # and takes no final sample either)
                self._on_error(exc)
                return
            interval = FAST_INTERVAL if self._clock() - started < SLOW_AFTER else SLOW_INTERVAL
            self._stop.wait(interval)

    def _tree(self) -> list[Any]:
        """The process and its live children, reusing Process objects (cpu_times deltas)."""
        procs = [self._proc]
        try:
            kids = self._proc.children(recursive=True)
        except self._psutil.Error:
            kids = []
        alive: dict[int, Any] = {}
        for kid in kids:
            alive[kid.pid] = self._children.get(kid.pid, kid)
        self._children = alive
        procs.extend(alive.values())
        return procs

    def sample(self) -> None:
        ps = self._psutil
        rss = 0
        rss_children = 0
        cpu_total = 0.0
        procs = self._tree()
        for n, proc in enumerate(procs):
            try:
                with proc.oneshot():
                    mem = proc.memory_info().rss
                    times = proc.cpu_times()
            except ps.Error:
                continue
            cpu_total += times.user + times.system
            if n == 0:
                rss = mem
            else:
                rss_children += mem
        now = time.monotonic()
        cpu_pct = None
        if self._cpu_prev is not None:
            dt = now - self._cpu_prev[0]
            if dt > 0:
                cpu_pct = max(0.0, (cpu_total - self._cpu_prev[1]) / dt * 100.0)
        self._cpu_prev = (now, cpu_total)
        vm = ps.virtual_memory()
        try:
            swap_used = ps.swap_memory().used
        except Exception:
            swap_used = None
        fields: dict[str, Any] = {
            "rss": rss,
            "rss_children": rss_children,
            "workers": len(procs) - 1,
            "sys_available": vm.available,
            "sys_total": vm.total,
            "swap_used": swap_used,
            "cpu_pct": None if cpu_pct is None else round(cpu_pct, 1),
        }
        try:
            figures = self._backend_fn().memory()
        except Exception:
            figures = None
        if figures is not None:
            fields["device"] = figures.as_dict()
        self._emit(events.KIND_MEM, **fields)
