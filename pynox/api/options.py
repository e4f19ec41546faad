"""The API's run options: checked and resolved once, for Pool, Session, run() and tool()."""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypedDict

from pynox import file_names, host_function_names, lean_os, os_text, units
from pynox.errors import PynoxError
from pynox.limits import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT,
    MAX_FILES_IN,
    MAX_FILES_IN_BYTES,
    UNKNOWN_SIGNATURE,
)
from pynox.policy.config import Grants
from pynox.policy.grants import (
    GRANTS_BY_NAME,
    HINTS_PYTHON,
    VARIABLE_NAME_RULE,
    is_variable_name,
)

if TYPE_CHECKING:
    from pynox.policy.config import Config

from pynox.api.result import Result  # noqa: F401

# Bytes as open() takes them: a name that is not UTF-8 is sent as os.fsdecode gives it.
PathArg = str | bytes | os.PathLike[str] | os.PathLike[bytes]
Paths = PathArg | Iterable[PathArg] | None
Names = str | Iterable[str] | None
Duration = str | int | float | None
Size = str | int | None
Functions = Mapping[str, Callable[..., Any]] | Iterable[Callable[..., Any]] | None
Files = Mapping[str, bytes | bytearray | memoryview] | None


def files_field(value: Files) -> dict[str, str]:
    """run(files=...): {relative path: bytes}, checked as the pool checks it, as the
    request's {relative path: base64}."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"files takes a dict of {{name: bytes}}, not {type(value).__name__}")
    if len(value) > MAX_FILES_IN:
        raise ValueError(
            f"files holds {len(value)} files, more than the {MAX_FILES_IN} a run may be "
            "handed; pack them into an archive"
        )
    import base64

    encoded = {}
    total = 0
    for name, data in value.items():
        problem = file_names.problem(name)
        if problem is not None:
            raise ValueError(f"files name {name!r} {problem}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"files[{name!r}] must be bytes, not {type(data).__name__}")
        total += memoryview(data).nbytes
        if total > MAX_FILES_IN_BYTES:
            raise ValueError(
                f"files holds more than the {MAX_FILES_IN_BYTES} bytes a run may be handed; "
                "hand in less, or grant a directory with allow_read"
            )
        # tobytes: a view with strides (memoryview(b)[::2]) is not one buffer to encode.
        contents = data.tobytes() if isinstance(data, memoryview) else data
        encoded[name] = base64.b64encode(contents).decode("ascii")
    return encoded


def caller_cwd() -> str:
    """The caller's working directory, as python knows it even once it was removed (a
    server whose release directory was replaced): a run without relative paths needs
    none, and a relative one resolved there is one the pool says does not exist."""
    try:
        return lean_os.getcwd()
    except PynoxError as exc:
        raise ValueError(exc.message) from None


def _paths(value: Paths, what: str, cwd: str) -> list[str]:
    """Absolute paths: relative ones are resolved against the caller's cwd, now."""
    result = []
    if isinstance(value, bytes):  # one path, as open() takes it
        value = [value]
    for item in _items(value, what, "a path or a list of paths"):
        if not isinstance(item, (str, bytes, os.PathLike)):
            raise TypeError(
                f"{what} takes paths (str, bytes or os.PathLike), not {type(item).__name__}"
            )
        text = os.fspath(item)
        if isinstance(text, bytes):
            text = os.fsdecode(text)
        if not text or "\0" in text:
            raise ValueError(f"{what} lists {text!r}, which is not a path")
        if not os_text.stands_for_bytes(text):
            raise ValueError(f"{what} lists {text!r}, which {os_text.NO_BYTES}")
        text = os_text.as_python_sees(text)
        result.append(os.path.normpath(os.path.join(cwd, os.path.expanduser(text))))
    return list(dict.fromkeys(result))


def pool_package_dirs(value: Paths) -> list[str]:
    """Pool(package_dirs=...): absolute paths that exist, checked now so that a wrong one
    is a ValueError here rather than a pool that cannot start."""
    paths = _paths(value, "package_dirs", caller_cwd())
    for path in paths:
        if not os.path.exists(path):
            raise ValueError(
                f"package_dirs lists {path}, which does not exist; give the site-packages "
                "directory that holds the packages"
            )
    return paths


def pool_preload(value: Names) -> list[str]:
    """Pool(preload=...): module names, checked now rather than by a pool that cannot start."""
    modules = strings(value, "preload", "module name")
    for module in modules:
        if not all(part.isidentifier() for part in module.split(".")):
            raise ValueError(f"preload lists {module!r}, which is not a module name")
    return modules


def pool_warmup(value: object) -> str | None:
    """Pool(warmup=...): code that a command line can pass, checked now."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError("warmup takes Python code as a string, like 'import pandas'")
    if "\0" in value:
        raise ValueError("warmup holds a NUL character, which no command line can pass")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            raise ValueError(
                "warmup is not valid Unicode text: it holds a lone surrogate (such as "
                "\\ud800); pass text that UTF-8 can encode"
            ) from None
    return value


def strings(value: Names, what: str, kind: str, *, empty: bool = False) -> list[str]:
    """A list of `kind` strings, each without NUL; empty ones only where `empty` is true."""
    result = []
    for item in _items(value, what, f"a {kind} or a list of them"):
        if not isinstance(item, str):
            raise TypeError(f"{what} takes strings, not {type(item).__name__}")
        if "\0" in item:
            raise ValueError(f"{what} lists {item!r}, which holds a NUL character; no {kind} can")
        if not item and not empty:
            raise ValueError(f"{what} lists {item!r}, which is not a {kind}")
        result.append(item)
    return result


def _items(value: object, what: str, expected: str) -> list[object]:
    if value is None:
        return []
    if isinstance(value, (str, os.PathLike)):
        return [value]
    if isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise TypeError(f"{what} takes {expected}, not {type(value).__name__}")
    return list(value)


def _duration(value: Duration, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise TypeError(
            f"{what} takes a duration like '10s' or a number of seconds, not {type(value).__name__}"
        )
    try:
        return units.parse_duration(value, what)
    except PynoxError as exc:
        raise ValueError(exc.message) from None


def _size(value: Size, what: str) -> int | None:
    """A size grant (pynox.policy.grants gives its bounds) in bytes."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(
            f"{what} takes a size like '512m' or a whole number of bytes, not "
            f"{type(value).__name__}"
        )
    try:
        return int(GRANTS_BY_NAME[what].parse(value, what))
    except PynoxError as exc:
        raise ValueError(exc.message) from None


def step_timeout(value: Duration) -> float | None:
    """A session step's own timeout (Session.run's timeout=), checked as Spec checks one."""
    return _duration(value, "timeout")


def checked_name(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"name takes a file name like 'agent.py', not {type(value).__name__}")
    if not value or any(c in value for c in "\0\n\r"):
        raise ValueError(f"name={value!r} is not a file name; give one like 'agent.py'")
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:
            # The pool would refuse every request, in words meant for the model.
            raise ValueError(
                f"name={value!r} holds a lone surrogate, which UTF-8 cannot encode; give a "
                "name like 'agent.py'"
            ) from None
    return value


def _profile(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise TypeError("profile takes the name of a [profiles.NAME] table of pynox.toml")
    return value


def _network(value: object) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise TypeError(f"allow_network takes True, False or None, not {value!r}")
    return value


def _functions(value: Functions) -> dict[str, Callable[..., Any]]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError("functions takes a dict of name to function, or a list of functions")
    else:
        pairs = [(getattr(f, "__name__", None), f) for f in value]
    result: dict[str, Callable[..., Any]] = {}
    for name, function in pairs:
        if not callable(function):
            raise TypeError(f"functions[{name!r}] is {type(function).__name__}, not callable")
        problem = host_function_names.name_problem(name)
        if problem is not None and not isinstance(value, Mapping):
            # A lambda, a partial or a callable object: its own name cannot serve.
            problem = (
                f"functions lists {function!r}, whose name {name!r} cannot be a host "
                "function's: code imports it with `from pynox_host import NAME`; name it "
                "in a dict, like functions={'search': function}"
            )
        if problem is not None:
            raise ValueError(problem)
        result[name] = function
    return result


def function_signature(function: Callable[..., Any]) -> str:
    """The signature the model sees, like "(query: str, limit: int = 5) -> list[dict]"."""
    for options in ({"eval_str": True}, {}):
        try:
            return str(inspect.signature(function, **options))  # type: ignore[arg-type]
        except Exception:  # noqa: S112 - a NameError in an annotation, or no signature at all
            continue
    return UNKNOWN_SIGNATURE


def function_spec(name: str, function: Callable[..., Any]) -> dict[str, str]:
    documented = function
    while isinstance(documented, functools.partial):
        # partial's own docstring says what partial is, not what the function does
        documented = documented.func
    return {
        "name": name,
        "signature": function_signature(function),
        "doc": inspect.getdoc(documented) or "",
    }


class SessionOptions(TypedDict, total=False):
    """The keyword arguments of a session or a tool (Pool.session, Pool.tool, pynox.tool):
    written once here for type checkers, and checked at run time by Spec."""

    name: str
    profile: str | None
    allow_read: Paths
    allow_write: Paths
    package_dirs: Paths
    allow_env: Names
    allow_network: bool | None
    timeout: Duration
    memory: Size
    max_output: Size
    max_file_size: Size
    functions: Functions


class RunOptions(SessionOptions, total=False):
    """The keyword arguments of one run (Pool.run, Pool.arun, pynox.run, pynox.arun)."""

    args: Names
    files: Files


class Spec:
    """One validated set of run options: what a request carries besides its code."""

    __slots__ = (
        "name",
        "profile",
        "allow_read",
        "allow_write",
        "package_dirs",
        "allow_env",
        "allow_network",
        "timeout",
        "memory",
        "max_output",
        "max_file_size",
        "args",
        "functions",
        "files",
        "_limits",
        "_cwd",
    )

    def __init__(
        self,
        *,
        name: str | None = None,
        profile: str | None = None,
        allow_read: Paths = None,
        allow_write: Paths = None,
        package_dirs: Paths = None,
        allow_env: Names = None,
        allow_network: bool | None = None,
        timeout: Duration = None,
        memory: Size = None,
        max_output: Size = None,
        max_file_size: Size = None,
        args: Names = None,
        functions: Functions = None,
        files: Files = None,
    ) -> None:
        cwd = caller_cwd()
        # Where the code runs, as `pynox` runs where it is called: the directory its
        # relative grants are resolved against, both taken now.
        self._cwd = cwd
        # None: the pool's default, agent.py (in a session, each step its own: <step-N>).
        self.name = None if name is None else checked_name(name)
        self.profile = _profile(profile)
        self.allow_read = _paths(allow_read, "allow_read", cwd)
        self.allow_write = _paths(allow_write, "allow_write", cwd)
        self.package_dirs = _paths(package_dirs, "package_dirs", cwd)
        self.allow_env = strings(allow_env, "allow_env", "variable name")
        for variable in self.allow_env:
            if not is_variable_name(variable):
                raise ValueError(
                    f"allow_env lists {variable!r}, which is not an environment variable name; "
                    f"{VARIABLE_NAME_RULE}"
                )
        self.allow_network = _network(allow_network)
        self.timeout = _duration(timeout, "timeout")
        self.memory = _size(memory, "memory")
        self.max_output = _size(max_output, "max_output")
        self.max_file_size = _size(max_file_size, "max_file_size")
        # As `python app.py ''` passes an empty argument, so may args.
        self.args = strings(args, "args", "command-line argument", empty=True)
        for arg in self.args:
            if not os_text.stands_for_bytes(arg):
                raise ValueError(f"args lists {arg!r}, which {os_text.NO_BYTES}")
        self.args = [os_text.as_python_sees(arg) for arg in self.args]
        self.functions = _functions(functions)
        self.files = files_field(files)  # placed in the scratch directory before the code runs
        # As the caller wrote them: the pool formats its hints from what it was sent.
        self._limits = {
            "timeout": timeout,
            "memory": memory,
            "max_output": max_output,
            "max_file_size": max_file_size,
        }

    @classmethod
    def of(cls, caller: str, options: Mapping[str, Any]) -> Spec:
        """Spec(**options), where an option it does not know is a bad keyword argument of
        `caller`, the function the user called, not of Spec's own __init__."""
        known = [name for name in cls.__slots__ if not name.startswith("_")]
        unknown = [name for name in options if name not in known]
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], known, n=1)
            also = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{caller}() got an unexpected keyword argument {unknown[0]!r}{also}")
        return cls(**options)

    def request(
        self, code: str, session: str | None = None, pool_cwd: str | None = None
    ) -> dict[str, Any]:
        """The request line's fields (without the id). pool_cwd: the pool's working
        directory, where a request runs unless it names its own."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str of Python source, not {type(code).__name__}")
        # Hints name grants as this API's arguments (allow_read=['/srv']).
        request: dict[str, Any] = {"code": code, "hints": HINTS_PYTHON}
        if self.name is not None:
            request["name"] = self.name
        if self.profile is not None:
            request["profile"] = self.profile
        for key in ("allow_read", "allow_write", "package_dirs", "allow_env", "args"):
            if getattr(self, key):
                request[key] = getattr(self, key)
        if self.allow_network is not None:
            request["allow_network"] = self.allow_network
        for key, value in self._limits.items():
            if value is not None:
                request[key] = value
        if self.functions:
            request["functions"] = [function_spec(n, f) for n, f in self.functions.items()]
        if self.files:
            request["files"] = self.files
        if session is not None:
            request["session"] = session
        # A directory removed since has nowhere to run: there, as before, the pool's.
        if pool_cwd is not None and self._cwd != pool_cwd and os.path.isdir(self._cwd):
            request["cwd"] = self._cwd
        return request

    def grants(self) -> Grants:
        """The request's own grants, for describing the policy it will get."""
        return Grants(
            allow_read=self.allow_read,
            allow_write=self.allow_write,
            package_dirs=self.package_dirs,
            allow_env=self.allow_env,
            allow_network=self.allow_network,
            timeout=self.timeout,
            memory=self.memory,
            max_output=self.max_output,
            max_file_size=self.max_file_size,
        )


def effective_grants(spec: Spec, config: Config | None) -> Grants:
    """What the pool will grant a request: its profile, then its fields, then the limits'
    values for what neither sets (as docs/pool-protocol.md says), then the defaults."""
    grants = spec.grants()
    if spec.profile is not None:
        if config is None:
            raise ValueError(
                f"profile={spec.profile!r} needs a pynox.toml, and the pool has none; pass "
                "config= to Pool, set PYNOX_CONFIG, or run where pynox.toml is"
            )
        try:
            profile = config.profile(spec.profile)
        except PynoxError as exc:
            raise ValueError(exc.message) from None
        grants = profile.merged(grants)
    if config is not None:
        limits = config.pool_limits
        for key in ("timeout", "memory", "max_output", "max_file_size"):
            if getattr(grants, key) is None:
                setattr(grants, key, getattr(limits, key))
    if grants.timeout is None:
        grants.timeout = DEFAULT_TIMEOUT
    if grants.max_output is None:
        grants.max_output = DEFAULT_MAX_OUTPUT
    return grants
