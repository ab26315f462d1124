"""Says it is ready, then sleeps until interrupted. With --twice it catches the first
KeyboardInterrupt and reports whether a second one arrives."""
import sys
import time

print("ready", flush=True)
if "--twice" in sys.argv:
    try:
        time.sleep(30)
    except KeyboardInterrupt:
        pass
    try:
        time.sleep(1.0)
        print("interrupted once")
    except KeyboardInterrupt:
        print("interrupted twice")
    sys.exit(0)
time.sleep(30)
print("not interrupted")
