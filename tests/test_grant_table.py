"""Each grant is defined once (pynox.policy.grants.GRANT_FIELDS); every interface takes it
from there, so a grant added to the table reaches the command line, pynox.toml, the pool
protocol and the API, or this test says where it is missing."""

from __future__ import annotations

import inspect

import pytest

from pynox.api import shared
from pynox.api.options import RunOptions, SessionOptions, Spec
from pynox.api.pool import Pool
from pynox.cli import arguments
from pynox.policy import grants
from pynox.policy.resolve import Policy
from pynox.pool.request import REQUEST_FIELDS

pytestmark = pytest.mark.unit

NAMES = [field.name for field in grants.GRANT_FIELDS]


def test_the_command_line_has_a_flag_for_every_grant_and_its_help() -> None:
    flags = {**arguments._LIST_FLAGS, **arguments._VALUE_FLAGS, **arguments._SWITCHES}
    for field in grants.GRANT_FIELDS:
        assert flags[field.flag] == field.name
        assert field.flag in arguments.USAGE and field.help in arguments.USAGE
    assert set(NAMES) <= set(arguments.Invocation.__slots__)


def test_pynox_toml_and_the_pool_protocol_take_every_grant() -> None:
    assert set(grants._GRANT_KEYS) == set(NAMES)
    assert set(NAMES) <= REQUEST_FIELDS
    assert set(NAMES) == set(grants.Grants.__slots__)


def test_the_api_takes_every_grant_as_a_keyword() -> None:
    """Spec checks the keywords at run time; RunOptions and SessionOptions type them for
    every call that takes them (Pool.run, arun, session, tool; pynox.run, arun, tool)."""
    assert set(NAMES) <= set(inspect.signature(Spec.__init__).parameters)
    assert set(NAMES) <= set(Spec.__slots__)
    assert set(RunOptions.__annotations__) | set(SessionOptions.__annotations__) == (
        set(inspect.signature(Spec.__init__).parameters) - {"self"}
    )
    for call in (Pool.run, Pool.arun, Pool.session, Pool.tool, shared.run, shared.tool):
        kinds = {p.kind for p in inspect.signature(call).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD in kinds, call.__qualname__


def test_the_policy_carries_every_grant_under_its_name() -> None:
    assert Policy.__slots__[: len(NAMES)] == tuple(NAMES)
    policy = Policy()
    for name in NAMES:
        getattr(policy, name)  # each one set by the constructor: no AttributeError


def test_bounds_are_the_same_everywhere() -> None:
    """max_file_size=0 used to pass in pynox.toml (and meant no limit at all)."""
    import pytest

    from pynox.errors import ConfigError, UsageError
    from pynox.pool.request import RequestError

    field = grants.GRANTS_BY_NAME["max_file_size"]
    for error in (UsageError, ConfigError, RequestError):
        with pytest.raises(error):
            field.parse(0, "max_file_size", error=error)
    with pytest.raises(ValueError):
        Spec(max_file_size=0)
