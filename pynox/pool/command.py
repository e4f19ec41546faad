"""`pynox pool`'s command line: its flags, its usage text, and the start of the server."""

import sys

from pynox import units
from pynox.errors import UsageError
from pynox.policy.config import is_module_name
from pynox.pool.server import PoolServer


class PoolOptions:
    __slots__ = ("config", "workers", "preload", "warmup", "package_dirs")

    def __init__(self) -> None:
        self.config: str | None = None
        self.workers: int | None = None
        self.preload: list[str] = []
        self.warmup: str | None = None  # in place of [pool].warmup
        self.package_dirs: list[str] = []  # as given: relative to the working directory


_POOL_FLAGS = ("--config", "--workers", "--preload", "--warmup", "--package-dir")
USAGE = """\
usage: pynox pool [--config FILE] [--workers N] [--preload MODULE]... [--warmup CODE]
                  [--package-dir PATH]...

Serves sandboxed runs over JSON Lines: a request per line on standard input, its
result as a line on standard output (docs/pool-protocol.md). Each request runs in
a fresh sandboxed process, forked from a warm interpreter.

  --config=FILE       pynox.toml whose [pool], [pool.limits] and [profiles.*] apply
                      (default $PYNOX_CONFIG, then ./pynox.toml)
  --workers=N         one-shot requests run at once (default [pool] workers, else 2)
  --preload=MODULE    import MODULE once, for every request to start with; repeatable
  --warmup=CODE       code that readies what was preloaded (replaces [pool] warmup)
  --package-dir=PATH  installed packages every request may import; repeatable
"""


def parse_options(argv: list[str]) -> PoolOptions:
    options = PoolOptions()
    i = 0
    while i < len(argv):
        name, has_value, value = argv[i].partition("=")
        if name not in _POOL_FLAGS:
            from pynox.flag_refusal import flag_refused  # only on this error path

            raise flag_refused("pynox pool", name, _POOL_FLAGS)
        if not has_value:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value, as in {name}=VALUE")
            i += 1
            value = argv[i]
        if name == "--config":
            options.config = value
        elif name == "--preload":
            if not is_module_name(value):  # [pool].preload's are checked as it is read
                raise UsageError(
                    f"--preload={value} is not a module name; give one importable name per"
                    " flag, like --preload=numpy.linalg"
                )
            options.preload.append(value)
        elif name == "--warmup":
            options.warmup = value
        elif name == "--package-dir":
            if not value or "\0" in value:
                raise UsageError(f"--package-dir={value!r} is not a path; give a directory")
            options.package_dirs.append(value)
        else:
            options.workers = units.parse_count(value, "--workers")
        i += 1
    return options


def pool_command(argv: list[str]) -> int:
    if argv in (["--help"], ["-h"]):  # as `pynox doctor --help` answers
        sys.stdout.write(USAGE)
        return 0
    options = parse_options(argv)
    return PoolServer(options).serve()
