"""What a host function may be called: one rule for the Python API and the pool protocol.

Code reaches a host function with `from pynox_host import NAME`, so NAME is a public Python
identifier; and it must not shadow what pynox_host defines itself (HostError), or code
could no longer catch a failed call by that name.
"""

import keyword

RESERVED = frozenset({"HostError"})


def name_problem(name: object) -> "str | None":
    """Why `name` cannot be a host function's, in one sentence that says what to do; None
    when it can."""
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        return (
            f"{name!r} cannot be a host function's name: code imports it with "
            "`from pynox_host import NAME`, so name it with a Python identifier"
        )
    if name.startswith("_"):
        return (
            f"{name!r} cannot be a host function's name: pynox_host keeps names that start "
            "with _ for itself; name it without the leading underscore"
        )
    if name in RESERVED:
        return f"{name!r} is pynox_host's own name; give the function another name"
    return None
