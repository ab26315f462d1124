"""Asks a question with input(), then stops at breakpoint(): a user debugging a script."""
import time

print("before the question", flush=True)
name = input("your name? ")
print("hello", name, flush=True)
x = 41
breakpoint()
print("x is", x, flush=True)
time.sleep(0.5)
print("done", flush=True)
