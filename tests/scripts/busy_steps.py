"""Many cheap steps marked with mpsprofiler.step() (a no-op under plain python): lots of
events without torch. argv: steps, seconds to sleep every 1000 steps, exit status."""
import sys
import time

import mpsprofiler

steps, pause, status = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
print("ready", flush=True)
total = 0
for i in range(steps):
    total += i * i % 7
    mpsprofiler.step()
    if i % 1000 == 0:
        print("progress", i, flush=True)
        time.sleep(pause)
print("done", total, flush=True)
sys.exit(status)
