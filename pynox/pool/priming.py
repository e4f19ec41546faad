"""Primed spares: confined ahead of a request, to the policy the pool expects next.

A pool's requests mostly share one policy. A spare that waits idle is sent the
policy of the pool's last request and confines itself to it, a scratch directory
of its own included; a request of the same policy then finds its child confined
already. A request of another policy takes a spare that is not primed, which the
pool keeps (see PoolServer._prime_spares), so it never waits for a fork.

Landlock binds a grant to the file its path named when the rule was made, so a
primed spare serves a request only while every path of the policy still names the
file it named when the spare was primed: a directory renamed and replaced since
would otherwise reach the request as it was.
"""

import os

from pynox.policy import system_paths
from pynox.policy.resolve import Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    # The policy's fields without its scratch directory, and what each path names.
    PolicyKey = tuple[dict[str, Any], tuple[tuple[str, int, int], ...]]


def template(policy: Policy) -> "dict[str, Any]":
    """The policy's fields, copied, before its scratch directory is attached: what a
    primed spare's policy is made from, and compared by."""
    if policy.scratch is not None:
        raise ValueError("a template is taken before the scratch directory is attached")
    return _copy(policy.to_wire())


def from_template(fields: "dict[str, Any]") -> Policy:
    """A policy of the template's fields, its own copy (attaching a scratch changes it)."""
    return Policy.from_wire(_copy(fields))


def _copy(fields: "dict[str, Any]") -> "dict[str, Any]":
    copied: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, (list, dict)):
            value = value.copy()
        copied[name] = value
    return copied


def key(fields: "dict[str, Any]") -> "PolicyKey":
    """The template with what each of its paths names now."""
    policy = Policy.from_wire(fields)
    paths = policy.reads() + policy.writes()
    if policy.allow_network:
        paths += system_paths.network_reads()  # the child grants these itself
    named = []
    for path in paths:
        try:
            status = os.stat(path, follow_symlinks=False)
        except OSError:
            named.append((path, -1, -1))
        else:
            named.append((path, status.st_dev, status.st_ino))
    return fields, tuple(named)
