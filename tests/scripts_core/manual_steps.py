"""A custom loop marks its own steps with mpsprofiler.step()."""
import time

import mpsprofiler

for _ in range(12):
    time.sleep(0.002)
    mpsprofiler.step()
