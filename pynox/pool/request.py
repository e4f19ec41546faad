"""One line of the pool protocol: parse it, check every field, cap the grants.

Nothing here trusts the line: a wrong type, an unknown field or a grant beyond
[pool.limits] becomes a RequestError whose message says what to fix.
"""

import json
import os
import sys

from pynox import file_names, host_function_names, os_text, strict_json
from pynox.errors import PynoxError
from pynox.limits import MAX_FILES_IN, MAX_FILES_IN_BYTES, UNKNOWN_SIGNATURE
from pynox.policy import pool_limits
from pynox.policy.config import Grants
from pynox.policy.grants import (
    GRANT_FIELDS,
    HINTS_JSON,
    HINTS_PYTHON,
    NAMES,
    PATHS,
    SWITCH,
    VARIABLE_NAME_RULE,
    is_variable_name,
)


class RequestError(PynoxError):
    """A request the pool refuses; it answers with an error result and keeps serving."""

    def __init__(self, message: str, request_id: object = None) -> None:
        super().__init__(message)
        self.request_id = request_id
        # A control line is refused with a control_error event, never a result.
        self.control = False


_PARSE_RECURSION = 5000

REQUEST_FIELDS = frozenset(
    {
        "id",
        "code",
        "script",
        "cwd",
        "args",
        "name",
        "profile",
        "session",
        "functions",
        "files",
        "stream",
        "hints",
        *(field.name for field in GRANT_FIELDS),
    }
)
CONTROL_FIELDS = ("host_result", "host_error", "close_session", "control")
# The fields a request's policy is made from; a request with none of them gets the pool's
# default policy. (A working directory of its own keeps the pynox.toml there out of reach.)
POLICY_FIELDS = frozenset({"profile", "script", "cwd", *(field.name for field in GRANT_FIELDS)})


def parse_line(line: bytes) -> dict[str, object]:
    # Nesting costs the parser one level of recursion each: allow a few thousand and
    # refuse deeper lines cleanly. On 3.12 the C stack bounds the depth instead (about
    # 1,500 levels from the top of a thread), whatever the recursion limit.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, _PARSE_RECURSION))
    try:
        message = strict_json.loads(line, unique_keys=True)
    except strict_json.NotFinite as exc:
        raise _refusal(line, f"the line is not JSON: {exc}; send finite numbers only") from None
    except strict_json.RepeatedKey as exc:
        raise _repeated(line, exc.key) from None
    except strict_json.TooDeep:
        raise RequestError("the line nests too deeply; send flatter JSON") from None
    except ValueError as exc:
        raise RequestError(f"the line is not JSON ({exc}); send one JSON object per line") from None
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(message, dict):
        raise RequestError("the line is not a JSON object; send one object per line")
    request_id = message.get("id")
    if not _is_id(request_id):
        raise RequestError('every line needs an "id" that is a string or an integer')
    return message


def _is_id(value: object) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _repeated(line: bytes, key: str) -> RequestError:
    """The refusal of a line with an object that gives a key twice: parsers differ on which
    one they keep, so a check made on the line elsewhere may not be what the pool runs."""
    message = _leniently(line)
    files = message.get("files") if isinstance(message, dict) else None
    if isinstance(files, dict) and key in files:
        return _refusal(line, f"files names {key!r} more than once; give each file once")
    return _refusal(line, f"the line gives {key!r} twice in one object; give each key once")


def _refusal(line: bytes, text: str) -> RequestError:
    """The refusal of a line that is JSON but not JSON the pool takes, with its id if it has
    one (and as an event, for a control line)."""
    refusal = RequestError(text)
    message = _leniently(line)
    if not isinstance(message, dict):
        return refusal
    found = message.get("id")
    # Not an id beyond a double's range: the very number the line is refused for.
    if _is_id(found) and not (isinstance(found, int) and found.bit_length() > 1024):
        refusal.request_id = found
        refusal.control = any(key in message for key in CONTROL_FIELDS)
    return refusal


def _leniently(line: bytes) -> object:
    """The line as Python's lenient parser reads it (NaN, repeated keys, huge numbers),
    only here, on the way to refusing it; None if even that fails."""
    try:
        # A number past int()'s digit limit reads as null: it is never the id sought.
        return json.loads(line, parse_int=lambda text: int(text) if len(text) < 4000 else None)
    except (ValueError, RecursionError):
        return None


def string_list(message: dict[str, object], key: str) -> list[str]:
    value = message.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RequestError(f"{key} must be a list of strings", message["id"])
    return list(value)


def program_args(message: dict[str, object]) -> list[str]:
    """The request's args as python's sys.argv would hold them (pynox.os_text): one that
    no command line can pass (a NUL, a surrogate that stands for no byte) is refused."""
    args = string_list(message, "args")
    for arg in args:
        if "\0" in arg:
            raise RequestError(
                f"args lists {arg!r}, which holds a NUL character; no command-line argument can",
                message["id"],
            )
        if not os_text.stands_for_bytes(arg):
            raise RequestError(f"args lists {arg!r}, which {os_text.NO_BYTES}", message["id"])
    return [os_text.as_python_sees(arg) for arg in args]


def check_path(path: str, key: str, request_id: object) -> str:
    """An absolute path without NUL, normalized, as python would find its bytes
    (pynox.os_text); anything else is refused."""
    if "\0" in path:
        raise RequestError(f"{key} path {path!r} contains a NUL character", request_id)
    if not os_text.stands_for_bytes(path):
        raise RequestError(f"{key} path {path!r} {os_text.NO_BYTES}", request_id)
    if not os.path.isabs(path):
        raise RequestError(
            f"{key} path {path!r} is not absolute; the pool cannot know your working "
            "directory, so send absolute paths",
            request_id,
        )
    return os.path.normpath(os_text.as_python_sees(path))


def _absolute_paths(message: dict[str, object], key: str) -> list[str]:
    return [check_path(path, key, message["id"]) for path in string_list(message, key)]


def request_grants(message: dict[str, object]) -> Grants:
    """The grants a request asks for, checked for type and unit."""
    request_id = message["id"]
    grants = Grants()
    for field in GRANT_FIELDS:
        value = message.get(field.name)
        if field.kind == PATHS:
            setattr(grants, field.name, _absolute_paths(message, field.name))
        elif field.kind == NAMES:
            names = string_list(message, field.name)
            for name in names:
                if not is_variable_name(name):
                    raise RequestError(
                        f"{field.name} lists {name!r}, which is not an environment variable "
                        f"name; {VARIABLE_NAME_RULE}",
                        message["id"],
                    )
            setattr(grants, field.name, names)
        elif field.kind == SWITCH:
            if value is not None and not isinstance(value, bool):
                raise RequestError(f"{field.name} must be true or false", request_id)
            setattr(grants, field.name, value)
        elif value is not None:
            try:
                setattr(grants, field.name, field.parse(value, field.name, error=RequestError))
            except RequestError as exc:
                raise RequestError(exc.message, request_id) from None
    return grants


def cap(grants: Grants, limits: Grants, limited: frozenset[str], request_id: object) -> Grants:
    """pool_limits.cap, its refusal the request's."""
    try:
        return pool_limits.cap(grants, limits, limited)
    except pool_limits.BeyondLimits as exc:
        raise RequestError(exc.message, request_id) from None


def check_fields(message: dict[str, object]) -> None:
    """Refuses a request whose fields are unknown or of the wrong type or text; a script's
    path and the args become the text python would find for their bytes."""
    unknown = sorted(set(message) - REQUEST_FIELDS)
    if unknown:
        raise RequestError(
            f"unknown field {unknown[0]!r}; the fields are {', '.join(sorted(REQUEST_FIELDS))}",
            message["id"],
        )
    has_code, has_script = "code" in message, "script" in message
    if has_code == has_script:
        raise RequestError('a request needs exactly one of "code" and "script"', message["id"])
    for key in ("code", "name", "profile", "session"):
        if key not in message:
            continue
        value = message[key]
        if not isinstance(value, str):
            raise RequestError(f"{key} must be a string", message["id"])
        if not value.isascii() and not _is_unicode(value):
            # JSON can spell one (\ud800), but python runs no code holding one and no
            # session name can. (A script's path may name bytes that are not UTF-8.)
            raise RequestError(
                f"{key} is not valid Unicode text: it holds a lone surrogate (such as "
                "\\ud800); send text that UTF-8 can encode",
                message["id"],
            )
    if "script" in message:
        script = message["script"]
        if not isinstance(script, str):
            raise RequestError("script must be a string", message["id"])
        check_path(script, "script", message["id"])
        # Not normalized: python's sys.argv[0] holds the path as it was given.
        message["script"] = os_text.as_python_sees(script)
    if "cwd" in message:
        cwd = message["cwd"]
        if not isinstance(cwd, str):
            raise RequestError("cwd must be a string", message["id"])
        message["cwd"] = check_path(cwd, "cwd", message["id"])
    if "args" in message:
        message["args"] = program_args(message)
    if "stream" in message and not isinstance(message["stream"], bool):
        raise RequestError("stream must be true or false", message["id"])
    if message.get("hints", HINTS_JSON) not in (HINTS_JSON, HINTS_PYTHON):
        raise RequestError(
            f'hints must be "{HINTS_JSON}" (grants named as this protocol\'s fields) or '
            f'"{HINTS_PYTHON}" (as pynox\'s Python API takes them)',
            message["id"],
        )


def _is_unicode(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def request_files(message: dict[str, object]) -> dict[str, bytes]:
    """The request's "files", {relative path: base64}, checked and decoded."""
    value = message.get("files", {})
    request_id = message["id"]
    if not isinstance(value, dict):
        raise RequestError('files must be an object of {"relative/path": "base64"}', request_id)
    if len(value) > MAX_FILES_IN:
        raise RequestError(
            f"files holds {len(value)} files, more than the {MAX_FILES_IN} a request may "
            "hand in; pack them into an archive",
            request_id,
        )
    import base64

    files: dict[str, bytes] = {}
    total = 0
    for name, encoded in value.items():
        problem = file_names.problem(name)
        if problem is not None:
            raise RequestError(f"files name {name!r} {problem}", request_id)
        if not isinstance(encoded, str):
            raise RequestError(f"files[{name!r}] must be a base64 string", request_id)
        try:
            data = base64.b64decode(encoded, validate=True)
        except ValueError:
            raise RequestError(f"files[{name!r}] is not base64 (RFC 4648)", request_id) from None
        total += len(data)
        if total > MAX_FILES_IN_BYTES:
            raise RequestError(
                f"files holds more than the {MAX_FILES_IN_BYTES} bytes a request may hand in; "
                "hand in less, or grant a directory with allow_read",
                request_id,
            )
        files[name] = data
    return files


def host_functions(message: dict[str, object]) -> list[dict[str, str]]:
    value = message.get("functions", [])
    if not isinstance(value, list):
        raise RequestError(
            'functions must be a list of {"name", "signature", "doc"}', message["id"]
        )
    functions = []
    names: set[str] = set()
    for spec in value:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise RequestError('each function needs a "name" string', message["id"])
        name = spec["name"]
        problem = host_function_names.name_problem(name)
        if problem is not None:
            raise RequestError(problem, message["id"])
        if name in names:
            raise RequestError(f"functions names {name!r} twice; give each once", message["id"])
        names.add(name)
        unknown = sorted(set(spec) - {"name", "signature", "doc"})
        if unknown:
            raise RequestError(
                f"function {name!r} has {unknown[0]!r}; a function takes only name, signature "
                "and doc",
                message["id"],
            )
        signature, doc = spec.get("signature", UNKNOWN_SIGNATURE), spec.get("doc", "")
        if not isinstance(signature, str) or not isinstance(doc, str):
            raise RequestError(
                f"the signature and doc of function {name!r} must be strings", message["id"]
            )
        if not _is_signature(signature):
            raise RequestError(
                f"the signature of function {name!r} is not a Python signature; give its "
                'parameters in parentheses, like "(query: str) -> list"',
                message["id"],
            )
        functions.append({"name": name, "signature": signature, "doc": doc})
    return functions


def _is_signature(text: str) -> bool:
    """Whether text reads as what follows a function's name in a def: it is shown as the
    function's, in its repr and help."""
    import ast  # the pool server has it loaded already (pynox.pool.server._warm_up)

    if text == UNKNOWN_SIGNATURE:
        return True
    try:
        ast.parse(f"def f{text}: pass")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return text.startswith("(")
