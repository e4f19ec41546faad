"""The `pynox` command: parse, resolve the policy, run, report.

The CLI never touches the kernel itself: the runner forks and the child
confines itself. Imports stay lazy, because every millisecond here is added to
every run (TOML only when a config file changed, JSON only for --json).
"""

import posix
import sys

from pynox import __version__, lean_os
from pynox.errors import (
    EXIT_FLUSH_FAILED,
    EXIT_SETUP_FAILURE,
    CommandNotText,
    ProgramNotFound,
    PynoxError,
    UsageError,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn

    from pynox.cli.arguments import Invocation
    from pynox.engine.supervisor import Outcome
    from pynox.policy.grants import Grants
    from pynox.policy.resolve import Policy


# The errors that stand for python's own (its wording and status), which it writes on
# stderr and flushes at exit: where that fails, python exits with EXIT_FLUSH_FAILED.
_PYTHON_S_OWN_ERRORS = (ProgramNotFound, CommandNotText)


def _program_running() -> bool:
    child = sys.modules.get("pynox.engine.child")
    return bool(child is not None and child.program_started)


def main() -> "NoReturn":
    try:
        code = dispatch(sys.argv[1:])
    except Exception as exc:
        if _program_running():
            raise  # the program ended this way: CPython reports it
        if isinstance(exc, PynoxError):
            code = exc.exit_code
            if not _print_line(exc.user_line()) and isinstance(exc, _PYTHON_S_OWN_ERRORS):
                code = EXIT_FLUSH_FAILED  # python's status when its message is lost so
        else:
            _print_line(f"pynox: internal error: {exc!r}; please report it with the command line")
            code = EXIT_SETUP_FAILURE
    except KeyboardInterrupt:
        if _program_running():
            raise
        from pynox.interrupted import die_interrupted

        die_interrupted()
    _leave(code)


def _print_line(text: str) -> bool:
    """Writes a line on stderr; False if writing it failed (not when stderr is closed,
    where python too says nothing)."""
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except AttributeError:  # None: started with it closed
        pass
    except (OSError, ValueError):
        return False
    return True


def _leave(code: int) -> "NoReturn":
    """Leaves without finalizing: the supervisor has nothing left to clean up."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            code = code or EXIT_FLUSH_FAILED
    posix._exit(code)


def dispatch(argv: list[str]) -> int:
    if not argv:
        return run_command(argv)  # the program on standard input, as python does
    first = argv[0]
    if first in ("--help", "-h", "-?"):
        from pynox.cli.arguments import USAGE

        sys.stdout.write(USAGE)
        return 0
    if argv in (["--version"], ["-V"]):
        major, minor, micro = sys.version_info[:3]
        sys.stdout.write(f"pynox {__version__} (CPython {major}.{minor}.{micro})\n")
        return 0
    if first == "--no-sandbox":
        sys.stdout.flush()
        from pynox.jsonfast.no_sandbox import startup_environment

        posix.execve(sys.executable, [sys.executable, *argv[1:]], startup_environment(argv[1:]))
    if first in ("doctor", "pool", "mcp"):
        from pynox.engine.runner import end_start_up

        end_start_up()
    if first == "doctor":
        from pynox.cli.doctor import doctor_command

        return doctor_command(argv[1:])
    if first == "pool":
        from pynox.pool.command import pool_command

        return pool_command(argv[1:])
    if first == "mcp":
        from pynox.cli.mcp import mcp_command

        return mcp_command(argv[1:])
    return run_command(argv)


def run_command(argv: list[str]) -> int:
    from pynox.cli import arguments as cmdline

    try:
        inv = cmdline.parse(argv)
    except UsageError as exc:
        if not cmdline.asks_for_json(argv):
            raise
        return _refuse_as_json(exc)
    if not inv.json:
        return _run(inv)
    try:
        return _run(inv)
    except PynoxError as exc:
        if _program_running():
            raise
        return _refuse_as_json(exc)


def _refuse_as_json(exc: PynoxError) -> int:
    """Automation asked for JSON: it gets the refusal as a result too."""
    from pynox.engine.result import print_refusal

    _print_line(f"pynox: {exc.message}")
    return print_refusal(type(exc).__name__, exc.message, exc.exit_code)


def _run(inv: "Invocation") -> int:
    from pynox.cli import arguments as cmdline
    from pynox.engine import program, runner, scratch
    from pynox.policy.resolve import build_policy

    cwd = lean_os.getcwd()
    environ = lean_os.environment()
    grants, config_path, config_package_dirs = _grants(inv, cwd, environ)
    options = cmdline.options_in_effect(inv.python_options, environ)
    safe_path = "I" in options or "P" in options  # as python: no program directory on sys.path
    if inv.kind == "script":
        prog = program.script(inv.target, inv.args, safe_path)
    elif inv.kind == "code":
        prog = program.code(inv.target, inv.args, safe_path)
    elif inv.kind == "module":
        prog = program.module(inv.target, inv.args, safe_path, cwd)
    else:
        prog = program.stdin(inv.target, inv.args, safe_path)
    prog.options = frozenset(options)
    prog.command_line = inv.python_argv
    # Never a folder that holds scratch directories (/tmp, /): a script there, or -m run
    # there, would read what other runs keep in theirs, granted by no one.
    implicit = [
        path for path in prog.implicit_read if not scratch.holds_scratch(path, scratch.bases())
    ]
    policy = build_policy(grants, implicit, environ, cwd)
    if policy.allow_write:
        from pynox.policy import trusted as trusted_paths
        from pynox.policy.bind_mounts import mounts

        trusted = trusted_paths.installation()
        trusted += trusted_paths.configuration([config_path], cwd, environ)
        listing = mounts()
        trusted_paths.refuse_trusted_writes(policy, trusted, listing)
        trusted_paths.refuse_scratch_base_writes(policy, scratch.bases(), listing)
        if trusted_paths.may_hold_links(policy):
            trusted_paths.refuse_linked_writes(policy, trusted_paths.linked_files(), listing)
    outcome = runner.run(
        prog,
        policy,
        capture=inv.json,
        unbuffered="u" in options,
        no_site="S" in options,
        dont_write_bytecode="B" in options,
        config_package_dirs=config_package_dirs,
        config_path=config_path,
    )
    if inv.json:
        from pynox.engine.result import print_json_result

        return print_json_result(outcome, policy)
    return _finish_plain(outcome, policy)


def _grants(
    inv: "Invocation", cwd: str, environ: "Mapping[str, str]"
) -> "tuple[Grants, str | None, list[str]]":
    """Configuration, then the profile, then flags: each adds to the one before; and
    every package directory the configuration names, for the hint of a failed import."""
    from pynox.policy.location import find_config_path

    flags = _flag_grants(inv, cwd, environ)
    path = find_config_path(inv.config, environ, cwd)
    if path is None:
        if inv.profile is not None:
            raise UsageError(
                f"--profile={inv.profile} needs a pynox.toml, and none was found; pass "
                "--config=PATH, set PYNOX_CONFIG, or run where pynox.toml is"
            )
        return flags, None, []
    from pynox.engine.runner import run_from_image

    run_from_image("config")
    from pynox.policy.cache import load_config

    config = load_config(path, environ)
    grants: Grants = config.permissions
    if inv.profile is not None:
        grants = grants.merged(config.profile(inv.profile))
    # As found: a link to it is protected too.
    return grants.merged(flags), path, config.package_dirs_named()


def _home_expanded(path: str, environ: "Mapping[str, str]") -> str:
    """`~` as pynox.toml reads it: the shell leaves it alone after `--allow-read=`."""
    if not path.startswith("~"):
        return path
    from pynox.policy.user_paths import expand_home

    return expand_home(path, environ)


def _flag_grants(inv: "Invocation", cwd: str, environ: "Mapping[str, str]") -> "Grants":
    from pynox.engine.runner import run_from_image
    from pynox.policy.grants import GRANT_FIELDS, NAMES, PATHS, SWITCH, Grants

    grants = Grants()
    for field in GRANT_FIELDS:
        given = getattr(inv, field.name)
        if field.kind == PATHS:
            paths = [_home_expanded(path, environ) for path in given]
            setattr(grants, field.name, [lean_os.join(cwd, path) for path in paths])
        elif field.kind == NAMES:
            setattr(grants, field.name, list(given))
        elif field.kind == SWITCH:
            setattr(grants, field.name, True if given else None)
        elif given is not None:  # a limit: what reads it runs from the image at once
            run_from_image("limit")
            setattr(grants, field.name, field.parse(given, field.flag))
    return grants


def _finish_plain(outcome: "Outcome", policy: "Policy") -> int:
    if outcome.timed_out:
        from pynox.engine.time_limit import timeout_line

        _print_line(timeout_line(policy, stopped=outcome.stopped))
        return outcome.exit_code
    if policy.memory is not None:
        from pynox.engine.result import signal_line

        line = signal_line(outcome, policy)
        if line is not None:
            _print_line(line)
    if outcome.signal is not None:
        _die_like(outcome.signal)
    return outcome.exit_code


def _die_like(signum: int) -> "NoReturn":
    """Ends the supervisor by the signal that ended its child, as a shell expects."""
    import _signal
    import resource

    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    if signum not in (_signal.SIGKILL, _signal.SIGSTOP):  # these have no handler to reset
        _signal.signal(signum, _signal.SIG_DFL)
    posix.kill(posix.getpid(), signum)
    posix._exit(128 + signum)
