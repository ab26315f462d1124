"""Prints, warns and raises text that Rich would read as markup: ``[/x]`` closing tags.

A TUI that shows any of it as markup crashes with MarkupError; the training must not care.
"""

import sys
import time
import warnings

print("args:", sys.argv[1:], flush=True)
print("[/x] a closing tag, [bold]bold?[/] and an open [red", flush=True)
warnings.warn("config value [/] ignored")
time.sleep(0.3)
raise FileNotFoundError("no data in [/data/train]")
