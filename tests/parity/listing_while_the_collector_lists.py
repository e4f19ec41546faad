"""Folders listed while a listing is under way: by another thread, or, as here, by a
callback the garbage collector runs at almost every allocation. Each listing behaves as
under python (a missing folder is FileNotFoundError, nothing else)."""

import gc
import os


def list_again(phase: str, info: dict) -> None:
    if phase == "start":
        os.listdir(".")  # a folder listed already


os.listdir(".")
gc.callbacks.append(list_again)
threshold = gc.get_threshold()
gc.set_threshold(1)
failures = []
for number in range(300):
    try:
        os.listdir(f"no-such-folder-{number}")
    except FileNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - what python never raises here
        failures.append(repr(exc))
gc.set_threshold(*threshold)
gc.callbacks.remove(list_again)
print("listings that failed otherwise than python's:", len(failures), failures[:1])
