"""The pool's scratch directories: made ahead of requests, removed after their runs, by a
thread of their own.

On some file systems a mkdir or a removal takes a millisecond or more (ext4 without a
journal skips every inode freed in the last minutes, one by one). The pool server's loop
would spend that time instead of reading results and requests; the thread spends it
beside the loop, in system calls that let the loop run. The loop asks for directories
to be made (PoolServer._replenish), and hands over those of runs that ended as soon as
they end, busy or not (PoolServer.serve): a busy pool whose TMPDIR is small (a tmpfs)
would otherwise fill it with what finished runs left, and its next runs would fail.

A directory whose run left it as it was made is not removed but given to a later run
(pynox.pool.scratch_reuse): that costs a few checks and a rename instead of two mkdirs and
two rmdirs.
"""

import os
import stat

from pynox.engine import scratch, scratch_removal
from pynox.errors import PolicyError, PynoxError
from pynox.pool import files as pool_files
from pynox.pool import scratch_reuse

# How long the thread waits for the process of a run that ended to finish exiting, in ms.
_EXIT_WAIT = 2


def make(root: str) -> str:
    """A run's scratch directory in root, with the empty out/ whose files its result
    returns. root is the pool's own: if someone removed it (emptying its TMPDIR, say), it
    is made again."""
    path = scratch.create(own_root(root))
    pool_files.make_out_dir(path)
    return path


def own_root(root: str) -> str:
    """root, once it is seen to be the pool's own directory: made again if it was
    removed; PolicyError if it cannot be, or if something else took its name.

    Everything in it is made by path: a directory another user made under that name
    (it is in /tmp for all to see) would get every run's. In a TMPDIR with the sticky
    bit (scratch.refuse_if_shared) no one else can rename the pool's own once seen."""
    try:
        status = os.lstat(root)
    except OSError:
        status = _make_root_again(root)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise PolicyError(
            f"the pool's scratch directory {root} was removed, and something not the pool's "
            "took its name; restart the pool"
        )
    return root


def _make_root_again(root: str) -> os.stat_result:
    """Makes the pool's directory again where it was, and says what is there now;
    PolicyError if it cannot."""
    try:
        try:
            os.mkdir(root, 0o700)
        except FileExistsError:
            pass  # the other thread of the pool made it meanwhile, or someone else: own_root
        return os.lstat(root)
    except OSError as exc:
        raise PolicyError(
            f"the pool's scratch directory {root} was removed and cannot be made again "
            f"({exc.strerror}); make {os.path.dirname(root)} again, or restart the pool with "
            "TMPDIR set to a writable directory"
        ) from None


def gone(path: "str | None") -> bool:
    """Whether a scratch directory given out is gone (with the pool's root, say), or was
    never made: nothing a sandbox granted it reaches is at its path any more."""
    try:
        return path is None or not stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return True


class ScratchKeeper:
    def __init__(self, root: str) -> None:
        # Imported only now, after the zygote's fork (PoolServer.__init__): threading
        # registers an after-fork hook that every spare would run, and pay for, at its fork.
        import threading

        self.root = root
        self._lock = threading.Lock()
        self._work_to_do = threading.Condition(self._lock)
        self._ready: list[str] = []  # made, or left as made, and not given out
        # Of runs that ended, each with a pidfd of the run's process when there is one:
        # reused if that process has exited and the directory is as made, else removed.
        self._used: list[tuple[str, int | None]] = []
        self._as_made: dict[str, scratch_reuse.Made] = {}  # of those it made
        # Pidfds of other processes that had a directory and may still run (hold).
        self._holders: dict[str, list[int]] = {}
        self._removing = False  # whether the thread may remove what is used
        self._wanted = 0  # how many ready ones the thread makes or reuses now
        self._kept = 0  # keep_ready's count, which take() does not lower
        self._busy: list[str] = []  # the used one the thread works on right now
        self._closed = False
        self._thread = threading.Thread(target=self._work, name="pynox-scratch", daemon=True)
        self._thread.start()

    def take(self) -> str:
        """A directory made ahead; if none is ready, one a run left as made, or one made
        now (raises PolicyError). The thread makes another once keep_ready asks again: not
        while the program that gets this one starts."""
        with self._lock:
            # A directory the thread is making right now still lands among the ready
            # ones; lowering what it keeps stops it from making one more after that.
            self._wanted = min(self._wanted, max(len(self._ready) - 1, 0))
            while self._ready:
                path = self._ready.pop()
                if not gone(path):  # as it is if its root was removed (make)
                    return path
                self._as_made.pop(path, None)
            used = self._claim_used()
        if used is not None:
            # The thread may not have had its turn: a rename costs a fraction of a mkdir.
            reused = self._try_reuse(*used, wait_ms=0)
            if reused is not None:
                return reused
        return self._make()

    def keep_ready(self, count: int) -> None:
        """Asks the thread to keep count directories ready."""
        with self._lock:
            self._wanted = self._kept = count
            if len(self._ready) < count:
                self._work_to_do.notify()

    def discard(self, path: str, pidfd: "int | None" = None) -> None:
        """Hands over the directory of a run that ended, to reuse when the thread needs one
        or remove once remove_used asks. pidfd, of the run's process, becomes the keeper's:
        without one the directory is never reused."""
        with self._lock:
            self._used.append((path, pidfd))

    def hold(self, path: str, pidfd: int) -> None:
        """Keeps a directory from being removed until the process of pidfd (which becomes
        the keeper's) has exited, as well as the one it is handed back with.

        For a session's: its processes have it in turn, and one whose step ended it
        (sys.exit() with a thread still running) lingers while the session goes on or is
        closed. Emptied under a thread of it, a folder the removal holds open could be
        moved to a write grant, and a folder of the grant into it, which the removal
        would then empty with the pool's rights. Processes that exited are let go of
        here, so that a session that starts many holds few descriptors."""
        with self._lock:
            self._as_made.pop(path, None)  # never reused either
            holders = self._holders.setdefault(path, [])
            for held in [fd for fd in holders if scratch_reuse.exited(fd)]:
                holders.remove(held)
                os.close(held)
            holders.append(pidfd)

    def never_reuse(self, path: str) -> None:
        """Keeps a directory that take() gave from ever going to another run: it is
        removed once handed back. For a session's: it outlives a process that ended (a
        timeout, sys.exit()) and goes to the next one, so the exit of the process it is
        handed back with says nothing of an earlier one, which may still linger."""
        with self._lock:
            self._as_made.pop(path, None)

    def remove(self, path: str) -> None:
        """Removes, now, a directory that take() gave and its run will not have."""
        with self._lock:
            self._as_made.pop(path, None)
            holders = self._holders.pop(path, [])
        scratch_removal.remove(path)
        for pidfd in holders:
            os.close(pidfd)

    def used(self) -> int:
        """How many wait for remove_used, counting one the thread holds to reuse: it gives
        that one back if it cannot, and the pool's loop, which sleeps without a deadline
        while this is 0, would not learn of it until its next request."""
        with self._lock:
            return 0 if self._removing else len(self._used) + len(self._busy)

    def remove_used(self) -> None:
        """Asks the thread to remove what runs left."""
        with self._lock:
            if self._used:
                self._removing = True
                self._work_to_do.notify()

    def directories(self) -> "list[str]":
        """Every directory it holds: ready, used, or being made or removed."""
        with self._lock:
            return self._ready + [path for path, _ in self._used] + self._busy

    def close(self) -> None:
        """Stops the thread and removes every directory it holds."""
        with self._lock:
            self._closed = True
            self._work_to_do.notify()
        self._thread.join()
        for path in self.directories():
            scratch_removal.remove(path)
        for _, pidfd in self._used:
            _close(pidfd)
        for holders in self._holders.values():
            for pidfd in holders:
                os.close(pidfd)
        self._ready.clear()
        self._used.clear()
        self._holders.clear()

    def _make(self) -> str:
        path = make(self.root)
        as_made = scratch_reuse.made(path)
        if as_made is not None:
            with self._lock:
                self._as_made[path] = as_made
        return path

    def _next(self) -> "tuple[str, tuple[str, int | None] | None]":
        """What to do next, waiting until there is something: "make" a directory, "reuse"
        a used one (_reuse_or_make), "tidy" one (_tidy), or "stop"."""
        with self._lock:
            while True:
                if self._closed:
                    return "stop", None
                if len(self._ready) < self._wanted:
                    used = self._claim_used()
                    return ("make", None) if used is None else ("reuse", used)
                if self._removing and self._used:
                    used = self._used.pop()
                    self._busy.append(used[0])
                    return "tidy", used
                self._removing = False
                self._work_to_do.wait()

    def _work(self) -> None:
        while True:
            action, used = self._next()
            if action == "stop":
                return
            if used is None:
                self._make_ready()
            elif action == "reuse":
                self._reuse_or_make(*used)
            else:
                self._tidy(*used)

    def _make_ready(self) -> None:
        try:
            path = self._make()
        except (PynoxError, OSError):
            # Nothing ready: take() makes one itself, and says why it cannot.
            with self._lock:
                self._wanted = 0
            return
        with self._lock:
            self._ready.append(path)

    def _claim_used(self) -> "tuple[str, int | None] | None":
        """A used directory that may be reused, oldest first (its process has had the
        longest to exit), marked busy; the caller holds the lock."""
        for index, (path, pidfd) in enumerate(self._used):
            if pidfd is not None and path in self._as_made:
                del self._used[index]
                self._busy.append(path)
                return path, pidfd
        return None

    def _reuse_or_make(self, path: str, pidfd: "int | None") -> None:
        reused = self._try_reuse(path, pidfd, _EXIT_WAIT)
        if reused is None:
            self._make_ready()
            return
        with self._lock:
            self._ready.append(reused)

    def _try_reuse(self, path: str, pidfd: "int | None", wait_ms: int) -> "str | None":
        """A claimed used directory under its new name, if its run's process has exited
        (waiting up to wait_ms) and left it as made. Else None, and it goes back among the
        used: with its pidfd while the process still exits (a run ends when its program
        announces it, a moment before), without one if changed, to be removed."""
        reused = None
        if pidfd is not None and scratch_reuse.exited(pidfd, wait_ms):
            _close(pidfd)
            pidfd = None
            reused = self._reuse(path)
        with self._lock:
            self._busy.remove(path)
            if reused is None and pidfd is None:
                self._used.insert(0, (path, None))
            elif reused is None:
                self._used.append((path, pidfd))
        return reused

    def _tidy(self, path: str, pidfd: "int | None") -> None:
        """Reuses a used directory while fewer than twice keep_ready's count are ready (the
        next run takes one, and the thread, asked for another at once, finds it there),
        else removes it; either once its run's process has exited.

        Killed as its run ended, that process may still be in system calls that make
        entries there (a thread of it each), and what they make after the removal has
        listed the directory would stay until the pool ends. So a directory whose process
        has not exited yet goes back among the used, and this round of removals ends: the
        pool's loop asks for the next one in a moment (_TIDY_AGAIN)."""
        if not self._all_exited(path, pidfd):
            with self._lock:
                self._busy.remove(path)
                self._used.insert(0, (path, pidfd))  # the others first, next round
                self._removing = False
            return
        with self._lock:
            wanted = len(self._ready) < 2 * self._kept
        reused = self._reuse(path) if wanted and pidfd is not None else None
        _close(pidfd)
        if reused is None:
            self.remove(path)
        with self._lock:
            self._busy.remove(path)
            if reused is not None:
                self._ready.append(reused)

    def _all_exited(self, path: str, pidfd: "int | None") -> bool:
        """Whether the process of pidfd (if any) and every other that held the directory
        (hold) have exited, waiting a moment for the first."""
        if pidfd is not None and not scratch_reuse.exited(pidfd, _EXIT_WAIT):
            return False
        with self._lock:
            holders = list(self._holders.get(path, ()))
        return all(scratch_reuse.exited(held) for held in holders)

    def _reuse(self, path: str) -> "str | None":
        """The used directory under its new name, if its run left it as made (its process
        has exited: scratch_reuse)."""
        with self._lock:
            as_made = self._as_made.get(path)
        if as_made is None:
            return None
        reused = scratch_reuse.reuse(path, as_made)
        with self._lock:
            del self._as_made[path]
            if reused is None:
                return None
            self._as_made[reused[0]] = reused[1]
        return reused[0]


def _close(fd: "int | None") -> None:
    if fd is not None:
        os.close(fd)
