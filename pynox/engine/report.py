"""The structured error of a run: what failed, where, and what to do about it.

Imported only in a child whose program failed, once its exception is printed.
"""

import os
import sys
from functools import partial

from pynox import PACKAGE_DIR
from pynox.engine.hint_style import Style
from pynox.engine.hint_text import format_hint, running_python_version
from pynox.engine.hints import classify, other_python_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType
    from typing import Any

    from pynox.engine.child_setup import ChildSetup
    from pynox.engine.program import Program
    from pynox.policy.resolve import Policy

_MAX_MESSAGE = 4096


def _type_name(exc: BaseException) -> str:
    kind = type(exc)
    if kind.__module__ in ("builtins", "__main__"):
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _location(
    exc: BaseException, tb: "TracebackType | None", program: "Program"
) -> tuple[str | None, int | None]:
    """The line of the user's program the error comes from."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return exc.filename, exc.lineno
    frames = []
    while tb is not None:
        frames.append((tb.tb_frame.f_code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return None, None
    for filename, line in reversed(frames):
        if filename == program.filename or filename in program.earlier_files:
            return filename, line
    stdlib = os.path.dirname(os.__file__) + os.sep
    for filename, line in reversed(frames):
        if not filename.startswith(stdlib) and not filename.startswith("<frozen"):
            return filename, line
    return frames[-1]


def describe_error(
    exc: BaseException,
    tb: "TracebackType | None",
    program: "Program",
    policy: "Policy",
    last_event: "tuple[str, tuple[Any, ...]] | None",
    api_hints: bool,
    cwd: str | None = None,
    named: "Callable[[], list[tuple[str, str]]] | None" = None,
) -> "dict[str, Any]":
    kind, value, path = classify(exc, last_event, policy, cwd, named)
    hint = format_hint(kind, value, Style(api_hints), policy.memory, policy.max_file_size)
    filename, line = _location(exc, tb, program)
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error
        message = f"<unprintable {type(exc).__name__}>"
    return {
        "type": _type_name(exc),
        "message": message[:_MAX_MESSAGE],
        "file": filename,
        "line": line,
        "path": path,
        "hint": hint,
        # What the supervisor makes its own hint text from (see pynox.engine.hints).
        "hint_kind": kind,
        "hint_value": value,
    }


def describe_and_hint(
    exc: BaseException,
    tb: "TracebackType | None",
    last_event: "tuple[str, tuple[Any, ...]] | None",
    program: "Program",
    policy: "Policy",
    setup: "ChildSetup",
) -> "dict[str, Any]":
    """The error of a program whose exception was just printed, with its traceback tb
    (pynox's frames cut); prints pynox's hint after it. last_event: the program's last
    file access, taken before anything printed."""
    named = partial(_named_by_environment, setup)  # asked only for a write hint
    error = describe_error(
        exc, tb, program, policy, last_event, setup.api_hints, setup.start_cwd, named
    )
    if error["hint_kind"] is None and isinstance(exc, ModuleNotFoundError):
        _module_hint(error, exc, policy, setup)
    if error["hint_kind"] is None and isinstance(exc, ImportError):
        version = other_python_version(exc, policy.package_dirs)
        if version is not None:
            error["hint_kind"], error["hint_value"] = "other_python", version
            error["hint"] = format_hint("other_python", version, Style(setup.api_hints), None, None)
    if error["hint"]:
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.write(2, line_bytes(f"pynox: {error['hint']}\n"))
    return error


def _named_by_environment(setup: "ChildSetup") -> "list[tuple[str, str]]":
    """What no write grant may reach that the environment pynox started with names
    (pynox.policy.trusted.named_by_environment), for a hint that would name one."""
    from pynox.policy.trusted import named_by_environment

    environ, import_path, user_home = setup.path_env
    cwd = setup.start_cwd or "/"  # only asked with one (pynox.engine.hints.classify)
    return named_by_environment(setup.config_paths, cwd, environ, import_path, user_home)


def line_bytes(line: str) -> bytes:
    """A line for stderr, a path in it that is not UTF-8 as its own bytes (the surrogates
    os.fsdecode made of them): a grant it names then works when the shell passes it back,
    where a "?" in its place would name another file."""
    try:
        return line.encode(errors="surrogateescape")
    except UnicodeEncodeError:  # a surrogate that stands for no byte: no file has it
        return line.encode(errors="backslashreplace")


def _module_hint(
    error: "dict[str, Any]", exc: ModuleNotFoundError, policy: "Policy", setup: "ChildSetup"
) -> None:
    """The package directory that holds a module the program could not import, if one
    of the known ones does and the run was not given it."""
    from pynox.engine.hints import missing_module_dir

    left_out = _module_in_left_out_folder(exc, policy, setup)
    if left_out is not None:
        kind = "module_in_root" if left_out.count("/") == 1 else "module_beside_scratch"
        error["hint_kind"], error["hint_value"] = kind, left_out
        error["hint"] = format_hint(kind, left_out, Style(setup.api_hints), None, None)
        return
    here = _unreadable_working_directory(policy, setup)
    if here is not None and missing_module_dir(exc, [here], []) is not None:
        error["hint_kind"], error["hint_value"] = "module_here", here
        error["hint"] = format_hint("module_here", here, Style(setup.api_hints), None, None)
        return
    user_base, python_path, virtual_env = setup.package_env
    # A virtual environment given whole (package_dirs=[".venv"]): its site-packages.
    environments = [d for d in policy.package_dirs if os.path.isfile(f"{d}/pyvenv.cfg")]
    candidates = [
        *setup.config_package_dirs,
        *caller_package_dirs(python_path, virtual_env, setup.start_cwd),
        *installed_package_dirs(user_base),
        *(d for env in environments for d in _site_packages(env, _python_version())),
    ]
    directory = missing_module_dir(exc, candidates, policy.package_dirs)
    if directory is not None:
        error["hint_kind"], error["hint_value"] = "module", directory
        error["hint"] = format_hint("module", directory, Style(setup.api_hints), None, None)
        return
    # Installed only for another Python, in a virtual environment of its version.
    if virtual_env and os.path.isabs(virtual_env):
        environments.append(virtual_env)
    ours = _python_version()
    others = [
        d
        for env in environments
        for minor in range(8, 20)
        if f"python3.{minor}" != ours
        for d in _site_packages(env, f"python3.{minor}")
    ]
    directory = missing_module_dir(exc, others, policy.package_dirs)
    if directory is not None:
        kind = "module_other_python"
        error["hint_kind"], error["hint_value"] = kind, directory
        error["hint"] = format_hint(kind, directory, Style(setup.api_hints), None, None)


def _module_in_left_out_folder(
    exc: ModuleNotFoundError, policy: "Policy", setup: "ChildSetup"
) -> str | None:
    """The module's file or package, when python imports it from a folder that is never
    an implicit read (pynox.cli.main), one that holds scratch directories (/tmp, /): the
    program's directory, or the working directory for -m, -c and standard input."""
    from pynox.engine.hints import missing_module_dir
    from pynox.engine.scratch import FALLBACK_BASE, holds_scratch

    folder = sys.path[0] if sys.path and sys.path[0] else setup.start_cwd
    if not folder or not os.path.isabs(folder) or policy.scratch is None:
        return None
    folder = os.path.realpath(folder)
    bases = (os.path.dirname(policy.scratch), FALLBACK_BASE)
    if not holds_scratch(folder, bases) or any(
        folder == granted or folder.startswith(granted.rstrip("/") + "/")
        for granted in policy.reads()
    ):
        return None
    if missing_module_dir(exc, [folder], []) != folder:
        return None
    import _imp

    top = str(exc.name).partition(".")[0]
    for entry in (top, top + ".py", *(top + suffix for suffix in _imp.extension_suffixes())):
        path = os.path.join(folder, entry)
        if os.path.exists(path):
            return path
    return None


def _unreadable_working_directory(policy: "Policy", setup: "ChildSetup") -> str | None:
    """The working directory, as a real path, when the program imports from it ("" on
    sys.path: python puts it there for -c and standard input) and may not read it."""
    if "" not in sys.path or setup.start_cwd is None:
        return None
    here = os.path.realpath(setup.start_cwd)
    for granted in policy.reads():
        if here == granted or here.startswith(granted.rstrip("/") + "/"):
            return None
    return here


def _python_version() -> str:
    """The name of this interpreter's folder in a prefix's lib: python3.13 (python3.13t
    for a free-threaded build, which keeps its packages apart)."""
    return "python" + running_python_version()


def _site_packages(prefix: str, version: str) -> list[str]:
    return [
        f"{prefix}/{lib}/{version}/site-packages" for lib in dict.fromkeys(("lib", sys.platlibdir))
    ]


def caller_package_dirs(
    python_path: str | None, virtual_env: str | None, cwd: str | None
) -> list[str]:
    """Where the caller's own python imports from, as its environment said before pynox
    emptied it: the folders of PYTHONPATH (relative ones from the directory pynox ran
    in, as python takes them), then the site-packages of the virtual environment it
    activated (for this interpreter's version: another's packages would not import).
    Strings only, as in installed_package_dirs."""
    dirs = []
    for entry in (python_path or "").split(os.pathsep):
        if entry and (os.path.isabs(entry) or cwd is not None):
            dirs.append(os.path.join(cwd or "/", entry))
    if virtual_env and os.path.isabs(virtual_env):
        dirs += _site_packages(virtual_env, _python_version())
    return dirs


def installed_package_dirs(user_base: str | None) -> list[str]:
    """Where packages that `python` would import are installed, as strings only.

    The site-packages of the environment pynox runs in (a virtual environment's or
    a bundle's) and of the interpreter's own prefixes, then the user site. Nothing
    is listed or even checked here, and neither sysconfig nor site is imported:
    this is computed only once an import failed, inside the sandbox, from what
    never changes there (sys) and the user base taken before confinement.
    """
    version = _python_version()
    environment = os.path.dirname(os.path.dirname(sys.executable or "/"))
    prefixes = (environment, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)
    dirs = [os.path.dirname(PACKAGE_DIR)]
    for prefix in dict.fromkeys(prefixes):
        dirs += _site_packages(prefix, version)
        if prefix == "/usr":  # Debian's python3 and what pip installs for it
            dirs += [f"/usr/local/lib/{version}/dist-packages", "/usr/lib/python3/dist-packages"]
    if user_base:
        dirs.append(f"{user_base}/lib/{version}/site-packages")
    return dirs
