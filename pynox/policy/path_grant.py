"""A granted path as the sandbox will see it: absolute, real, and refused where it goes
through a link of /proc that leads wherever a process's files lead.

Apart from pynox.policy.resolve because most runs grant no path: a run that does
imports this module then.
"""

import posix

from pynox import lean_os
from pynox.errors import PolicyError
from pynox.policy.system_paths import OWN_PROCESS_LINKS


def resolve_grant(path: str, kind: str, cwd: str) -> str:
    """The real path of a granted file or directory, which must exist."""
    absolute = absolute_grant(path, cwd)
    try:
        posix.stat(absolute)
    except FileNotFoundError:
        raise PolicyError(
            f"cannot grant {kind} {absolute}: it does not exist; "
            "create it first or correct the path"
        ) from None
    except OSError as exc:  # a file on the way, a loop of links, no permission to look
        raise PolicyError(
            f"cannot grant {kind} {absolute}: pynox cannot reach it ({exc.strerror}); "
            "correct the path, or let this user reach it"
        ) from None
    except ValueError:  # a NUL character
        raise PolicyError(f"cannot grant {kind} {absolute!r}: it is not a valid path") from None
    resolved = real_path(absolute)
    through = magic_link_on_way(absolute, resolved)
    if through and _is_descriptor_link(through):
        raise PolicyError(
            f"cannot grant {kind} {absolute}: it goes through {through}, a link of /proc to "
            "whatever pynox itself has open as that descriptor, not a path; the program's "
            "standard input, output and error need no grant, and a file is granted by its "
            "own path"
        )
    if through:
        raise PolicyError(
            f"cannot grant {kind} {absolute}: it goes through {through}, a link of /proc "
            "that leads wherever a process's root, working directory, executable or "
            "descriptors lead; grant the real path you mean instead"
        )
    return resolved


def absolute_grant(path: str, cwd: str) -> str:
    """The path as named, made absolute as a grant is before it is resolved."""
    if path.startswith("~"):
        from pynox.policy.user_paths import expand_home

        path = expand_home(path, lean_os.environment())
    return lean_os.normpath(lean_os.join(cwd, path))


def magic_link_on_way(absolute: str, resolved: str) -> str | None:
    """The form of the path that is or goes through a magic link of /proc, if any: the
    path itself, a link its resolution follows (/dev/stdin leads to /proc/self/fd/0),
    or where it ends."""
    for form in (absolute, *links_on_way(absolute), resolved):
        if _through_proc_magic_link(form):
            return form
    return None


# The kernel's own bound on links followed in one path (ELOOP past it).
_MAX_LINKS = 40


class LinkWalks:
    """What links_on_way found, kept while many paths are walked at once: most begin
    alike (a folder and what lies in it), and each name is then looked up once."""

    __slots__ = ("after", "targets")

    def __init__(self) -> None:
        self.targets: dict[str, str | None] = {}  # a name: its link's target, None if none
        # A leading part of a walked path: where its walk stood after it, and the links
        # it had followed by then.
        self.after: dict[str, tuple[str, tuple[str, ...]]] = {}


def links_on_way(path: str, walks: "LinkWalks | None" = None) -> "list[str]":
    """Every symbolic link that resolving the absolute path follows, by the path it is
    reached at; /proc/self and /proc/thread-self are not followed, as real_path keeps
    them. walks: what walks of other paths found (see LinkWalks)."""
    if walks is None:
        walks = LinkWalks()
    parts = path.split("/")
    start = len(parts)  # after the longest leading part walked before, if any
    while start and "/".join(parts[:start]) not in walks.after:
        start -= 1
    current, walked = walks.after["/".join(parts[:start])] if start else ("", ())
    links = list(walked)
    for index in range(start, len(parts)):
        pending = [parts[index]]
        while pending and len(links) <= _MAX_LINKS:
            part = pending.pop()
            if part in ("", "."):
                continue
            if part == "..":
                current = current.rpartition("/")[0]
                continue
            candidate = current + "/" + part
            current = candidate
            if candidate in OWN_PROCESS_LINKS:
                continue
            target = _target(candidate, walks.targets)
            if target is None:
                continue
            links.append(candidate)
            # An absolute target starts again from /, a relative one from the link's folder.
            current = "" if target.startswith("/") else current.rpartition("/")[0]
            pending.extend(target.split("/")[::-1])
        walks.after["/".join(parts[: index + 1])] = (current, tuple(links))
    return links


def _target(name: str, targets: "dict[str, str | None]") -> "str | None":
    """Where the link name leads, or None when it is no link, as found before if it was."""
    if name not in targets:
        try:
            targets[name] = posix.readlink(name)
        except OSError:  # not a link, or not there: the stat before decides on that
            targets[name] = None
    return targets[name]


def _is_descriptor_link(path: str) -> bool:
    """Whether path is, or goes through, an open file's link (/proc/PID/fd/N)."""
    parts = path.split("/")
    return "fd" in parts[3:] or "map_files" in parts[3:]


def real_path(path: str) -> str:
    """The path with every symbolic link resolved, as the sandbox will open it.

    /proc/self and /proc/thread-self stay as they are: resolved here, they would
    name this process; the sandboxed process names itself when it confines itself.
    """
    if _names_own_process(path):
        return lean_os.normpath(path)
    return lean_os.realpath(path)


def _names_own_process(path: str) -> bool:
    return any(path == link or path.startswith(link + "/") for link in OWN_PROCESS_LINKS)


def _through_proc_magic_link(path: str) -> bool:
    """Whether the path is, or goes through, a "magic" link of /proc of any process or
    thread: the kernel follows those to a process's root or working directory, its
    executable, its open files or its namespaces, wherever those are."""
    parts = path.split("/")  # "", "proc", pid, ...
    if len(parts) < 4 or parts[1] != "proc":
        return False
    if parts[2] not in ("self", "thread-self") and not parts[2].isdigit():
        return False
    rest = parts[3:]
    if len(rest) >= 3 and rest[0] == "task" and rest[1].isdigit():
        rest = rest[2:]
    if rest[:1] in (["root"], ["cwd"], ["exe"]):
        return True
    return len(rest) >= 2 and rest[0] in ("fd", "map_files", "ns") and rest[1] != ""
