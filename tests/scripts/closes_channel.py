"""Closes every inherited descriptor mid-run (as daemonizing code does), then keeps
stepping. argv[1] == "nodisk": first forbids itself to write files (a full disk), so the
profiler cannot keep the later events anywhere either."""
import os
import resource
import sys
import time

import mpsprofiler

if sys.argv[1:] == ["nodisk"]:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
for i in range(50):
    mpsprofiler.step()
time.sleep(0.4)  # the first 50 steps go out through the event channel
os.closerange(3, 256)
for i in range(300):
    mpsprofiler.step()
    time.sleep(0.001)
print("done")
