"""`python -m bundler COMMAND`: the build toolchain's command line.

Every failure a user can cause is reported as one line, `bundler: ...`, and
exit status 1; only a bug in the bundler shows a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from bundler import log
from bundler.errors import BundlerError


class _Parser(argparse.ArgumentParser):
    """argparse, whose usage errors are the bundler's one line too (subcommands included)."""

    def error(self, message: str) -> NoReturn:
        raise BundlerError(f"{message}; see `{self.prog} --help`")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m bundler", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    command = commands.add_parser("targets", help="list the matrix, one cell a line")
    command.add_argument("--json", action="store_true")
    command.add_argument(
        "--has",
        nargs=2,
        metavar=("TARGET", "PYTHON"),
        help="print nothing if the matrix has this cell, else fail with what it has",
    )

    commands.add_parser("host-target", help="print the target this machine is")

    command = commands.add_parser("default-python", help="the CPython minor a bundle defaults to")
    command.add_argument("--runtime", help="a runtime archive or folder (default: PYNOX_RUNTIME)")

    command = commands.add_parser("pack-runtime", help="a local CPython as a PBS-layout archive")
    command.add_argument("--python", required=True, help="the CPython executable to pack")
    command.add_argument("--output", required=True, type=Path, help="the .tar.gz to write")
    command.add_argument("--with-tests", action="store_true", help="keep the test suite")

    command = commands.add_parser("fetch", help="get a verified runtime archive into the cache")
    _runtime_options(command)

    command = commands.add_parser("build-runtime", help="build runtime/ for a target and check it")
    _runtime_options(command)
    command.add_argument("--build-dir", type=Path, help="where CMake builds (default: a cache)")
    command.add_argument("--compiler", choices=("auto", "zig", "native"), default="auto")
    command.add_argument(
        "--no-runtime",
        action="store_true",
        help="do not look for a runtime: launcher and core library only",
    )
    command.add_argument(
        "--headers",
        type=Path,
        help="compile the extensions against these CPython headers (a check; "
        "a bundle always uses its runtime's own)",
    )
    command.add_argument(
        "--run", action="store_true", help="also run the launcher, natively or under qemu-user"
    )

    command = commands.add_parser("bundle", help="fetch, build, assemble and archive a bundle")
    _runtime_options(command)
    command.add_argument("--out", type=Path, default=Path("dist"), help="output folder")
    command.add_argument(
        "--work", type=Path, help="an empty scratch folder (default: a temporary one)"
    )
    command.add_argument("--compiler", choices=("auto", "zig", "native"), default="auto")
    command.add_argument(
        "--wheelhouse", type=Path, help="a folder of wheels to take cffi from, instead of PyPI"
    )
    command.add_argument(
        "--sign-key",
        type=Path,
        help="an OpenSSH private key: sign the archive into ARCHIVE.sig (ssh-keygen -Y sign)",
    )

    command = commands.add_parser("wheel", help="build, repair and check the host wheel")
    command.add_argument("--out", type=Path, default=Path("dist"))
    command.add_argument("--compiler", choices=("auto", "zig", "native"), default="auto")
    command.add_argument("--no-smoke", action="store_true", help="skip the fresh-venv check")
    command.add_argument(
        "--check-reproducible",
        action="store_true",
        help="build it a second time in another folder and require the same bytes",
    )

    command = commands.add_parser(
        "refresh-pins", help="rewrite the runtime pins from checksum lists"
    )
    command.add_argument("--tag", help="the release to pin (default: the pinned one)")
    command.add_argument(
        "--sums", type=Path, action="append", default=[], help="a copy of a SHA256SUMS"
    )
    command.add_argument(
        "--table",
        type=Path,
        action="append",
        default=[],
        help="a checksum table (dist-config/pbs-checksums/ format)",
    )
    command.add_argument(
        "--pbs-installer",
        nargs="?",
        const="",
        action="append",
        default=[],
        metavar="VERSIONS_JSON",
        help="pbs-installer's versions.json (default: the installed package's)",
    )
    commands.add_parser(
        "refresh-wheel-pins", help="rewrite the wheel pins from PyPI's metadata (pip's report)"
    )
    return parser


def _runtime_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--target", help="a target of dist-config (default: this machine's)")
    command.add_argument("--python", dest="minor", help="CPython minor, e.g. 3.12")
    command.add_argument("--runtime", help="a local runtime archive or folder (PYNOX_RUNTIME)")
    command.add_argument("--mirror", help="a mirror URL or folder (PYNOX_PBS_MIRROR)")
    command.add_argument("--sha256", help="the checksum to trust (PYNOX_RUNTIME_SHA256)")


def run(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    if args.command == "targets":
        from bundler.cli import list_targets

        if args.has:
            from bundler.cli import check_cell

            return check_cell(*args.has)
        return list_targets(args.json)
    if args.command == "host-target":
        from bundler.host import host_target

        log.output(host_target())
        return 0
    if args.command == "default-python":
        from bundler.cli import default_python

        return default_python(args.runtime)
    if args.command == "pack-runtime":
        from bundler.cli import pack

        return pack(args.python, args.output, args.with_tests)
    if args.command == "fetch":
        from bundler.cli import fetch

        return fetch(args)
    if args.command == "build-runtime":
        from bundler.cli import build_runtime

        return build_runtime(args)
    if args.command == "bundle":
        from bundler.cli import bundle

        return bundle(args)
    if args.command == "wheel":
        from bundler.cli import out_folder
        from bundler.wheel import build_wheel

        return build_wheel(
            out_folder(args.out),
            args.compiler,
            smoke_test=not args.no_smoke,
            check_reproducible=args.check_reproducible,
        )
    if args.command == "refresh-pins":
        from bundler.pins import Sources, refresh

        installer = tuple(Path(p) if p else None for p in args.pbs_installer)
        return refresh(args.tag, Sources(tuple(args.sums), tuple(args.table), installer))
    if args.command == "refresh-wheel-pins":
        from bundler import wheel_pins

        return wheel_pins.refresh()
    raise AssertionError(args.command)


def main() -> None:
    try:
        code = run(sys.argv[1:])
    except BundlerError as exc:
        log.error(exc.message)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        # The reader stopped (`| head`): nothing to report, and nothing left to flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
