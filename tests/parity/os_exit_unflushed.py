import atexit
import os
import sys

atexit.register(print, "atexit never runs after os._exit")
print("flushed line")
sys.stdout.flush()
print("buffered line, lost by os._exit on a pipe")
sys.stderr.write("stderr is line-buffered\n")
os._exit(4)
