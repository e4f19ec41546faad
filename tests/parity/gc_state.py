"""The garbage collector runs as under python: on, default thresholds, and it collects cycles."""

import gc

print("enabled:", gc.isenabled())
print("thresholds:", gc.get_threshold())


class Node:
    def __init__(self) -> None:
        self.me = self


collected = []
node = Node()
gc.callbacks.append(lambda phase, info: collected.append(phase))
del node
print("unreachable found:", gc.collect() >= 1)
print("callbacks ran:", "stop" in collected)
