"""[pool.limits]: what no request may exceed, and the grants a request gets under it.

The pool server judges every request by these; a client (`pynox.tool`) judges a tool's
options by them too, when it is made, rather than have the pool refuse every call.
"""

import os

from pynox.errors import PynoxError
from pynox.policy.config import Grants
from pynox.policy.grants import PATH_GRANTS
from pynox.policy.path_grant import real_path
from pynox.unit_format import format_duration, format_size


class BeyondLimits(PynoxError):
    """Grants beyond [pool.limits]; the message names the field, what it allows and what
    to ask for instead."""


def refused_by_limits(
    name: str, path: "str | None", limits: Grants, limited: frozenset[str]
) -> bool:
    """Whether [pool.limits] would refuse a request the grant `name` (of `path`, for a path
    grant, or of every path when it is None; of the variable `path`, for allow_env), judged
    from the path as written: it comes from a program's error report, and the pool server
    never looks up a path a program names (one on a hung mount would stall it)."""
    if name not in limited:
        return False
    if name == "allow_network":
        return not limits.allow_network
    if name in PATH_GRANTS:
        roots = getattr(limits, name)
        return not roots if path is None else not within(os.path.normpath(path), roots)
    if name == "allow_env":  # `path` is the variable's name
        return path not in limits.allow_env
    return False


def within(path: str, roots: list[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def resolve_limits(limits: Grants) -> Grants:
    """[pool.limits] with its paths resolved once, when the pool starts: a symbolic link
    that a request plants or swaps later can never move them."""
    resolved = Grants().merged(limits)
    for key in PATH_GRANTS:
        setattr(resolved, key, [real_path(path) for path in getattr(limits, key)])
    return resolved


def cap(grants: Grants, limits: Grants, limited: frozenset[str]) -> Grants:
    """Refuses what exceeds [pool.limits]; fills what the request left to the limits.

    `limits` has its paths resolved (resolve_limits), and each path a request asks for
    is compared resolved too: what counts is where the kernel will let the program
    go, whatever the path's spelling or the links along it. The capped grants carry
    the resolved paths. `limited` names the keys [pool.limits] sets (an empty list
    there still limits).
    """

    def refuse(field: str, detail: str) -> BeyondLimits:
        return BeyondLimits(f"{field} exceeds [pool.limits]: {detail}")

    capped = Grants().merged(grants)
    for key in PATH_GRANTS:
        if key not in limited:
            continue
        roots = getattr(limits, key)
        allowed = ", ".join(roots) or "nothing"
        resolved = []
        for path in getattr(grants, key):
            real = real_path(path)
            if not within(real, roots):
                where = path if real == path else f"{path} (which resolves to {real})"
                raise refuse(key, f"{where} is outside what it allows ({allowed})")
            resolved.append(real)
        setattr(capped, key, resolved)
    if "allow_env" in limited:
        for name in grants.allow_env:
            if name not in limits.allow_env:
                raise refuse("allow_env", f"{name} is not among {limits.allow_env}")
    if "allow_network" in limited and grants.allow_network and not limits.allow_network:
        raise refuse("allow_network", "the limits keep the network off")
    for key in ("timeout", "memory", "max_output", "max_file_size"):
        if key not in limited:
            continue
        asked, most = getattr(grants, key), getattr(limits, key)
        if asked is None:
            setattr(capped, key, most)
        elif asked > most:
            shown = format_duration if key == "timeout" else format_size
            raise refuse(
                key,
                f"{shown(asked)} is above its limit of {shown(most)}; ask for {shown(most)} or "
                "less",
            )
    return capped
