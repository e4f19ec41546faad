"""Paths as a user writes them: `~` expanded from the environment's HOME, and a file
named on the command line or in the environment, checked.

Apart from pynox.policy.location, which every run uses to look for its pynox.toml:
only a run told where it is, or whose configuration names paths, needs these.
"""

import posix

from pynox import lean_os
from pynox.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def existing_file(given: str, source: str, environ: "Mapping[str, str]", cwd: str, fix: str) -> str:
    """The file a user named (`source` says where: a flag, a variable), which must be a
    regular file; otherwise ConfigError, whose message ends with `fix`."""
    subject = f"{source}={given}"
    if not given:
        raise ConfigError(f"{subject} is empty; {fix}")
    # Joined, not normalized: "link/../x" must mean what the kernel makes of it.
    path = lean_os.join(cwd, expand_home(given, environ))
    try:
        mode = posix.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{subject} does not exist; {fix}") from None
    except OSError as failure:
        raise ConfigError(f"{subject} cannot be used ({failure.strerror}); {fix}") from None
    except ValueError:  # a NUL character, which no path holds (the API's config)
        raise ConfigError(f"{source}={given!r} is not a path; {fix}") from None
    if lean_os.is_directory(mode):
        raise ConfigError(f"{subject} is a directory; {fix}, not of its directory")
    if not lean_os.is_regular_file(mode):
        raise ConfigError(f"{subject} is not a regular file; {fix}")
    return path


def expand_home(path: str, environ: "Mapping[str, str]") -> str:
    """`~` and `~/...` from HOME in `environ` (not os.environ), `~user` from /etc/passwd;
    unchanged when neither says.

    Never through pwd, which loads the C library's name-service modules into this
    process (see passwd_home): HOME unset, /etc/passwd is read for this user as well.
    """
    if not path.startswith("~"):
        return path
    user = path[1:].partition("/")[0]
    home = passwd_home(name=user) if user else (environ.get("HOME") or passwd_home())
    if not home:
        return path
    # As os.path.expanduser joins them: no doubled slash, and "/" for a home of "/".
    return (home.rstrip("/") + path[1 + len(user) :]) or "/"


def home_in_passwd_file() -> str:
    """This user's home directory as /etc/passwd lists it, or "" when it does not."""
    return passwd_home()


def passwd_home(name: "str | None" = None) -> str:
    """The home directory /etc/passwd lists for the user called name (by default, this
    process's user), or "" when it lists none.

    Read as a plain file, not through pwd: the C library would load its name-service
    modules into this process, and a program forked from it would keep them and find
    users (root, through nss-systemd) that the same program run alone cannot.
    """
    uid = str(posix.getuid())
    try:
        with open("/etc/passwd", encoding="utf-8", errors="surrogateescape") as users:
            for line in users:
                fields = line.rstrip("\n").split(":")
                if len(fields) < 7:
                    continue
                if (fields[0] == name) if name is not None else (fields[2] == uid):
                    return fields[5]
    except OSError:
        pass
    return ""
