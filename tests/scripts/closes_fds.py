"""Closes every inherited descriptor (as daemonizing code does), then opens files of its
own, which may get the numbers just freed, warns (events for the profiler), and checks
that its files hold exactly what it wrote."""
import os
import tempfile
import time
import warnings

os.closerange(3, 64)
folder = tempfile.mkdtemp(prefix="closes-fds-")
files = [open(os.path.join(folder, f"f{n}"), "w") for n in range(12)]
for n in range(40):
    warnings.warn(f"warning number {n}")
time.sleep(0.8)  # several flushes of the event channel
for n, fh in enumerate(files):
    fh.write(f"file {n}\n")
    fh.close()
contents = sorted(open(os.path.join(folder, f"f{n}")).read() for n in range(12))
print("intact", contents == sorted(f"file {n}\n" for n in range(12)))
for n in range(12):
    os.unlink(os.path.join(folder, f"f{n}"))
os.rmdir(folder)
