"""Prints about 1 MB in 2,000 lines, then "done": more than a tiny disk holds."""
import sys

line = "x" * 499
for i in range(2000):
    print(f"{i:5d} {line}")
print("done", file=sys.stderr)
