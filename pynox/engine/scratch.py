"""Each run's scratch directory: private, empty at the start, gone at the end.

Libraries write caches and temporary files where TMPDIR and HOME point
(tempfile, matplotlib's configuration and font cache, SQLite's temporary
files), whatever the program's own grants. So every run (a session: for its
life) gets a fresh directory it may read and write, named by those variables,
and removed once the run is over.
"""

import posix

from pynox import lean_os
from pynox.engine.launcher_link import launcher_pipes

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy

# Where libraries look for a writable place: tempfile and SQLite read TMPDIR (tempfile
# also TEMP and TMP); matplotlib, fontconfig and others fall back on HOME.
VARIABLES = ("TMPDIR", "TEMP", "TMP", "HOME")
PREFIX = "pynox-run-"
# What the helper that removes a directory once its owner ends runs ($0: the directory).
# Set by the launcher, when it started a helper of its own (runtime/launcher_scratch.c):
# "PATH,MADE:PID", the pipe to name the directory to remove on, and the one on which the
# helper names the directory it made for the run.
LAUNCHER_HELPER_VARIABLE = "PYNOX_SCRATCH_HELPER"
_NAME_LENGTH = len(PREFIX) + 12  # PREFIX and 6 random bytes in hexadecimal
# A program may make a folder its owner cannot list (os.mkdir(path, 0o300)), where rm
# cannot go: such folders get their owner's rights back first (find never follows a link;
# nothing of the run is left to swap one in by then). The pipe also ends when the program
# closes its descriptors (os.closerange(3, ...)) while it runs: the helper then waits for
# the process that started it ($1), whose child it stays until that ends, to end. Named, not
# taken from $PPID: that process may end before the shell starts, which then finds its
# parent is init and would wait for ever.
HELPER_SCRIPT = (
    "while read -r _; do :; done; "
    'while read -r _ _ _ parent _ </proc/$$/stat && [ "$parent" = "$1" ]; do sleep 0.1; done; '
    'rm -rf -- "$0" || '
    '{ find "$0" -type d ! -perm -700 -exec chmod u+rwx {} \\; ; exec rm -rf -- "$0"; }'
)


def attach(policy: "Policy", base: "str | None" = None, ready: "str | None" = None) -> str:
    """Grants the run's scratch directory to `policy`: `ready`, one made ahead and never
    used, or a new one (in `base`, if given).

    A variable the host passes in itself (allow_env) keeps the host's value.
    """
    path = ready if ready is not None else create(base)
    policy.scratch = path
    for name in VARIABLES:
        if name not in policy.allow_env:
            policy.environment[name] = path
    return path


FALLBACK_BASE = "/tmp"  # where runs without TMPDIR make theirs


def _named_base() -> str:
    """TMPDIR when it names a directory, else /tmp, as named."""
    base = lean_os.getenv("TMPDIR") or FALLBACK_BASE
    if not lean_os.isabs(base) or not lean_os.isdir(base):
        base = FALLBACK_BASE
    return base


def default_base() -> str:
    """Where a run makes its scratch directory: TMPDIR when it names a directory, else /tmp;
    resolved, since the sandbox grants the directory itself, not a link to it."""
    return lean_os.realpath(_named_base())


def bases() -> "tuple[str, ...]":
    """Where this run and others make their scratch directories: its own base, as named (a
    later run finds it through the links on the way, which a grant could replace), and
    /tmp, where every run without TMPDIR does."""
    return tuple(dict.fromkeys((_named_base(), FALLBACK_BASE)))


def holds_scratch(folder: str, bases: "tuple[str, ...]") -> bool:
    """Whether the real path folder is, or holds, one of the folders where runs make their
    scratch directories (bases, resolved here): reading it reaches what other runs keep
    there. / holds them all."""
    for base in bases:
        real = lean_os.realpath(base)
        if real == folder or real.startswith(folder.rstrip("/") + "/"):
            return True
    return False


def create(base: "str | None" = None) -> str:
    """A new directory only this user can enter, in `base` or the host's temporary directory."""
    if base is None:
        base = default_base()
        refuse_if_shared(base)
        made = _made_by_launcher(base)
        if made is not None:
            return made
    while True:
        path = new_name(base)
        try:
            posix.mkdir(path, 0o700)
        except FileExistsError:
            continue
        except OSError as exc:
            from pynox.errors import PolicyError

            raise PolicyError(
                f"cannot create the run's scratch directory in {base}: {exc.strerror}; "
                "set TMPDIR to a writable directory"
            ) from None
        return path


def refuse_if_shared(base: str) -> None:
    """Raises PolicyError if every user may rename what `base` holds.

    Then another user could swap a run's directory for one of their own between its
    mkdir and its use (its grant, HOME, the files a pool places and returns), all by
    path. So it is when `base`, or a directory above it, lets every user write to it
    without the sticky bit (/tmp has it: only an entry's owner may rename that entry).
    A directory's owner, and a group it lets write, are trusted with what it holds.
    """
    directory = base
    while True:
        try:
            mode = posix.lstat(directory).st_mode
        except OSError:
            return  # the mkdir says what is wrong
        if mode & _WRITABLE_BY_ALL and not mode & _STICKY:
            from pynox.errors import PolicyError

            what = f"the temporary directory {base}"
            if directory != base:
                what = f"{directory}, which holds {what},"
            raise PolicyError(
                f"{what} is writable by every user and has no sticky bit: another user "
                "could swap a run's scratch directory there for one of their own; set "
                f"TMPDIR to a directory only you can write, or run chmod +t {directory}"
            )
        if directory == lean_os.SEP:
            return
        directory = lean_os.dirname(directory)


_WRITABLE_BY_ALL = 0o002
_STICKY = 0o1000


_helper_pipes: "list[int] | None" = None
_helper_pipes_taken = False


def _launcher_helper_pipes() -> "list[int] | None":
    """The helper's pipes [PATH, MADE], taken out of the environment once."""
    global _helper_pipes, _helper_pipes_taken
    if not _helper_pipes_taken:
        _helper_pipes_taken = True
        # Set for this very process: the launcher's child, which exec made the interpreter.
        _helper_pipes = launcher_pipes(LAUNCHER_HELPER_VARIABLE, posix.getpid(), 2)
    return _helper_pipes


def new_name(base: str) -> str:
    """A name for a scratch directory in `base`: random, so that no program can guess it."""
    return lean_os.join(base, PREFIX + posix.urandom(6).hex())


def _made_by_launcher(base: str) -> "str | None":
    """The directory the launcher's helper made in `base` while the interpreter started,
    if it did and it is one this user owns there; else None (then pynox makes its own).

    Read once: the pipe is closed after, whatever it held.
    """
    pipes = _launcher_helper_pipes()
    if pipes is None or pipes[1] < 0:
        return None
    fd, pipes[1] = pipes[1], -1
    try:
        line = posix.read(fd, _NAME_LENGTH + 2)  # written at once, before the helper closes it
    except OSError:
        return None
    finally:
        posix.close(fd)
    name = line[:-1].decode("ascii", "replace")
    digits = name[len(PREFIX) :]
    well_formed = (
        len(line) == _NAME_LENGTH + 1
        and line.endswith(b"\n")
        and name.startswith(PREFIX)
        and all(c in "0123456789abcdef" for c in digits)
    )
    if not well_formed:
        return None
    path = lean_os.join(base, name)
    try:
        status = posix.lstat(path)
    except OSError:
        return None  # made where TMPDIR pointed then, not where it resolves now
    is_directory = status.st_mode & 0o170000 == 0o040000  # S_ISDIR, not a link
    if not is_directory or status.st_uid != posix.geteuid() or status.st_mode & 0o077:
        return None
    return path


def hand_to_launcher_helper(path: str) -> "int | None":
    """Names `path` to the helper the launcher started (runtime/launcher_scratch.c), which
    removes it once this process ends; returns the pipe to keep open, or None when
    pynox was not started by its launcher."""
    pipes = _launcher_helper_pipes()
    if pipes is None or pipes[0] < 0:
        return None
    fd, pipes[0] = pipes[0], -1
    try:
        posix.write(fd, lean_os.fsencode(path) + b"\n")
    except OSError:
        posix.close(fd)
        return None
    return out_of_the_way(fd)


def remove_when_gone(path: str) -> int:
    """For a run in this very process: a helper removes `path` once this process ends.

    A confined process may empty its scratch directory but never remove it (that
    is a change to the directory above, which it may not write). The helper waits
    in its own session, away from the terminal's signals, for the end of a pipe
    whose other end this process holds until it exits, however it exits. It is the
    launcher's, if pynox was started by it, else a /bin/sh started here. Returns the
    pipe's descriptor, which the sandbox must keep open.
    """
    launcher_helper = hand_to_launcher_helper(path)
    if launcher_helper is not None:
        return launcher_helper
    from pynox.policy.system_paths import HELPER_COMMAND_FOLDERS, HELPER_SHELL

    read_end, write_end = posix.pipe()
    try:
        posix.posix_spawn(
            HELPER_SHELL,
            helper_arguments(path, posix.getpid()),
            {"PATH": ":".join(HELPER_COMMAND_FOLDERS)},
            file_actions=[
                (posix.POSIX_SPAWN_DUP2, read_end, 0),
                (posix.POSIX_SPAWN_OPEN, 1, "/dev/null", posix.O_WRONLY, 0),
                (posix.POSIX_SPAWN_DUP2, 1, 2),
                *_inherited_closed(),
            ],
            setsid=True,
        )
    except OSError as exc:
        posix.close(write_end)
        from pynox.engine.scratch_removal import remove
        from pynox.errors import SandboxError

        remove(path)

        raise SandboxError(
            f"cannot start {HELPER_SHELL} to remove the run's scratch directory later: "
            f"{exc.strerror}"
        ) from None
    finally:
        posix.close(read_end)
    return out_of_the_way(write_end)


def helper_arguments(path: str, owner: int) -> "list[str]":
    """The command line of the /bin/sh helper that removes `path` once the process `owner`,
    which starts it, has ended."""
    return ["sh", "-c", HELPER_SCRIPT, path, str(owner)]


def _inherited_closed() -> "list[tuple[int, ...]]":
    """The spawn actions that close, in the helper, every descriptor above 2 that this
    process inherited from its caller. The helper outlives this process by as long as
    the removal takes: holding a pipe of the caller's, it would keep whoever waits for
    that pipe's end (a program that passed it down to see when its children are done)
    waiting until the directory is gone."""
    closefrom = getattr(posix, "POSIX_SPAWN_CLOSEFROM", None)  # Python 3.13, glibc 2.34
    if closefrom is not None:
        return [(closefrom, 3)]
    try:
        listed = posix.listdir("/proc/self/fd")  # the listing's own descriptor among them
    except OSError:
        return []  # no /proc: the helper keeps what this process inherited
    return [(posix.POSIX_SPAWN_CLOSE, int(fd)) for fd in listed if int(fd) > 2]


def out_of_the_way(fd: int) -> int:
    """fd moved past the program's own descriptors, which python numbers from 3: to the
    first free one from _HIGH_FD on or, where the limit on open files is lower, to the
    highest free one below that limit; left where it is when none is free above it."""
    limit = posix.sysconf("SC_OPEN_MAX")  # the soft RLIMIT_NOFILE: no descriptor reaches it
    if limit <= 0:  # not known: only the kernel's own bound
        limit = _HIGH_FD + (1 << 20)
    start = min(_HIGH_FD, limit - 1)
    high = _first_free(range(start, limit))
    if high is None:
        high = _first_free(range(start - 1, fd, -1))
    if high is None:
        return fd
    posix.dup2(fd, high, inheritable=False)
    posix.close(fd)
    return high


def _first_free(numbers: range) -> "int | None":
    return next((n for n in numbers if not is_open(n)), None)


def is_open(fd: int) -> bool:
    """Whether fd is an open descriptor of this process."""
    try:
        posix.fstat(fd)
    except OSError:
        return False
    return True


_HIGH_FD = 200
