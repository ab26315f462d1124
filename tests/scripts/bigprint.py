"""Writes argv[1] MB to stdout in numbered lines."""
import sys

megabytes = int(sys.argv[1])
line = b"%09d " + b"x" * 1013 + b"\n"  # 1024 bytes per line
out = sys.stdout.buffer
for i in range(megabytes * 1024):
    out.write(line % i)
out.flush()
sys.stderr.write("done\n")
