"""What a run granted the network reads to verify TLS peers.

Apart from pynox.policy.resolve and system_paths because most runs are not granted
the network: a run that is imports this module then.
"""

import posix

from pynox import lean_os
from pynox.errors import PolicyError
from pynox.policy.path_grant import magic_link_on_way, real_path
from pynox.policy.system_paths import CA_VARIABLES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pynox.policy.resolve import Policy


def ca_reads(policy: "Policy", cwd: str) -> list[str]:
    """What a run granted the network reads to verify TLS peers: the interpreter's
    default CA store, and what the CA variables passed to the program name.

    A relative one names what it names in the program's working directory, cwd,
    where OpenSSL opens it; a variable naming nothing that exists adds nothing, as
    OpenSSL then loads nothing from it; one that goes through a magic link of /proc
    is refused, as a grant of that path would be.
    """
    reads = ca_store_reads()
    for name in CA_VARIABLES:
        value = policy.environment.get(name) if name in policy.allow_env else None
        if not value:
            continue
        # Not normalized: the kernel takes a ".." after a link (certs/../ca.pem) from
        # where the link leads, not from beside it, as the path's words would. And
        # OpenSSL expands no ~.
        joined = lean_os.join(cwd, value)
        absolute = lean_os.normpath(joined)  # as the message shows it
        try:
            posix.stat(joined)
        except (OSError, ValueError):
            continue
        resolved = real_path(joined)
        if magic_link_on_way(joined, resolved):
            raise PolicyError(
                f"{name} names {absolute}, a path through a link of /proc that leads "
                "wherever a process's root, working directory, executable or descriptors "
                f"lead; set {name} to the real path of the CA file or directory"
            )
        reads.append(resolved)
    # SSL_CERT_FILE often names a file of the default CA directory.
    return [p for p in reads if not any(_inside(p, other) for other in reads if other != p)]


_ca_store: list[str] | None = None


def ca_store_reads() -> list[str]:
    """The CA store this interpreter's OpenSSL verifies with by default, as real paths.

    The default CA file and directory (ssl.get_default_verify_paths() without
    the environment's overrides), and the directories the directory's links
    lead to: Debian's /etc/ssl/certs holds links into /usr/share/ca-certificates.
    Computed once per process, and only for a run granted the network: it loads
    OpenSSL (_ssl, not the ssl module, which costs several times more), which
    the program's own `import ssl` then finds loaded.
    """
    global _ca_store
    if _ca_store is None:
        try:
            import _ssl
        except ImportError:  # an interpreter built without OpenSSL
            _ca_store = []
        else:
            _, cafile, _, capath = _ssl.get_default_verify_paths()
            _ca_store = _ca_paths(cafile, capath)
    return list(_ca_store)


def _ca_paths(cafile: str, capath: str) -> list[str]:
    paths = []
    if lean_os.isfile(cafile):
        paths.append(lean_os.realpath(cafile))
    if lean_os.isdir(capath):
        directory = lean_os.realpath(capath)
        paths.append(directory)
        paths += _link_target_dirs(directory)
    # The CA file usually lies in the CA directory (Debian: ca-certificates.crt).
    return [p for p in dict.fromkeys(paths) if not any(_inside(p, q) for q in paths if q != p)]


def _link_target_dirs(directory: str) -> list[str]:
    """The real directories holding the files that the links in directory lead
    to, other than itself, following links in those directories in turn.

    One readlink per link: hash links such as 002c0b4f.0 name a file beside
    them. A link that leaves the directory costs one stat, and each directory
    it leads to is resolved once: resolving every link in full would take
    milliseconds for the hundreds a CA directory holds.
    """
    found: dict[str, None] = {}
    pending = [directory]
    while pending and len(found) < _MAX_CA_DIRS:
        current = pending.pop()
        for leads_to in _dirs_leading_out(current):
            real = lean_os.realpath(leads_to)
            if real != directory and real not in found:
                found[real] = None
                pending.append(real)
    return list(found)


_MAX_CA_DIRS = 16  # a bound on a loop of links, far above any real layout


def _dirs_leading_out(directory: str) -> list[str]:
    """The directories, as the links name them, of regular files that links in
    directory lead to outside it.

    A link into a directory already found needs no stat: it cannot add to the result.
    Most links of a CA directory lead into the same one or two directories.
    """
    dirs: dict[str, None] = {}
    try:
        with posix.scandir(directory) as entries:
            for entry in entries:
                if not entry.is_symlink():
                    continue
                try:
                    target = posix.readlink(entry.path)
                    if "/" not in target:
                        continue
                    leads_to = lean_os.dirname(lean_os.join(directory, target))
                    if leads_to in dirs or not lean_os.is_regular_file(
                        posix.stat(entry.path).st_mode
                    ):
                        continue
                except OSError:
                    continue
                dirs[leads_to] = None
    except OSError:
        pass
    return list(dirs)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
