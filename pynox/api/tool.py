"""The `run_python` tool function and the docstring a model reads to use it.

The docstring is the tool's whole manual for the model: what the code may touch (the grants,
resolved), its limits, the host functions it may call, and how failures come back. It is a
Google-style docstring with a single text block, an `Args:` section for `code` and a
`Returns:` section, which is what frameworks that read docstrings (Pydantic AI, Strands,
smolagents) turn into the tool's description and parameter schema.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from pynox.api.options import Spec, effective_grants, function_spec
from pynox.limits import DEFAULT_NAME
from pynox.policy.grants import GRANT_FIELDS
from pynox.unit_format import format_duration

if TYPE_CHECKING:
    from pynox.api.pool import Pool
    from pynox.api.result import Result
    from pynox.api.session import Session
    from pynox.policy.config import Config, Grants

TOOL_NAME = "run_python"


@runtime_checkable  # isinstance(obj, pynox.Tool) tells a tool from another callable
class Tool(Protocol):
    """What `pynox.tool()` and `Pool.tool()` return: `run_python(code: str) -> str`, a plain
    function, whose `run(code)` returns the whole Result instead of its text."""

    __name__: str

    def __call__(self, code: str) -> str: ...

    def run(self, code: str) -> Result: ...


def tool_spec(session: object, options: Mapping[str, Any]) -> Spec:
    """The checked options of a tool (Pool.tool, pynox.tool)."""
    if not isinstance(session, bool):
        raise TypeError("session takes True or False")
    spec = Spec.of("tool", options)
    if spec.files:
        raise TypeError("a tool takes no files; give them to pool.run or session.run")
    if session:
        # Checked now: pynox.tool() makes its session only at the first call.
        from pynox.api.session import check_session_spec

        check_session_spec(spec)
    return spec


def make_tool(pool: Pool, spec: Spec, session: Session | None) -> Tool:
    """`run_python(code: str) -> str` running on `pool` (in `session`, if given)."""

    def run(code: str) -> Result:
        if session is not None:
            from pynox.api.result import for_model

            return for_model(session.run(code))
        return pool.run_spec(code, spec)

    return tool_function(run, describe(pool, spec, session=session is not None))


def tool_function(run: Callable[[str], Result], doc: str) -> Tool:
    """`run_python(code: str) -> str`, the text of `run(code)`, documented by `doc`.

    Its attribute `run(code)` runs the same way and returns the whole Result: for a
    framework whose tools can hand the model images (`Result.images`) besides text.
    """

    def run_python(code: str) -> str:
        return run(code).text

    # The whole Result, images included, for frameworks whose tools can return them.
    run_python.run = run  # type: ignore[attr-defined]
    run_python.__name__ = run_python.__qualname__ = TOOL_NAME
    run_python.__doc__ = doc
    run_python.__annotations__ = {"code": str, "return": str}
    run_python.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("code", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)],
        return_annotation=str,
    )
    return cast("Tool", run_python)


def describe(pool: Pool, spec: Spec, *, session: bool) -> str:
    """The docstring of a tool running `spec` on `pool`: the grants the pool will apply."""
    config = pool._load_config()
    grants = effective_grants(spec, config)
    refuse_unreachable_paths(grants)
    if config is not None:
        refuse_beyond_limits(grants, config)
    # The pool's own package directories are importable by every run too.
    pool_dirs = pool.package_dirs + (config.pool.package_dirs if config is not None else [])
    grants.package_dirs = list(dict.fromkeys(pool_dirs + grants.package_dirs))
    return tool_docstring(
        grants,
        [function_spec(name, f) for name, f in spec.functions.items()],
        session=session,
        name=spec.name,
        python=pool.python,
    )


# The path grants, and how a refusal names what each grants.
_PATH_GRANTS = (
    ("allow_read", "reading"),
    ("allow_write", "writing"),
    ("package_dirs", "imports from"),
)


def refuse_unreachable_paths(grants: Grants) -> None:
    """A ValueError, now, for a tool granted a path that does not exist (or that no grant
    can reach): the pool would refuse every call it makes, and tell the model, which
    cannot make the path, to create it."""
    from pynox.errors import PolicyError
    from pynox.policy.path_grant import resolve_grant

    for field, kind in _PATH_GRANTS:
        for path in getattr(grants, field):
            try:
                resolve_grant(path, kind, "/")  # absolute already (Spec.of)
            except PolicyError as exc:
                raise ValueError(
                    f"the pool would refuse every call of this tool: {exc.message}"
                ) from None


def refuse_beyond_limits(grants: Grants, config: Config) -> None:
    """A ValueError, now, for a tool whose permissions exceed [pool.limits]: the pool would
    refuse every call it makes, telling the model to ask for what it cannot, while the
    docstring promised the model those permissions."""
    from pynox.policy import pool_limits

    limits = pool_limits.resolve_limits(config.pool_limits)
    try:
        pool_limits.cap(grants, limits, frozenset(config.pool.limited))
    except pool_limits.BeyondLimits as exc:
        raise ValueError(f"the pool would refuse every call of this tool: {exc.message}") from None


def tool_docstring(
    grants: Grants,
    functions: list[dict[str, str]],
    *,
    session: bool,
    name: str | None = None,
    python: str | None = None,
) -> str:
    """The docstring: one text block, then `Args:` and `Returns:` sections.

    Lines of the text block never end with a colon and never start a section word, so that
    docstring parsers keep it as one description.
    """
    version = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    paragraphs = [
        _summary(version, session),
        _how_it_runs(session, grants),
        _permissions(grants, session),
    ]
    if functions:
        paragraphs.append(_host_functions(functions))
    paragraphs.append(
        "When the code fails, the result ends with the exception type and message, the line "
        f"as {_where(name, session)}, and a hint; a denied file, socket or process names the "
        "permission that was missing. You cannot grant permissions from your code: if the "
        "task needs access the sandbox does not give, work without it or tell the user which "
        "permission the hint names instead of retrying the same thing."
    )
    sections = (
        "Args:\n"
        "    code: The Python program to run, as complete source code that prints its "
        "results.\n"
        "\n"
        "Returns:\n"
        "    What the program printed and the value of its final expression, then the error, "
        "its line and a hint if it failed."
    )
    return "\n\n".join(paragraphs) + "\n\n" + sections


def _where(name: str | None, session: bool) -> str:
    """How a failed call's line is named: by the file name the code runs as."""
    if name is not None:
        return f"{name}:LINE"
    if session:  # each call's code is a file of its own (docs/pool-protocol.md)
        return "<step-N>:LINE, N being the number of the call that ran that code"
    return f"{DEFAULT_NAME}:LINE"


def _summary(version: str, session: bool) -> str:
    if session:
        return (
            f"Run Python {version} code in a persistent sandboxed session and return "
            "what it printed."
        )
    return f"Run Python {version} code in a fresh sandboxed process and return what it printed."


def _how_it_runs(session: bool, grants: Grants) -> str:
    if session:
        state = (
            "All calls share one Python process, like a notebook: variables, imports and "
            "functions defined in one call are still there in the next. A Python error keeps "
            "that state; a timeout, a crash or sys.exit() ends the session, and the next call "
            "starts a fresh one without it (the result says so)."
        )
    else:
        state = (
            "Each call is a new program: nothing carries over from earlier calls, so import "
            "and define what you need every time."
        )
    output = _size(grants.max_output or 0)
    figures = (
        " Figures drawn with matplotlib (plt.show(), or still open when the code ends) come "
        "back as PNG images, each named in the result as [image N: WIDTHxHEIGHT PNG]."
        if grants.package_dirs
        else ""
    )
    return (
        f"{state} What the code prints comes back (print() and anything written to stdout "
        "or stderr) and, as in a notebook, the repr of the value of a final expression, "
        f"after 'Out:'.{figures} Of a stream longer than {output}, only its start and its "
        "end come back: "
        "print summaries, not whole data sets."
    )


def _permissions(grants: Grants, session: bool) -> str:
    lines = [
        "The sandbox enforces these permissions, set by the application; anything else fails "
        "with an error such as PermissionError."
    ]
    for field in GRANT_FIELDS:
        line = _GRANT_LINES[field.name](grants)
        if line is not None:
            lines.append("- " + line)
    lines.append(
        "- Scratch space: each call has a private, empty directory of its own, which "
        "tempfile, $TMPDIR and $HOME name; read and write it freely (libraries keep their "
        "caches there). "
        + ("It lasts as long as the session" if session else "It is deleted when the call ends")
        + "; files meant to last go where writing is allowed above"
    )
    lines.append(
        "- Processes: starting programs or processes (subprocess, os.system, "
        "multiprocessing) always fails; threads work"
    )
    lines.append("- Limits: " + _limits(grants))
    return "\n".join(lines)


def _listed(paths: list[str]) -> str:
    """Paths for the model, one after another: each as it is, or as the Python string
    literal the code would write (its repr) where it is not plain text (a line break, a
    name that is not UTF-8, whose surrogates no model API could encode) or holds the
    ", " that parts them."""
    return ", ".join(path if _is_plain(path) else repr(path) for path in paths)


def _is_plain(path: str) -> bool:
    return path.isprintable() and ", " not in path  # a surrogate is not printable


def _reads(grants: Grants) -> str:
    reads = _listed(grants.allow_read)
    return "Reading files: " + (
        f"{reads}, and Python's standard library" if reads else "only Python's standard library"
    )


def _writes(grants: Grants) -> str:
    writes = _listed(grants.allow_write)
    if not writes:
        return "Writing files: nowhere but the scratch space below"
    return f"Writing files: beneath {writes} (writing there does not allow reading it back)"


def _imports(grants: Grants) -> str:
    if grants.package_dirs:
        return "Importing: the standard library and the packages in " + _listed(grants.package_dirs)
    return "Importing: the standard library only; third-party packages cannot be imported"


def _network(grants: Grants) -> str:
    if grants.allow_network:
        return "Network: allowed (IPv4 and IPv6, HTTPS with the system's certificates)"
    return "Network: none; sockets and downloads fail"


def _environment(grants: Grants) -> str:
    return "Environment variables: " + (", ".join(grants.allow_env) if grants.allow_env else "none")


# What each grant means to the model, one line per grant (None: told under Limits).
_GRANT_LINES: dict[str, Callable[[Grants], str | None]] = {
    "allow_read": _reads,
    "allow_write": _writes,
    "package_dirs": _imports,
    "allow_env": _environment,
    "allow_network": _network,
    "timeout": lambda grants: None,
    "memory": lambda grants: None,
    "max_output": lambda grants: None,  # told with the output, in _how_it_runs
    "max_file_size": lambda grants: None,
}


def _limits(grants: Grants) -> str:
    limits = [f"{format_duration(grants.timeout or 0)} of wall-clock time per call"]
    if grants.memory is not None:
        limits.append(f"{_size(grants.memory)} of memory")
    if grants.max_file_size is not None:
        limits.append(f"files of at most {_size(grants.max_file_size)}")
    return ", ".join(limits)


def _host_functions(functions: list[dict[str, str]]) -> str:
    names = ", ".join(spec["name"] for spec in functions)
    lines = [
        "The code can call these functions of the application, imported with "
        f"`from pynox_host import {names}`. They run outside the sandbox; their arguments "
        "and return values are JSON data (str, int, float, bool, None, lists and dicts), "
        "and a failure raises pynox_host.HostError with its message."
    ]
    for spec in functions:
        first = spec["doc"].strip().splitlines()[0].strip() if spec["doc"].strip() else ""
        line = f"- {spec['name']}{spec['signature']}"
        lines.append(f"{line}: {first}" if first else line)
    return "\n".join(lines)


def _size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"
