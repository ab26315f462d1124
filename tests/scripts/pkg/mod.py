"""Run as ``-m pkg.mod``."""
import os
import sys

print("argv", sys.argv)
print("path0", sys.path[0])
print("name", __name__, __spec__.name, __package__)
print("cwd", os.getcwd())
if "--raise" in sys.argv:
    def inner():
        raise RuntimeError("from a module")
    inner()
if __name__ == "__main__":
    print("guarded block ran")
