"""Ends in the way named by argv[1]; prints a little to both streams first."""
import atexit
import os
import signal
import sys
import threading
import time

mode = sys.argv[1]
print("out before", mode)
sys.stderr.write("err before\n")
sys.stdout.flush()


def deep(n):
    if n == 0:
        try:
            {}["missing"]
        except KeyError as exc:
            raise ValueError("outer failure") from exc
    deep(n - 1)


if mode == "fall_off":
    pass
elif mode in ("0", "1", "2"):
    sys.exit(int(mode))
elif mode == "message":
    sys.exit("fatal: a message for stderr")
elif mode == "os_exit":
    os._exit(3)
elif mode in ("SIGTERM", "SIGKILL"):
    os.kill(os.getpid(), getattr(signal, mode))
    time.sleep(10)
elif mode == "raise":
    deep(3)
elif mode == "keyboard":
    atexit.register(lambda: print("atexit ran", flush=True))

    def late():
        time.sleep(0.2)
        print("thread finished", flush=True)

    threading.Thread(target=late).start()
    raise KeyboardInterrupt
print("end")
