"""Parse pynox's command line: its own long flags, then Python's.

Pynox's flags are long options CPython never uses, so they come first; from the
program on, everything belongs to Python. Kept free of argparse, whose import
alone would cost a large part of pynox's start-up budget.
"""

import sys

from pynox.errors import UsageError
from pynox.policy.grants import (
    DURATION,
    GRANT_FIELDS,
    NAMES,
    PATHS,
    SIZE,
    SWITCH,
    VARIABLE_NAME_RULE,
    is_variable_name,
)

# Interpreter options the sandbox already honours, so they are accepted as is (-P, which
# keeps the program's directory off sys.path, from 3.11 on, as python takes it), in the
# order the usage and the refusal of any other name them.
_SAFE_PATH = "P" if sys.version_info >= (3, 11) else ""
ACCEPTED_PYTHON_OPTIONS = "IEsSuBq" + _SAFE_PATH
# python's -h, -? and -V, which pynox answers itself (its usage, its version).
HELP_AND_VERSION_LETTERS = frozenset("h?V")
# python's options whose value may follow the letter (-c and -m aside): -Werror is -W
# with its value, never a mistyped pynox flag.
VALUE_OPTION_LETTERS = frozenset("WX")
# Every option letter this python takes (-P from 3.11 on): one it does not take is
# refused as unknown, not sent to --no-sandbox, where python would refuse it too.
PYTHON_OPTION_LETTERS = frozenset("bBcdEhiImOqRsStuvVWxX?" + _SAFE_PATH)
# The environment variables python reads as one of those options, unless -E or -I tells it
# to ignore its environment: they count as the option, as under python. (The other
# PYTHON* variables are ignored, as under `python -I`.)
OPTION_VARIABLES = {"u": "PYTHONUNBUFFERED", "B": "PYTHONDONTWRITEBYTECODE"}
if _SAFE_PATH:
    OPTION_VARIABLES[_SAFE_PATH] = "PYTHONSAFEPATH"
# Those python reads as text, not as a number: set to anything but "", even "0", they count.
_SET_WHEN_NOT_EMPTY = frozenset({"PYTHONSAFEPATH"})

# Long flags and the attribute of Invocation they fill: every grant's (pynox.policy.grants),
# and the command's own.
_LIST_FLAGS = {f.flag: f.name for f in GRANT_FIELDS if f.kind in (PATHS, NAMES)}
_NAME_FLAGS = frozenset(f.flag for f in GRANT_FIELDS if f.kind == NAMES)
_VALUE_FLAGS = {f.flag: f.name for f in GRANT_FIELDS if f.kind in (DURATION, SIZE)}
_VALUE_FLAGS.update({"--config": "config", "--profile": "profile"})
_SWITCHES = {f.flag: f.name for f in GRANT_FIELDS if f.kind == SWITCH}
_SWITCHES["--json"] = "json"
# Every flag that grants or sets something for the run.
_OWN_FLAGS = frozenset([*_LIST_FLAGS, *_VALUE_FLAGS, *_SWITCHES])
# Flags that must come alone or first, handled before parsing.
_OTHER_FLAGS = ("--no-sandbox", "--help", "--version")

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

USAGE = """\
usage: pynox [FLAGS] [-IEsSuBqP] [SCRIPT | -c CODE | -m MODULE | -] [ARGS...]
       pynox --no-sandbox [PYTHON ARGS...]
       pynox doctor [--json]
       pynox pool [--config FILE] [--workers N] [--preload MODULE]... [--warmup CODE]
                  [--package-dir PATH]...
       pynox mcp [--config FILE] [--profile NAME] [--workers N] [--http [HOST:]PORT]
       pynox --version

Runs a Python program like `python` does, under a kernel-enforced sandbox:
it may read its own directory and the standard library, nothing else, unless
you grant more. With no program, or with -, the program is read from standard
input (as `python` does when standard input is not a terminal).

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

NO_PROGRAM = (
    "give a program to run: a script, -c CODE, -m MODULE, or pipe it into standard input "
    "(pynox --help lists the flags; pynox --no-sandbox starts the interactive interpreter)"
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
        "python_argv",
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
        # the code or the module name ("-" or "" for stdin, as given); args are the
        # program's own arguments.
        self.kind = ""
        self.target = ""
        self.args: list[str] = []
        # Everything from Python's options on: python's own command line, which the
        # program finds in sys.orig_argv after the executable.
        self.python_argv: list[str] = []


def _stdin_is_terminal() -> bool:
    stream = sys.stdin
    if stream is None:  # closed: python runs it as an empty program
        return False
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


def parse(
    argv: list[str], stdin_is_terminal: "Callable[[], bool]" = _stdin_is_terminal
) -> "Invocation":
    """Parses the arguments after the command name.

    With no program, the program is standard input unless that is a terminal
    (python would start its interactive interpreter there; pynox has none).
    """
    inv = Invocation()
    i = _parse_pynox_flags(argv, inv)
    _parse_python_part(argv, i, inv, stdin_is_terminal)
    return inv


def asks_for_json(argv: list[str]) -> bool:
    """Whether --json is among pynox's flags, read as parse reads them: for a command
    line parse refuses, so that automation gets the refusal as a JSON result too."""
    i = 0
    while i < len(argv) and argv[i].startswith("--") and argv[i] != "--":
        name, has_value, _ = argv[i].partition("=")
        if name == "--json":
            return True
        separate_value = not has_value and (name in _LIST_FLAGS or name in _VALUE_FLAGS)
        i += 2 if separate_value else 1
    return False


def options_in_effect(given: "set[str]", environ: "Mapping[str, str]") -> "set[str]":
    """The interpreter options a run gets: those given, and those python would take
    from its environment (OPTION_VARIABLES)."""
    if "E" in given or "I" in given:
        return set(given)
    return given | {letter for letter, name in OPTION_VARIABLES.items() if _is_set(environ, name)}


def _is_set(environ: "Mapping[str, str]", name: str) -> bool:
    """Whether python takes the variable as set: not empty and, if it is an integer
    (as C's strtol reads one), not 0 (CPython's _Py_get_env_flag); PYTHONSAFEPATH only
    not empty."""
    value = environ.get(name, "")
    if name in _SET_WHEN_NOT_EMPTY:
        return bool(value)
    digits = value.lstrip(" \t\n\v\f\r")  # what strtol skips, then a sign
    digits = digits[1:] if digits[:1] in ("+", "-") else digits
    if digits.isascii() and digits.isdigit():
        return digits.strip("0") != ""  # out of int's range: set, as any other value is
    return bool(value)


def known_flags() -> list[str]:
    return [*_SWITCHES, *_LIST_FLAGS, *_VALUE_FLAGS, *_OTHER_FLAGS]


def unknown_flag(name: str) -> UsageError:
    from pynox.flag_refusal import flag_refused  # only on this error path

    return flag_refused("pynox", name, known_flags(), "run pynox --help to see the flags it takes")


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
            if name in _NAME_FLAGS and not is_variable_name(value):
                raise UsageError(
                    f"{name}={value} is not an environment variable name; {VARIABLE_NAME_RULE}"
                )
            if name in _LIST_FLAGS:
                getattr(inv, _LIST_FLAGS[name]).append(value)
            else:
                setattr(inv, _VALUE_FLAGS[name], value)
            i += 1
            continue
        if name == "--no-sandbox":
            if has_value and i == 0:
                raise UsageError(f"{name} takes no value; write it alone, as {name}")
            raise UsageError(
                "--no-sandbox must come first and takes no other pynox flag, "
                "as in: pynox --no-sandbox app.py"
            )
        if name in ("--help", "--version"):
            raise UsageError(f"{name} must be given alone, as in: pynox {name}")
        raise unknown_flag(name)
    return i


def _flag_after_python_options(argv: list[str], first: int, i: int) -> UsageError:
    """The refusal of one of pynox's flags after Python's options, with the command line
    that has the flag (and its value, if it came apart) before them."""
    import shlex  # only on this error path

    name, has_value, _ = argv[i].partition("=")
    end = i + 1 if has_value or name in _SWITCHES else i + 2
    if end > len(argv):
        return UsageError(f"{name} needs a value, as in {name}=VALUE, before Python's options")
    moved = [*argv[:first], *argv[i:end], *argv[first:i], *argv[end:]]
    return UsageError(
        f"{name} is one of pynox's flags, which go before Python's options: "
        f"{shlex.join(['pynox', *moved])}"
    )


def _parse_python_part(
    argv: list[str], i: int, inv: "Invocation", stdin_is_terminal: "Callable[[], bool]"
) -> None:
    first = i  # where Python's options start
    inv.python_argv = argv[first:]
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg == "-" or not arg.startswith("-"):
            break
        if arg.startswith("--"):
            if arg.partition("=")[0] in _OWN_FLAGS:
                raise _flag_after_python_options(argv, first, i)
            if arg in ("--help", "--version"):  # pynox's own answer, not python's
                raise UsageError(f"{arg} must be given alone, as in: pynox {arg}")
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
            if letter in HELP_AND_VERSION_LETTERS:  # pynox answers them, as --help, --version
                raise UsageError(f"-{letter} must be given alone, as in: pynox -{letter}")
            if letter not in ACCEPTED_PYTHON_OPTIONS:
                if pos == 1 and len(arg) > 2 and letter not in VALUE_OPTION_LETTERS:
                    # -allow-read=. is a pynox flag missing a dash, not -a -l -l...
                    from pynox.flag_refusal import closest_flag

                    if closest_flag("-" + arg.partition("=")[0], known_flags()) is not None:
                        raise unknown_flag(arg.partition("=")[0])
                if letter not in PYTHON_OPTION_LETTERS:
                    raise UsageError(
                        f"unknown option -{letter}: python has no such option either; "
                        "run pynox --help to see what pynox takes"
                    )
                raise UsageError(
                    f"the interpreter option -{letter} needs --no-sandbox "
                    f"(pynox --no-sandbox {arg} ...); in the sandbox only "
                    f"{' '.join('-' + each for each in ACCEPTED_PYTHON_OPTIONS)} are accepted"
                )
            inv.python_options.add(letter)
        i += 1
    if i >= len(argv):
        if stdin_is_terminal():
            raise UsageError(NO_PROGRAM)
        inv.kind = "stdin"  # python's sys.argv is then [""]
        return
    inv.target = argv[i]
    if inv.target == "-" and stdin_is_terminal():
        raise UsageError(NO_PROGRAM)  # python would start its interactive interpreter
    inv.kind = "stdin" if inv.target == "-" else "script"
    inv.args = argv[i + 1 :]
