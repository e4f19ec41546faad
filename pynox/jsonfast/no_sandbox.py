"""`pynox --no-sandbox`: CPython itself, with json.dump's fast path armed.

The launcher (and pynox.cli.main without it) execs CPython with STARTUP_VARIABLE set
to its own pid, which pynox-json.pth's module `_pynox_json` (sitehook/) reads: a
variable left from another process, or CPython started with -S (no .pth at all),
arms nothing.
"""

import os

STARTUP_VARIABLE = "PYNOX_JSON_FAST_PATH"  # read by _pynox_json (sitehook/)


def no_site(python_args: "list[str]") -> bool:
    """Whether a CPython command line holds -S before its program (then no .pth runs)."""
    i = 0
    while i < len(python_args):
        arg = python_args[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            return False  # the program: a script, "-" or what follows "--"
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        for j, flag in enumerate(arg[1:], start=1):
            if flag in "cm":
                return False
            if flag == "S":
                return True
            if flag in "WX":
                if j == len(arg) - 1:
                    i += 1  # the option's value is the next argument
                break
        i += 1
    return False


def startup_environment(python_args: "list[str]") -> "dict[str, str]":
    """The environment for exec'ing CPython with python_args, as the launcher makes it."""
    environment = dict(os.environ)
    if STARTUP_VARIABLE not in environment and not no_site(python_args):
        environment[STARTUP_VARIABLE] = str(os.getpid())
    return environment
