"""Parse pynox's command line: its own long flags, then Python's.

Pynox's flags are long options CPython never uses, so they come first; from the
program on, everything belongs to Python. Kept free of argparse, whose import
alone would cost a large part of pynox's start-up budget.
"""

from pynox.errors import UsageError
from pynox.policy.grants import DURATION, GRANT_FIELDS, NAMES, PATHS, SIZE, SWITCH

# Interpreter options the sandbox already honours, so they are accepted as is.
ACCEPTED_PYTHON_OPTIONS = frozenset("IEsSuBq")

# Long flags and the attribute of Invocation they fill: every grant's (pynox.policy.grants),
# and the command's own.
_LIST_FLAGS = {f.flag: f.name for f in GRANT_FIELDS if f.kind in (PATHS, NAMES)}
_VALUE_FLAGS = {f.flag: f.name for f in GRANT_FIELDS if f.kind in (DURATION, SIZE)}
_VALUE_FLAGS.update({"--config": "config", "--profile": "profile"})
_SWITCHES = {f.flag: f.name for f in GRANT_FIELDS if f.kind == SWITCH}
_SWITCHES["--json"] = "json"

USAGE = """\
usage: pynox [FLAGS] [-IEsSuBq] (SCRIPT | -c CODE | -m MODULE | -) [ARGS...]
       pynox --no-sandbox [PYTHON ARGS...]
       pynox doctor [--json]
       pynox pool [--config FILE] [--workers N] [--preload MODULE]...
       pynox --version

Runs a Python program like `python` does, under a kernel-enforced sandbox:
it may read its own directory and the standard library, nothing else, unless
you grant more.

flags:
{grant_flags}
  --config=PATH         pynox.toml to read (default $PYNOX_CONFIG, then ./pynox.toml)
  --profile=NAME        apply [profiles.NAME] of the configuration
  --json                print one JSON result instead of passing output through
  --no-sandbox          run CPython with the rest of the command line, unrestricted
""".format(
    grant_flags="\n".join(
        f"  {f.flag + ('=' + f.metavar if f.metavar else ''):<22}{f.help}" for f in GRANT_FIELDS
    )
)


class Invocation:
    """What the user asked for on the command line."""

    __slots__ = (
        *(field.name for field in GRANT_FIELDS),
        "config",
        "profile",
        "json",
        "python_options",
        "kind",
        "target",
        "args",
    )

    # The grants as given: a list per list grant, a bool per switch, else the text or None.
    allow_read: list[str]
    allow_write: list[str]
    package_dirs: list[str]
    allow_env: list[str]
    allow_network: bool
    timeout: str | None
    memory: str | None
    max_output: str | None
    max_file_size: str | None

    def __init__(self) -> None:
        for field in GRANT_FIELDS:
            empty: list[str] | bool | None = None
            if field.kind in (PATHS, NAMES):
                empty = []
            elif field.kind == SWITCH:
                empty = False
            setattr(self, field.name, empty)
        self.config: str | None = None
        self.profile: str | None = None
        self.json = False
        self.python_options: set[str] = set()
        # kind is "script", "code", "module" or "stdin"; target is the path,
        # the code or the module name; args are the program's own arguments.
        self.kind = ""
        self.target = ""
        self.args: list[str] = []


def parse(argv: list[str]) -> "Invocation":
    """Parses the arguments after the command name."""
    inv = Invocation()
    i = _parse_pynox_flags(argv, inv)
    _parse_python_part(argv, i, inv)
    return inv


def _parse_pynox_flags(argv: list[str], inv: "Invocation") -> int:
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("--") or arg == "--":
            return i
        name, has_value, value = arg.partition("=")
        if name in _SWITCHES:
            if has_value:
                raise UsageError(f"{name} takes no value; write it alone, as {name}")
            setattr(inv, _SWITCHES[name], True)
            i += 1
            continue
        if name in _LIST_FLAGS or name in _VALUE_FLAGS:
            if not has_value:
                if i + 1 >= len(argv):
                    raise UsageError(f"{name} needs a value, as in {name}=VALUE")
                value = argv[i + 1]
                i += 1
            if not value:
                raise UsageError(f"{name} needs a non-empty value, as in {name}=VALUE")
            if name in _LIST_FLAGS:
                getattr(inv, _LIST_FLAGS[name]).append(value)
            else:
                setattr(inv, _VALUE_FLAGS[name], value)
            i += 1
            continue
        if name == "--no-sandbox":
            raise UsageError(
                "--no-sandbox must come first and takes no other pynox flag, "
                "as in: pynox --no-sandbox app.py"
            )
        if name in ("--help", "--version"):
            raise UsageError(f"{name} must be given alone, as in: pynox {name}")
        raise UsageError(f"unknown flag {name}; run pynox --help to see the flags")
    return i


def _parse_python_part(argv: list[str], i: int, inv: "Invocation") -> None:
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            raise UsageError(
                f"the interpreter option {arg} needs --no-sandbox "
                f"(pynox --no-sandbox {arg} ...); pynox's own flags go before the program"
            )
        # A group of short options such as -Bu, possibly ending in c or m.
        for pos in range(1, len(arg)):
            letter = arg[pos]
            if letter in "cm":
                rest = arg[pos + 1 :]
                if not rest:
                    if i + 1 >= len(argv):
                        what = "code" if letter == "c" else "a module name"
                        raise UsageError(f"-{letter} needs {what} after it")
                    rest = argv[i + 1]
                    i += 1
                inv.kind = "code" if letter == "c" else "module"
                inv.target = rest
                inv.args = argv[i + 1 :]
                return
            if letter not in ACCEPTED_PYTHON_OPTIONS:
                raise UsageError(
                    f"the interpreter option -{letter} needs --no-sandbox "
                    f"(pynox --no-sandbox -{letter} ...); in the sandbox only "
                    "-I -E -s -S -u -B -q are accepted"
                )
            inv.python_options.add(letter)
        i += 1
    if i >= len(argv):
        raise UsageError(
            "give a program to run: a script, -c CODE or -m MODULE "
            "(for the interactive interpreter use pynox --no-sandbox)"
        )
    inv.target = argv[i]
    inv.kind = "stdin" if inv.target == "-" else "script"
    inv.args = argv[i + 1 :]
