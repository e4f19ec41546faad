"""Where the pynox.toml of a run is: --config, $PYNOX_CONFIG or the working directory."""

import os
import stat

from pynox.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_NAME = "pynox.toml"
CONFIG_ENV = "PYNOX_CONFIG"


def find_config_path(explicit: str | None, environ: "Mapping[str, str]", cwd: str) -> str | None:
    """The pynox.toml to use: --config, else $PYNOX_CONFIG, else ./pynox.toml, else None.

    Never a file beside the script: the program being sandboxed must not pick its own grants.
    """
    if explicit is not None:
        return _existing_file(explicit, "--config", environ, cwd, "pass the path of a pynox.toml")
    from_environment = environ.get(CONFIG_ENV)
    if from_environment:
        fix = f"point {CONFIG_ENV} at a pynox.toml or unset it"
        return _existing_file(from_environment, CONFIG_ENV, environ, cwd, fix)
    candidate = os.path.join(cwd, CONFIG_NAME)
    try:
        return candidate if stat.S_ISREG(os.stat(candidate).st_mode) else None
    except OSError:
        return None


def _existing_file(
    given: str, source: str, environ: "Mapping[str, str]", cwd: str, fix: str
) -> str:
    subject = f"{source}={given}"
    if not given:
        raise ConfigError(f"{subject} is empty; {fix}")
    # Joined, not normalized: "link/../x" must mean what the kernel makes of it.
    path = os.path.join(cwd, expand_home(given, environ))
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise ConfigError(f"{subject} does not exist; {fix}") from None
    except OSError as failure:
        raise ConfigError(f"{subject} cannot be used ({failure.strerror}); {fix}") from None
    if stat.S_ISDIR(mode):
        raise ConfigError(f"{subject} is a directory; {fix}, not of its directory")
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{subject} is not a regular file; {fix}")
    return path


def expand_home(path: str, environ: "Mapping[str, str]") -> str:
    """`~` and `~/...` from HOME in `environ` (not os.environ); `~user` from the user database."""
    if path != "~" and not path.startswith("~/"):
        return os.path.expanduser(path)
    home = environ.get("HOME")
    if not home:
        import pwd  # only without HOME, e.g. under a service manager

        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return path
    return home + path[1:]
