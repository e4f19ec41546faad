"""The text of a hint, made from its kind and value alone.

Apart from pynox.engine.hints, which classifies a failure (and imports what that
takes): a supervisor makes a result's hint from the child's word for its kind and
value, and a run with --json hands every hint's text to the launcher before the
program starts (hint_texts), without importing what classifying takes. The hints of
the memory and file size limits are worded in pynox.engine.limit_hints.
"""

import sys

from pynox.engine.hint_style import (
    LIMITED_BY,
    OUTPUT_FOLDER,
    Style,
    templates,
    worded,
)
from pynox.engine.limit_hints import NATIVE_INHERITED, WORDED_HERE, limit_hint_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy

# The ending of a kind below when its path is granted already (pynox.engine.hints).
GRANTED_SUFFIX = "_granted"
# What the file system's own permissions refuse this user, by hint kind (see
# pynox.engine.hints._refused_to_user), and whether it is a read: a read may be granted
# once this user may do it, a write goes elsewhere.
_UNPERMITTED = {
    "read_unpermitted": ("reading", True),
    "list_unpermitted": ("listing", True),
    "write_unpermitted": ("writing", False),
    "entries_unpermitted": ("changing the entries of", False),
    "read_write_unpermitted": ("reading and writing", False),
}

# What a hint can be about; the value a grant needs, if any, goes with it.
KINDS = frozenset(
    {
        "memory",
        "memory_for",
        "memory_beyond",
        "memory_machine",
        "thread_stacks",
        "thread_stacks_inherited",
        "thread_processes",
        "native_abort",
        "native_abort_inherited",
        "native_exit",
        "native_exit_inherited",
        "open_files",
        "open_files_limit",
        "memory_limits",
        "file_size_limit",
        "core_limit",
        "stack_limit",
        "file_size",
        "file_size_inherited",
        "memory_inherited",
        "process",
        "thread_pool",
        "job_control",
        "io_signals",
        "other_process",
        "scheduling",
        "memfd",
        "pipe_size",
        "lease",
        "namespaces",
        "user_ids",
        "clock",
        "host_name",
        "pseudo_terminal",
        "socket_buffers",
        "interfaces",
        "terminal_type",
        "environment_variable",
        "environment_variable_unset",
        "metadata",
        "set_id",
        "tree_metadata",
        "move_metadata",
        "tar_metadata",
        "folder_into_scratch",
        "move_unreadable",
        "link_unwritable",
        "link_copy",
        "dbm_dumb",
        "dbm_read_back",
        "fileinput_backup",
        "fileinput_set_id",
        "polars_temporary_folder",
        "xlsxwriter_times",
        "xattr_by_path",
        "unix_socket",
        "other_socket",
        "raw_socket",
        "privileged_port",
        "socket_pair",
        "network",
        "network_tables",
        "ca_variable",
        "proxy_variable",
        "read",
        "list",
        "unlisted",
        "unremoved",
        "user_name",
        "group_name",
        "write",
        "entries",
        "read_write",
        *_UNPERMITTED,
        *(kind + GRANTED_SUFFIX for kind in _UNPERMITTED),
        "write_beside_config",
        "write_beside_trusted",
        "read_write_beside_config",
        "read_write_beside_trusted",
        "write_beside_scratch",
        "read_write_beside_scratch",
        "trusted_write",
        "own_undumpable",
        "module",
        "module_here",
        "module_in_root",
        "module_beside_scratch",
        "other_python",
        "module_other_python",
    }
)

# What a folder holds that no write grant may reach (pynox.policy.trusted).
_HELD = {
    "config": "where pynox reads its configuration (pynox.toml), so the program could grant "
    "itself more next time",
    "trusted": "files every later run trusts (pynox's installation, the interpreter's, or "
    "system files)",
}

# multiprocessing.pool.ThreadPool is no way out: its queues take multiprocessing
# locks, which are named semaphores in /dev/shm (THREAD_POOL_HINT).
PROCESS_HINT = (
    "processes (subprocess, os.system, os.fork, multiprocessing, ProcessPoolExecutor) never "
    "run in the sandbox, threads do: use concurrent.futures.ThreadPoolExecutor or threading, "
    "or do the work in this program"
)
# A program that used threads already, through multiprocessing's ThreadPool: the
# process hint's "threads do" would read as a contradiction.
THREAD_POOL_HINT = (
    "multiprocessing's ThreadPool (multiprocessing.pool.ThreadPool, multiprocessing.dummy.Pool) "
    "never runs in the sandbox although its workers are threads: it takes multiprocessing "
    "locks, which are named semaphores the sandbox refuses; use "
    "concurrent.futures.ThreadPoolExecutor instead (executor.map for pool.map, "
    "executor.submit for pool.apply_async)"
)
# The seccomp filter's own-process rules (runtime/seccomp.c): no grant lifts them.
JOB_CONTROL_HINT = (
    "changing process groups (os.setpgid, os.setpgrp, os.tcsetpgrp) is not available in the "
    "sandbox, where no other process runs to need job control; there is nothing to grant, "
    "leave it out"
)
IO_SIGNALS_HINT = (
    "signal-driven I/O (O_ASYNC, fcntl's F_SETOWN and F_SETSIG) is never allowed in the "
    "sandbox: its signals could reach processes outside it, there is nothing to grant; wait "
    "for the descriptor with selectors, asyncio or a thread instead"
)
OTHER_PROCESS_HINT = (
    "signals and resource limits reach only the program's own process in the sandbox "
    "(os.kill(os.getpid(), sig), resource.prlimit(0, ...)): no other process can be signalled "
    "or changed, and there is nothing to grant"
)
CORE_LIMIT_HINT = (
    "core dumps are never allowed in the sandbox: its core size limit stays at 1 byte, and "
    "there is nothing to grant; leave the limit as it is"
)
SCHEDULING_HINT = (
    "scheduling calls (os.nice, os.setpriority, os.sched_setscheduler, os.sched_setaffinity) "
    "may change only the program's own process in the sandbox, and never raise its priority, "
    "which takes a privilege the sandbox never has; there is nothing to grant: leave the "
    "priority as it is, or lower it (os.nice(5))"
)
# Memory the kernel holds for the program that no limit counts (runtime/seccomp.c).
MEMFD_HINT = (
    "os.memfd_create is never allowed in the sandbox: the memory it holds would escape the "
    "sandbox's limits, and there is nothing to grant; keep the data in memory (io.BytesIO) "
    "or, where a file descriptor is needed, in a file in the run's scratch directory "
    "(tempfile.TemporaryFile())"
)
PIPE_SIZE_HINT = (
    "resizing a pipe (fcntl's F_SETPIPE_SZ) is never allowed in the sandbox: its buffer would "
    "escape the sandbox's limits, and there is nothing to grant; pipes keep their default "
    "size, so read from the other end while writing (in a thread), or pass the data through a "
    "file in the run's scratch directory"
)
LEASE_HINT = (
    "file leases (fcntl's F_SETLEASE) are never allowed in the sandbox: they would make "
    "programs outside it wait to open the file, and there is nothing to grant; lock the file "
    "with fcntl.flock or fcntl.lockf instead"
)
NAMESPACES_HINT = (
    "changing namespaces or the root directory (os.unshare, os.setns, os.chroot) is never "
    "allowed in the sandbox; there is nothing to grant, leave it out"
)
# Privileges the sandbox drops (runtime/capabilities.c) or calls seccomp refuses.
USER_IDS_HINT = (
    "changing the program's user or groups (os.setuid, os.setgid, os.setgroups and the like) "
    "is never allowed in the sandbox, which runs without the privileges it takes; there is "
    "nothing to grant: leave it out, the program already runs as the user who started pynox"
)
CLOCK_HINT = (
    "setting the system clock (time.clock_settime, settimeofday) is never allowed in the "
    "sandbox, and there is nothing to grant; keep the time the program needs in a variable "
    "instead (an offset added to time.time(), or a datetime)"
)
HOST_NAME_HINT = (
    "changing the machine's host name (socket.sethostname) is never allowed in the sandbox, "
    "and there is nothing to grant; leave it out, or keep the name the program needs in a "
    "variable"
)
PSEUDO_TERMINAL_HINT = (
    "pseudo-terminals (os.openpty, pty.openpty) are never available in the sandbox, and there "
    "is nothing to grant; where the program needs a pair of connected descriptors, use "
    "os.pipe() or socket.socketpair() instead"
)
SOCKET_BUFFERS_HINT = (
    "socket buffer sizes (SO_SNDBUF, SO_RCVBUF) cannot be changed in the sandbox without the "
    "network: the memory they hold would escape the sandbox's limits; leave them at their "
    "defaults"
)
INTERFACES_HINT = (
    "looking up the network interfaces (socket.if_nameindex(), if_nametoindex(), "
    "if_indextoname()) takes a netlink socket or interface ioctls, which the sandbox never "
    "allows, with the network or without; there is nothing to grant, leave it out"
)
METADATA_HINT = (
    "changing file modes, owners, times or extended attributes is never allowed in the "
    "sandbox; write the file's contents instead (shutil.copyfile rather than shutil.copy, "
    "given the new file's path: copyfile takes no folder)"
)
# runtime/seccomp.c refuses making files and folders with these mode bits.
SET_ID_HINT = (
    "files and folders cannot be made set-user-ID or set-group-ID in the sandbox, and there "
    "is nothing to grant; make it with a mode without those bits (os.makedirs(path, "
    "mode=0o775), os.open(path, flags, 0o755))"
)
# shutil.copytree (and shutil.move across file systems) copies each folder's times and
# mode after its files, and gathers every refusal into one shutil.Error (pynox.engine.hints).
TREE_METADATA_HINT = (
    "shutil copied the files but not their modes and times, which the sandbox never lets a "
    "program change, and there is nothing to grant; copy the tree's contents instead: walk "
    "it with os.walk, make each folder with os.makedirs and copy each file with "
    "shutil.copyfile"
)
# shutil.move copies a file to another file system with copy2 (pynox.engine.hints).
MOVE_METADATA_HINT = (
    "shutil.move copies a file to another file system with its mode and times, which the "
    "sandbox never lets a program change, and there is nothing to grant; the original is "
    "still there: copy its contents with shutil.copyfile, then remove it with os.remove"
)
# tarfile gives what it extracts the owner, mode and times the archive holds, and with
# errorlevel=2 raises ExtractError when it cannot (pynox.engine.hints).
TAR_METADATA_HINT = (
    "tarfile extracted the file but cannot give it the owner, mode and times the archive "
    "holds, which the sandbox never lets a program change, and there is nothing to grant; "
    "open the archive with tarfile's default errorlevel=1, which extracts the contents "
    "and passes over them"
)
# Landlock refuses moving a folder of a grant into the scratch directory (runtime/landlock.c).
FOLDER_INTO_SCRATCH_HINT = (
    "a folder of a grant cannot be moved into the run's scratch directory (the kernel says "
    "EXDEV, as between file systems): removing the scratch directory would take along what "
    "the program may not remove itself, and there is nothing to grant; copy the folder's "
    "contents instead: walk it with os.walk, make each folder with os.makedirs and copy each "
    "file with shutil.copyfile"
)
# dbm.dumb sets its files' mode whatever the program asks (pynox.engine.hints).
DBM_DUMB_HINT = (
    "dbm.dumb, which dbm and shelve use where gdbm and ndbm are missing, sets the mode of "
    "its files, which the sandbox never allows, and there is nothing to grant; store the "
    "data with sqlite3 instead (from Python 3.13 on, dbm and shelve use dbm.sqlite3)"
)
# polars sets the mode of the temporary folder it reads URLs through (pynox.engine.hints).
POLARS_TEMPORARY_FOLDER_HINT = (
    "polars sets the mode of the temporary folder it reads a URL through, which the sandbox "
    "never allows, and there is nothing to grant; fetch the bytes with urllib.request or "
    "requests and give polars io.BytesIO(data) instead"
)
# xlsxwriter sets the times of its temporary files (pynox.engine.hints).
XLSXWRITER_TIMES_HINT = (
    "xlsxwriter sets the times of the temporary files it builds a workbook from, which the "
    "sandbox never allows, and there is nothing to grant; have it build the workbook in "
    "memory: xlsxwriter.Workbook(path, {'in_memory': True}), or from pandas "
    "to_excel(path, engine_kwargs={'options': {'in_memory': True}}) (ExcelWriter takes the "
    "same engine_kwargs)"
)
XATTR_BY_PATH_HINT = (
    "reading extended attributes by path is never allowed in the sandbox; read them from a "
    "file the program opened (os.getxattr(fd, name), os.listxattr(fd))"
)
UNIX_SOCKET_HINT = "Unix sockets of the host are never allowed in the sandbox"
OTHER_SOCKET_HINT = "only IPv4 and IPv6 sockets can be allowed in the sandbox"
SOCKET_PAIR_HINT = (
    "only socket pairs of Unix stream sockets (SOCK_STREAM, SOCK_SEQPACKET) are allowed in "
    "the sandbox: a datagram one could send to the host's Unix sockets, and there is nothing "
    "to grant; use socket.socketpair() with its defaults"
)
RAW_SOCKET_HINT = (
    "raw sockets (SOCK_RAW) are never allowed in the sandbox, which runs without the "
    "privilege they take; there is nothing to grant: use TCP or UDP sockets (SOCK_STREAM, "
    "SOCK_DGRAM) instead"
)

PRIVILEGED_PORT_HINT = (
    "ports below 1024 are privileged: binding one takes a capability (CAP_NET_BIND_SERVICE) "
    "that the sandbox never gives, even to root, and there is nothing to grant; bind a port "
    "of 1024 or above, or port 0 to let the system choose one"
)


def format_hint(
    kind: object, target: object, style: Style, memory: int | None, max_file_size: int | None
) -> str | None:
    """The hint's text, from its kind and value alone."""
    return worded(_hint_of, kind, target, style, memory, max_file_size)


def _hint_of(
    kind: object, target: object, style: Style, memory: int | None, max_file_size: int | None
) -> str | None:
    if kind in WORDED_HERE:
        return limit_hint_of(kind, target, style, memory, max_file_size)
    value = target if isinstance(target, str) else None
    fixed = {
        "process": PROCESS_HINT,
        "thread_pool": THREAD_POOL_HINT,
        "job_control": JOB_CONTROL_HINT,
        "io_signals": IO_SIGNALS_HINT,
        "core_limit": CORE_LIMIT_HINT,
        "other_process": OTHER_PROCESS_HINT,
        "scheduling": SCHEDULING_HINT,
        "memfd": MEMFD_HINT,
        "pipe_size": PIPE_SIZE_HINT,
        "lease": LEASE_HINT,
        "namespaces": NAMESPACES_HINT,
        "user_ids": USER_IDS_HINT,
        "clock": CLOCK_HINT,
        "host_name": HOST_NAME_HINT,
        "pseudo_terminal": PSEUDO_TERMINAL_HINT,
        "socket_buffers": SOCKET_BUFFERS_HINT,
        "interfaces": INTERFACES_HINT,
        "metadata": METADATA_HINT,
        "set_id": SET_ID_HINT,
        "tree_metadata": TREE_METADATA_HINT,
        "move_metadata": MOVE_METADATA_HINT,
        "tar_metadata": TAR_METADATA_HINT,
        "folder_into_scratch": FOLDER_INTO_SCRATCH_HINT,
        "dbm_dumb": DBM_DUMB_HINT,
        "polars_temporary_folder": POLARS_TEMPORARY_FOLDER_HINT,
        "xlsxwriter_times": XLSXWRITER_TIMES_HINT,
        "xattr_by_path": XATTR_BY_PATH_HINT,
        "unix_socket": UNIX_SOCKET_HINT,
        "other_socket": OTHER_SOCKET_HINT,
        "raw_socket": RAW_SOCKET_HINT,
        "privileged_port": PRIVILEGED_PORT_HINT,
        "socket_pair": SOCKET_PAIR_HINT,
    }
    if kind in fixed:
        return fixed[str(kind)]
    if kind == "network":
        return f"the network is off{style.ask('allow_network')}"
    if kind == "network_tables":
        return (
            "the services and protocols tables (/etc/services, /etc/protocols) that socket's "
            f"look-ups read are readable only with the network{style.ask('allow_network')}"
        )
    if value is None:
        return None
    shown = style.shown(value)
    if shown is None:
        return None
    if kind == "ca_variable":
        return (
            f"the environment variable {shown} is set where pynox runs but not passed to the "
            "program, which verified the certificate without the CAs it names"
            f"{style.ask('allow_env', value)}"
        )
    if kind == "proxy_variable":
        return (
            f"the environment variable {shown} is set where pynox runs but not passed to the "
            "program, which connected directly instead of through the proxy it names"
            f"{style.ask('allow_env', value)}"
        )
    if kind == "terminal_type":
        return (
            f"curses found no terminal: the environment variable {shown}, the terminal's "
            f"type, is set where pynox runs but not passed to the program"
            f"{style.ask('allow_env', value)}"
        )
    if kind == "environment_variable":
        # pynox passes on only what a run is granted: set where pynox runs or not, the
        # variable then reaches the program.
        return (
            f"the environment variable {shown} is not in the program's environment, which "
            "holds only the variables the run is granted of those where pynox runs (set "
            f"{shown} there if it is not){style.ask('allow_env', value)}"
        )
    if kind == "environment_variable_unset":
        where = (
            "the pool started, whose environment is the one its runs are passed variables "
            "from: set it there before the pool starts"
            if style.api
            else "pynox runs: set it there"
        )
        return (
            f"the environment variable {shown} is granted to the run, but it was not set where "
            f"{where}"
        )
    if kind in ("read", "list"):
        noun = "listing" if kind == "list" else "reading"
        return f"{noun} {shown} is not allowed{style.ask('allow_read', value)}"
    if kind == "unlisted":
        return (
            f"the program was refused listing {shown}, which glob, pathlib's glob and "
            f"os.walk pass over as if it were empty{style.ask('allow_read', value)}"
        )
    if kind == "unremoved":
        return (
            f"shutil.rmtree(ignore_errors=True) left {shown} in place, since removing a "
            f"folder takes listing it{style.ask('allow_read', value)}"
        )
    if kind == "user_name":
        return (
            "the program looked up the user's name (getpass.getuser(), pwd.getpwuid()) in "
            f"{shown}, since the environment holds none, and reading {shown} is not "
            f"allowed{style.ask('allow_read', value)}"
        )
    if kind == "group_name":
        return (
            "the program looked up a group's name (grp.getgrgid(), pathlib's Path.group()) in "
            f"{shown}, and reading {shown} is not allowed{style.ask('allow_read', value)}"
        )
    if kind == "dbm_read_back":
        left = (
            f"dbm.sqlite3, which dbm and shelve use, reads back the database it writes in "
            f"{shown}, and the empty file its failed open left there is one dbm cannot open: "
            "delete that file"
        )
        if style.refused("allow_read", value):
            return f"{left}; {LIMITED_BY} lets no request grant reading {shown}"
        return f"{left}, and grant reading with {style.grant('allow_read', value)}"
    if kind == "move_unreadable":
        # Landlock refuses (EXDEV) a move or link that would gain a right (runtime/landlock.c).
        return (
            f"moving or linking a file out of {shown}, which the program may not read, into "
            "a folder it may read is refused (the kernel says EXDEV, as between file "
            f"systems){style.ask('allow_read', value)}"
        )
    if kind == "link_unwritable":
        return (
            f"hard-linking a file of {shown}, which the program may not write, into a folder "
            "it may write is refused (the kernel says EXDEV, as between file systems); copy "
            "the file instead (shutil.copyfile), or let the program write it where it is"
            f"{style.ask('allow_write', value)}"
        )
    if kind == "link_copy":
        return (
            f"hard-linking a file of {shown}, which the program may not write and no run "
            "may be granted writing, into a folder it may write is refused (the kernel says "
            "EXDEV, as between file systems); copy the file instead (shutil.copyfile)"
        )
    if kind == "fileinput_set_id":
        # It makes the file again with os.open and the old file's mode, set-ID bits too.
        return (
            f"fileinput (inplace=True) makes {shown} again with the mode of the file it "
            "edits, whose set-user-ID or set-group-ID bit the sandbox never lets a program "
            "give, and there is nothing to grant; it moved the file to a backup beside it "
            "(its name and .bak), left there or, once fileinput is closed without backup= "
            "(at the end of a with block or of the program), gone: put it back, then clear "
            f"those bits where pynox runs (chmod u-s,g-s {shown})"
        )
    if kind == "fileinput_backup":
        # fileinput's close removes the backup unless backup= names one to keep.
        moved = (
            "fileinput (inplace=True) moves the file it edits to a backup beside it (its name "
            f"and .bak) and reads it from there, which the program may not do in {shown}: the "
            "file is left as that backup or, once fileinput is closed without backup= (at the "
            "end of a with block or of the program), gone; put it back"
        )
        if style.refused("allow_read", value):
            return f"{moved}; {LIMITED_BY} lets no request grant reading {shown}"
        return f"{moved}, then grant reading with {style.grant('allow_read', value)}"
    if kind == "write":
        return f"writing {shown} is not allowed{style.ask('allow_write', value)}"
    if kind == "entries":
        return f"changing the entries of {shown} is not allowed{style.ask('allow_write', value)}"
    if kind == "read_write":
        if style.refused("allow_read", value) or style.refused("allow_write", value):
            return (
                f"the program reads back what it writes in {shown}; {LIMITED_BY} lets no "
                "request grant both"
            )
        both = style.grant_both(("allow_read", "allow_write"), value)
        return f"the program reads back what it writes in {shown}; grant both with {both}"
    if kind in _UNPERMITTED:
        return _unpermitted_hint(str(kind), value, style)
    if isinstance(kind, str) and kind.removesuffix(GRANTED_SUFFIX) in _UNPERMITTED:
        return _unpermitted_hint(kind.removesuffix(GRANTED_SUFFIX), value, style, granted=True)
    if kind == "own_undumpable":
        return (
            f"{shown} is root's while the program runs, whatever the grants: the sandbox "
            "makes the program's process undumpable, so that nothing dumps its memory "
            "outside the sandbox, and the kernel then gives that process's own /proc "
            "entries to root; get what it holds another way"
        )
    if kind == "trusted_write":
        return (
            f"{shown} cannot be granted for writing: what is written there reaches past the "
            "sandbox (pynox's configuration, its installation or the interpreter's, a folder "
            "later runs load code from before their sandbox exists, a system file every run "
            "reads, the kernel's settings, a disk's device or the kernel's memory); write "
            f"somewhere else instead, such as {style.scratch()}"
        )
    if kind in ("write_beside_scratch", "read_write_beside_scratch"):
        return _beside_scratch_hint(kind, value, style)
    if isinstance(kind, str) and kind.startswith(("write_beside_", "read_write_beside_")):
        return _beside_trusted_hint(kind, value, style)
    if kind == "module":
        return module_hint(value, style)
    if kind == "module_here":
        return (
            f"the module is in {shown}, the working directory, which python imports from for "
            f"-c and standard input, and which the program may not read"
            f"{style.ask('allow_read', value)}"
        )
    if kind in ("module_in_root", "module_beside_scratch"):
        where, why = (
            ("in /", "that would be every file of the machine")
            if kind == "module_in_root"
            else (
                "in a folder where runs keep their scratch directories",
                "that would show what other runs keep there",
            )
        )
        # A script's folder, and -m's working directory, are readable by default; the
        # working directory that -c and standard input import from is not.
        grant = style.grant("allow_read", "FOLDER", shown="FOLDER")
        return (
            f"the module is {shown}, {where}, which python imports from for this program but "
            f"which the sandbox never makes readable by itself, since {why}; move the program "
            f"and its modules into a folder of their own (with -c or standard input, run "
            f"there and grant it with {grant})"
        )
    if kind == "other_python":
        return other_python_hint(value, style)
    if kind == "module_other_python":
        return module_other_python_hint(value, style)
    return None


def _unpermitted_hint(kind: str, path: str, style: Style, granted: bool = False) -> str:
    """What the sandbox refused, or what was granted and still refused, the file system
    refuses this user without capabilities: a grant alone would not help, and a hint that
    named one would send the model round in a circle."""
    action, reading = _UNPERMITTED[kind]
    refused = (
        f"{action} {style.shown(path)} is refused by the file system's permissions to this "
        "user, as the sandbox runs the program (without capabilities, even for root), so "
        + ("its grant does not allow it" if granted else "no grant alone would allow it")
    )
    if not reading:
        return f"{refused}; write somewhere this user may write instead, such as {style.scratch()}"
    if granted or style.refused("allow_read", path):
        return f"{refused}; use a copy this user may read instead"
    return (
        f"{refused}; use a copy this user may read instead, or once its permissions let this "
        f"user read it, grant it with {style.grant('allow_read', path)}"
    )


def _beside_trusted_hint(kind: str, folder: str, style: Style) -> str | None:
    """folder holds what no write grant may reach, and a folder inside it does not."""
    both = kind.startswith("read_write_")
    held = _HELD.get(kind.rpartition("_")[2])
    if held is None:
        return None
    inside = f"{folder}/{OUTPUT_FOLDER}"
    # As the launcher shows it, which quotes the folder, the value it is given.
    shown = f"{style.shown(folder)}/{OUTPUT_FOLDER}"
    refused = style.refused("allow_write", inside) or (both and style.refused("allow_read", inside))
    if refused:
        instead = f"write into {style.scratch()} instead"
    else:
        if both:
            grants = style.grant_both(("allow_read", "allow_write"), inside, shown)
        else:
            grants = style.grant("allow_write", inside, shown)
        instead = (
            f"write into a new folder inside it instead, such as {shown}, made "
            f"before the run and granted with {grants}, or into {style.scratch()}"
        )
    if both:
        return (
            f"the program reads back what it writes in {style.shown(folder)}, which cannot be "
            f"granted for writing: it holds {held}; {instead}"
        )
    return f"{style.shown(folder)} cannot be granted for writing: it holds {held}; {instead}"


def _beside_scratch_hint(kind: str, folder: str, style: Style) -> str:
    """folder holds the scratch directories of this run and of others (the caller's
    TMPDIR, or /tmp): a grant of it would reach theirs, a folder inside it would not."""
    both = kind.startswith("read_write_")
    inside = f"{folder}/{OUTPUT_FOLDER}"
    shown = f"{style.shown(folder)}/{OUTPUT_FOLDER}"
    own = f"write into {style.scratch()} instead"
    refused = style.refused("allow_write", inside) or (both and style.refused("allow_read", inside))
    if not refused:
        if both:
            grants = style.grant_both(("allow_read", "allow_write"), inside, shown)
        else:
            grants = style.grant("allow_write", inside, shown)
        own += f", or into a new folder such as {shown}, made before the run and granted with "
        own += grants
    return (
        f"{style.shown(folder)} holds the scratch directories of other runs, which a grant of "
        f"it would open to the program; {own}"
    )


# Native code's ends leave no report to take a value from: the launcher gets those texts
# made whole before the run (pynox.engine.native_end.launcher_texts).
_TEMPLATE_KINDS = KINDS - NATIVE_INHERITED


def hint_texts(policy: "Policy") -> dict[str, str]:
    """The command line's hint of every kind that has one under policy, with
    VALUE_PLACEHOLDER for the value: for the launcher, which writes a --json result
    itself and cannot call format_hint (see pynox.engine.result_frame.launcher_frame)."""
    return templates(format_hint, _TEMPLATE_KINDS, policy.memory, policy.max_file_size)


def unlimited_hint_texts() -> dict[str, str]:
    """hint_texts of a run with neither a memory nor a file size limit, the only parts of
    a policy they depend on: the same for every such run, so made when the start-up
    image is built (pynox._boot.BAKED)."""
    return templates(format_hint, _TEMPLATE_KINDS, None, None)


def module_hint(directory: str, style: Style) -> str:
    """The hint for a module found installed in directory, which the run was not given."""
    if style.refused("package_dirs", directory):
        return (
            f"the module is installed in {style.shown(directory)}; {LIMITED_BY} lets no request "
            "import from there"
        )
    grant = style.grant("package_dirs", directory)
    return f"the module is installed in {style.shown(directory)}; import from there with {grant}"


def _install_for_this_python(style: Style) -> str:
    ours = running_python_version()
    install = (
        f"install it for Python {ours} (python{ours} -m pip install --target=DIR, or a "
        f"Python {ours} virtual environment's site-packages)"
    )
    if style.refused("package_dirs"):  # whatever the folder: no grant would do
        return (
            f"{install} where the pool itself imports packages from (its [pool] package_dirs): "
            f"{LIMITED_BY} lets no request import from another folder"
        )
    # Where DIR may be: a folder of a pool's [pool.limits], if they limit package_dirs.
    inside = f" inside a folder {LIMITED_BY} allows" if style.refused("package_dirs", "DIR") else ""
    return f"{install}{inside} and import from there with {style.grant('package_dirs', 'DIR')}"


def other_python_hint(version: str, style: Style) -> str:
    """The hint for packages whose compiled modules were built for Python `version`, shown
    as a path is: the program's process reports it, and may report any text."""
    ours = running_python_version()
    return (
        f"the package was installed for Python {style.shown(version)}, and this is Python "
        f"{ours}, which cannot import its compiled modules; {_install_for_this_python(style)}"
    )


def module_other_python_hint(directory: str, style: Style) -> str:
    """The hint for a module found only in the site-packages of another Python version."""
    shown = style.shown(directory)
    if style.refused("package_dirs", directory):
        return f"the module is installed in {shown}, for another version of Python; " + (
            _install_for_this_python(style)
        )
    return (
        f"the module is installed in {shown}, for another version of Python than this "
        f"one ({running_python_version()}): a pure-Python package imports from there with "
        f"{style.grant('package_dirs', directory)}; for one with compiled modules, "
        + _install_for_this_python(style)
    )


def running_python_version() -> str:
    """This interpreter's version as packages are built for it: 3.13, or 3.13t when
    free-threaded (its compiled modules are apart)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return version + "t" if "t" in sys.abiflags else version
