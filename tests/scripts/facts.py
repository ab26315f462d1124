"""Prints what a script can see of how it was started; must match plain python."""
import hashlib
import os
import subprocess
import sys

print("argv", sys.argv)
print("path0", sys.path[0])
print("file", __file__)
print("cwd", os.getcwd())
print("name", __name__)
print("globals", sorted(k for k in globals() if k.startswith("__")), type(__builtins__).__name__,
      __package__, __spec__, type(__loader__).__name__, __cached__)
print("main module", sys.modules["__main__"].__dict__ is globals())
print("orig_argv", sys.orig_argv[1:])
print("torch loaded", sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")))
print("mpsprof env", sorted(k for k in os.environ if "MPSPROF" in k))
print("flags", sys.flags.optimize, sys.flags.inspect, sys.flags.dont_write_bytecode)
data = sys.stdin.buffer.read()
print("stdin", len(data), hashlib.sha256(data).hexdigest())
import sibling_mod  # noqa: E402

print("import", sibling_mod.VALUE)
sys.stdout.flush()
# a grandchild through a shell inherits every inheritable descriptor: the same set as under python
os.system(f"{sys.executable} -c \"import os; print('fds', sorted(os.listdir('/proc/self/fd')))\"")
out = subprocess.run([sys.executable, "-c", "import os, sys; print(sorted(k for k in os.environ if 'MPSPROF' in k)); sys.stderr.write('child err\\n')"],
                     capture_output=True, text=True)
print("subprocess", out.stdout.strip(), out.stderr.strip(), out.returncode)

if __name__ == "__main__":
    print("guarded block ran")
