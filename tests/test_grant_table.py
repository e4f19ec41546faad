"""Each grant is defined once (pynox.policy.grants.GRANT_FIELDS); every interface takes it
from there, so a grant added to the table reaches the command line, pynox.toml, the pool
protocol and the API, or this test says where it is missing."""

from __future__ import annotations

import inspect

import pytest

from pynox.api.options import Spec
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
    for call in (Spec.__init__, Pool.run, Pool.arun, Pool.tool, Pool.session):
        keywords = set(inspect.signature(call).parameters)
        assert set(NAMES) <= keywords, (call.__qualname__, set(NAMES) - keywords)
    assert set(NAMES) <= set(Spec.__slots__)


def test_the_policy_carries_every_grant_it_enforces() -> None:
    enforced = set(NAMES) - {"allow_network"}  # the policy's switch is called network
    assert enforced <= set(Policy.__slots__)
    assert "network" in Policy.__slots__


def test_bounds_are_the_same_everywhere() -> None:
    """max_file_size=0 used to pass in pynox.toml (and meant no limit at all)."""
    import pytest

    from pynox.errors import ConfigError, RequestError, UsageError

    field = grants.GRANTS_BY_NAME["max_file_size"]
    for error in (UsageError, ConfigError, RequestError):
        with pytest.raises(error):
            field.parse(0, "max_file_size", error=error)
    with pytest.raises(ValueError):
        Spec(max_file_size=0)
