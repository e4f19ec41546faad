"""`pynox mcp`: parse its command line, then serve the MCP tools until the client leaves."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from pynox import lean_os, units
from pynox.errors import ConfigError, PynoxError, UsageError
from pynox.policy.location import find_config_path

USAGE = "pynox mcp [--config FILE] [--profile NAME] [--workers N] [--http [HOST:]PORT]"
DESCRIPTION = (
    "Serve run_python, python_session and close_python_session over the Model Context "
    "Protocol: on standard input and output, or with --http as streamable HTTP at "
    "http://HOST:PORT/mcp. What the code may touch comes from pynox.toml ([permissions], "
    "then --profile), never from the client."
)
MISSING_SDK = "pynox mcp needs the MCP SDK, which the mcp extra installs: pip install 'pynox[mcp]'"
LOOPBACK = "127.0.0.1"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"mcp: {message} (usage: {USAGE})")


def parse(argv: list[str]) -> argparse.Namespace:
    # No abbreviations: `pynox` and `pynox pool` take a flag only as it is spelled.
    parser = _Parser(prog="pynox mcp", usage=USAGE, description=DESCRIPTION, allow_abbrev=False)
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="pynox.toml to read (default $PYNOX_CONFIG, then ./pynox.toml)",
    )
    parser.add_argument(
        "--profile", metavar="NAME", help="apply [profiles.NAME] of the configuration"
    )
    parser.add_argument("--workers", metavar="N", help="one-shot runs at once ([pool] workers)")
    parser.add_argument(
        "--http",
        metavar="[HOST:]PORT",
        help=f"serve streamable HTTP instead of stdio (HOST defaults to {LOOPBACK})",
    )
    options, unknown = parser.parse_known_args(argv)
    if unknown:
        raise _unknown(unknown[0], parser)
    if options.workers is not None:
        # The sentences pynox pool gives.
        options.workers = units.parse_count(options.workers, "mcp: --workers")
    if options.http is not None:
        options.host, options.port = _address(options.http)
    return options


def _unknown(given: str, parser: argparse.ArgumentParser) -> UsageError:
    """A mistyped flag named with the closest one, as `pynox` and `pynox pool` name it."""
    from pynox.flag_refusal import flag_refused

    if not given.startswith("-"):
        return UsageError(f"mcp: {given} is not a flag; pynox mcp takes flags only ({USAGE})")
    flags = [flag for action in parser._actions for flag in action.option_strings]
    return flag_refused(
        "pynox mcp", given.partition("=")[0], [f for f in flags if f not in ("-h", "--help")]
    )


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or LOOPBACK
    if (
        not (port.isascii() and port.isdigit())
        or len(port.lstrip("0")) > 5
        or not 0 < int(port) < 65536
    ):
        raise UsageError(f"mcp: --http={text}: give a port such as 8000 or 127.0.0.1:8000")
    return host, int(port)


def mcp_command(argv: list[str]) -> int:
    try:
        options = parse(argv)
    except SystemExit as exc:  # --help, printed
        return exc.code if isinstance(exc.code, int) else 0
    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UsageError(MISSING_SDK) from None
    import anyio

    from pynox.api.pool import Pool
    from pynox.mcp.server import build_server, listen, serve_http, serve_stdio
    from pynox.mcp.tools import PythonTools

    if options.http is None:
        try:  # before the pool starts, whose pipes would take descriptor 0 when it is free
            os.fstat(0)
        except OSError:
            raise UsageError(
                "mcp: standard input is closed; an MCP client starts pynox mcp with a pipe "
                "there, or serve HTTP with --http PORT"
            ) from None
    else:
        try:  # before the pool starts: nothing to stop when the address cannot be had
            sock = listen(options.host, options.port)
        except OSError as exc:
            raise UsageError(
                f"mcp: --http={options.http}: cannot listen there ({exc.strerror or exc}); "
                "give a free port, and a name or address of this machine"
            ) from None
    config = options.config
    if config is not None:  # named as its flag, not as the API's config=
        try:
            config = find_config_path(config, os.environ, lean_os.getcwd())
        except PynoxError as exc:
            raise UsageError(f"mcp: {exc.message}") from None
    try:
        # Started now, so that it is warm by the first call.
        pool = Pool(workers=options.workers, config=config)
    except ValueError as exc:
        raise UsageError(f"mcp: {exc}") from None
    try:
        tools = PythonTools(pool, options.profile)
    except (ValueError, ConfigError) as exc:  # --profile names no profile of the config
        pool.close()
        raise UsageError(f"mcp: {exc}") from None
    server = build_server(tools)
    try:
        if options.http is None:
            anyio.run(serve_stdio, server)
        else:
            if options.host not in (LOOPBACK, "localhost", "::1"):
                sys.stderr.write(
                    f"pynox mcp: serving on {options.host}: anyone who reaches this address "
                    "can run code under this policy\n"
                )
            anyio.run(serve_http, server, options.host, sock)
    except (KeyboardInterrupt, asyncio.CancelledError):
        # Ctrl-C: before Python 3.11, anyio cancels the served task, which ends in
        # CancelledError rather than KeyboardInterrupt.
        interrupted = True
    else:
        interrupted = False
    finally:
        tools.close()
        pool.close()
    if interrupted and options.http is None:
        # The thread reading the client's next line cannot be stopped, and before Python
        # 3.12 the interpreter waits for it at exit: end now, the pool closed.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0
