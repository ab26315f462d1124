"""The memory sampler's process tree (mpsprofiler/probe/procfs.py ``descendants``).

On Linux it reads ``/proc/<pid>/task/<tid>/children`` instead of psutil's
``children(recursive=True)``, which reads every process on the machine at every sample
(1.8 ms with 65 processes, holding the GIL the training needs for part of it). It must
find what psutil finds: grandchildren, and children started from another thread.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

from mpsprofiler.probe.procfs import descendants

pytestmark = pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"),
                                reason="no /proc children files (not Linux, or a kernel without them)")

SLEEPER = [sys.executable, "-c", "import time; time.sleep(30)"]
PARENT = [sys.executable, "-c", "import subprocess, sys, time; "
          "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"]


def test_the_tree_is_what_psutil_finds_grandchildren_and_thread_started_children_included() -> None:
    started: list[subprocess.Popen[bytes]] = [subprocess.Popen(PARENT)]
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(SLEEPER)))
    thread.start()
    thread.join()
    try:
        deadline = time.monotonic() + 20
        while len(psutil.Process().children(recursive=True)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)  # the grandchild is started by the child's own python
        expected = sorted(p.pid for p in psutil.Process().children(recursive=True))
        found = descendants(os.getpid())
        assert len(expected) >= 3
        assert sorted(found) == expected
    finally:
        for p in psutil.Process().children(recursive=True):
            p.kill()
        for p in started:
            p.wait()


def test_a_process_without_children_has_none() -> None:
    done = subprocess.run([sys.executable, "-c", "import os, sys; sys.path.insert(0, os.getcwd()); "
                           "from mpsprofiler.probe.procfs import descendants; print(descendants(os.getpid()))"],
                          capture_output=True, text=True, timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert done.stdout.strip() == "{}", done.stderr
