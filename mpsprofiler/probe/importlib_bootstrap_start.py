"""The child's start program: ``python THIS_FILE TARGET ARGS...`` (see launcher/child.py)
for what launcher/start_code.py does not compile into a self-starting script: ``-m``
modules, directories and zip files, scripts that do not compile.

It runs as the interpreter's ``__main__`` and executes the script's code object from
its own module frame, so exactly one frame of mpsprof's sits below the script's (plain
``python`` has none; ``boot.main`` and ``exec`` wrappers would add more). That frame:

* is skipped by ``warnings.warn(..., stacklevel=N)``: CPython skips a frame whose file
  name contains ``importlib`` and ``_bootstrap`` (``is_internal_filename`` in
  Python/_warnings.c), and this file's name contains both, so a stacklevel that goes
  past the script's top level ends at ``sys:1`` as under python, instead of at a
  ``__main__`` frame of ours that the default filter would show;
* is removed from the exit traceback (the boot drops mpsprof's frames);
* costs one recursion level: the limit is raised by what the start adds (``sys.
  getrecursionlimit()`` then reads that much more than python's, the usable depth is
  python's).

``sys.path[0]`` (this file's directory, unless ``PYTHONSAFEPATH``) is removed before
anything is imported; this package's own home is added at the end only if nothing else
provides it, and removed again. The boot then sets ``sys.path[0]`` the way ``python
SCRIPT`` would.
"""

import sys

startup = set(sys.modules)
getattr(sys.flags, "safe_path", False) or sys.path.pop(0)
home = __file__.rsplit("/", 3)[0]
added = home not in sys.path
if added:
    sys.path.append(home)
from mpsprofiler.probe import boot  # noqa: E402 - sys.path is fixed first

if added:
    sys.path.remove(home)
job = boot.prepare(sys.argv[1:], startup=startup)
del added, home, startup
try:
    job.run()
except SystemExit:
    job.close()
    raise
except BaseException as exc:  # noqa: BLE001 - the boot re-creates Python's handling
    job.fail(exc)
job.close()
