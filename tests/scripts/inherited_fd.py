"""Writes to descriptor 3, which the shell opened for it (``python s.py 3>file``)."""
import os

os.write(3, b"written to fd 3\n")
print("wrote to fd 3")
