import atexit
import sys

atexit.register(print, "atexit still runs")


def wait_for_user():
    raise KeyboardInterrupt


print("press ctrl-c")
sys.stdout.flush()
wait_for_user()
