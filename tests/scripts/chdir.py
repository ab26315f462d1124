"""Changes the working directory, then imports a sibling and writes a relative file."""
import os
import shutil
import tempfile

start = os.getcwd()
work = tempfile.mkdtemp(prefix="chdir-test-")
os.chdir(work)
import sibling_mod  # noqa: E402  (found through sys.path[0], which must be absolute)

with open("relative.txt", "w") as fh:
    fh.write("x")
print("moved", os.getcwd() != start, os.path.exists(os.path.join(work, "relative.txt")), sibling_mod.VALUE)
print("file exists after chdir", os.path.exists(__file__))
os.chdir(start)
shutil.rmtree(work)
