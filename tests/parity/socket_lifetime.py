"""A socket the program drops is freed and closed there and then, with the
ResourceWarning python gives for an unclosed socket: nothing else holds it."""

import gc
import os
import socket
import warnings

first, second = socket.socketpair()
first.close()
descriptor = second.fileno()
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", ResourceWarning)
    del second
    gc.collect()
print("warned:", [type(w.message).__name__ for w in caught])
try:
    os.fstat(descriptor)
except OSError as exc:
    print("descriptor closed:", exc.strerror)
else:
    print("descriptor still open")
