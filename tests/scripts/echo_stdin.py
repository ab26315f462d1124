"""Reads stdin line by line and echoes it transformed."""
import sys

n = 0
for line in sys.stdin:
    n += 1
    sys.stdout.write(line.upper())
print("lines", n)
