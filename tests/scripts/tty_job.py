"""A script run from a terminal: is it the foreground job? --getpass reads a password
from the terminal (stdin may be a pipe); then it sleeps until interrupted, catching the
first KeyboardInterrupt and reporting whether a second one arrives."""
import getpass
import os
import sys
import time

tty = os.open("/dev/tty", os.O_RDWR)
print("ready", "foreground" if os.tcgetpgrp(tty) == os.getpgrp() else "background", os.getpid(), flush=True)
if "--getpass" in sys.argv:
    secret = getpass.getpass("secret: ")
    print("got", secret[::-1], flush=True)
try:
    for tick in range(200):
        time.sleep(0.1)
        if tick % 10 == 9:
            print("tick", flush=True)
    print("not interrupted")
    sys.exit(0)
except KeyboardInterrupt:
    pass
try:
    time.sleep(1.0)
    print("interrupted once")
except KeyboardInterrupt:
    print("interrupted twice")
