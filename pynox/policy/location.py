"""Where the pynox.toml of a run is: --config, $PYNOX_CONFIG or the working directory."""

import posix

from pynox import lean_os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

CONFIG_NAME = "pynox.toml"
CONFIG_ENV = "PYNOX_CONFIG"


def find_config_path(
    explicit: str | None, environ: "Mapping[str, str]", cwd: str, given_as: str = "--config"
) -> str | None:
    """The pynox.toml to use: --config, else $PYNOX_CONFIG, else ./pynox.toml, else None.

    Never a file beside the script: the program being sandboxed must not pick its own grants.
    given_as: how the caller named `explicit`, for its errors (the API's `config`).
    """
    if explicit is not None:
        from pynox.policy.user_paths import existing_file

        return existing_file(explicit, given_as, environ, cwd, "pass the path of a pynox.toml")
    from_environment = environ.get(CONFIG_ENV)
    if from_environment:
        from pynox.policy.user_paths import existing_file

        fix = f"point {CONFIG_ENV} at a pynox.toml or unset it"
        return existing_file(from_environment, CONFIG_ENV, environ, cwd, fix)
    candidate = lean_os.join(cwd, CONFIG_NAME)
    try:
        return candidate if lean_os.is_regular_file(posix.stat(candidate).st_mode) else None
    except OSError:
        return None
