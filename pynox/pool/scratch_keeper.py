"""The pool's scratch directories: made ahead of requests, removed after their runs, by a
thread of their own.

On some file systems a mkdir or a removal takes a millisecond or more (ext4 without a
journal skips every inode freed in the last minutes, one by one). The pool server's loop
would spend that time instead of reading results and requests; the thread spends it
beside the loop, in system calls that let the loop run. The loop still decides when the
work is done (see PoolServer._replenish and PoolServer.serve), so that it does not
compete with a program that just started.
"""

from pynox.engine import scratch, scratch_removal
from pynox.errors import PynoxError
from pynox.pool import files as pool_files


def make(root: str) -> str:
    """A run's scratch directory in root, with the empty out/ whose files its result
    returns."""
    path = scratch.create(root)
    pool_files.make_out_dir(path)
    return path


class ScratchKeeper:
    def __init__(self, root: str) -> None:
        # Imported only now, after the zygote's fork (PoolServer.__init__): threading
        # registers an after-fork hook that every spare would run, and pay for, at its fork.
        import threading

        self.root = root
        self._lock = threading.Lock()
        self._work_to_do = threading.Condition(self._lock)
        self._ready: list[str] = []  # made, never used
        self._used: list[str] = []  # of runs that ended, to remove
        self._removing = False  # whether the thread may remove what is used
        self._wanted = 0  # how many ready ones the thread keeps
        self._busy: list[str] = []  # the one the thread makes or removes right now
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="pynox-scratch", daemon=True)
        self._thread.start()

    def take(self) -> str:
        """A directory made ahead, or one made now if none is ready (raises PolicyError).
        The thread makes another once keep_ready asks again: not while the program that
        gets this one starts."""
        with self._lock:
            # A directory the thread is making right now still lands among the ready
            # ones; lowering what it keeps stops it from making one more after that.
            self._wanted = min(self._wanted, max(len(self._ready) - 1, 0))
            if self._ready:
                return self._ready.pop()
        return make(self.root)

    def give_back(self, path: str) -> None:
        """Takes back a directory that take() gave and nothing used."""
        with self._lock:
            self._ready.append(path)

    def keep_ready(self, count: int) -> None:
        """Asks the thread to keep count directories ready."""
        with self._lock:
            self._wanted = count
            if len(self._ready) < count:
                self._work_to_do.notify()

    def discard(self, path: str) -> None:
        """Hands over the directory of a run that ended, to remove once remove_used asks."""
        with self._lock:
            self._used.append(path)

    def used(self) -> int:
        """How many wait for remove_used."""
        with self._lock:
            return 0 if self._removing else len(self._used)

    def remove_used(self) -> None:
        """Asks the thread to remove what runs left."""
        with self._lock:
            if self._used:
                self._removing = True
                self._work_to_do.notify()

    def directories(self) -> "list[str]":
        """Every directory it holds: ready, used, or being made or removed."""
        with self._lock:
            return self._ready + self._used + self._busy

    def close(self) -> None:
        """Stops the thread and removes every directory it holds."""
        with self._lock:
            self._closed = True
            self._work_to_do.notify()
        self._thread.join()
        for path in self.directories():
            scratch_removal.remove(path)
        self._ready.clear()
        self._used.clear()

    def _next(self) -> "tuple[str, str | None]":
        """What to do next ("make", "remove" or "stop"), waiting until there is something."""
        with self._lock:
            while True:
                if self._closed:
                    return "stop", None
                if len(self._ready) < self._wanted:
                    return "make", None
                if self._removing and self._used:
                    path = self._used.pop()
                    self._busy.append(path)
                    return "remove", path
                self._removing = False
                self._work_to_do.wait()

    def _work(self) -> None:
        while True:
            action, path = self._next()
            if action == "stop":
                return
            if action == "remove" and path is not None:
                scratch_removal.remove(path)
                with self._lock:
                    self._busy.remove(path)
                continue
            try:
                made = make(self.root)
            except (PynoxError, OSError):
                # Nothing ready: take() makes one itself, and says why it cannot.
                with self._lock:
                    self._wanted = 0
                continue
            with self._lock:
                self._ready.append(made)
