"""Durations and sizes: what users may write, what they are told when it is wrong."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynox import limits, unit_format, units
from pynox.errors import ConfigError, PolicyError, PynoxError, UsageError

pytestmark = pytest.mark.unit


def test_error_classes_carry_their_exit_codes_and_message() -> None:
    assert UsageError("x").exit_code == 2
    assert ConfigError("x").exit_code == 125
    assert PolicyError("x").exit_code == 125
    error = ConfigError("the file is wrong; fix it")
    assert isinstance(error, PynoxError)
    assert error.message == str(error) == "the file is wrong; fix it"
    assert error.user_line() == "pynox: the file is wrong; fix it"


def test_limits() -> None:
    assert limits.MAX_TIMEOUT == units.MAX_TIMEOUT == 86400
    assert limits.MIN_MEMORY == 32 * 1024 * 1024
    assert limits.MAX_OUTPUT_LIMIT == 16 * 1024 * 1024
    assert limits.DEFAULT_MAX_OUTPUT == 65536


@pytest.mark.parametrize(
    ("written", "seconds"),
    [
        ("500ms", 0.5),
        ("5s", 5.0),
        ("1.5s", 1.5),
        ("2m", 120.0),
        ("1h", 3600.0),
        ("90", 90.0),
        (" 10s\t", 10.0),
        ("5 s", 5.0),
        ("5S", 5.0),
        (".5s", 0.5),
        ("24h", 86400.0),
        (3, 3.0),
        (0.25, 0.25),
        # Rounded to whole milliseconds, as the limit is enforced and reported.
        ("0.6ms", 0.001),
        ("2000.4ms", 2.0),
        (2.0004, 2.0),
        ("1.0006s", 1.001),
    ],
)
def test_parse_duration_accepts(written: object, seconds: float) -> None:
    parsed = units.parse_duration(written, "--timeout")
    assert parsed == seconds
    assert type(parsed) is float


@pytest.mark.parametrize(
    "written",
    [
        "abc",
        "",
        "   ",
        "5x",
        "5 sec",
        "1.2.3s",
        "ms",
        ".",
        "inf",
        "nan",
        "1e3",
        "0x10",
        True,
        None,
        [5],
        float("nan"),
    ],
)
def test_parse_duration_rejects_what_is_not_a_duration(written: object) -> None:
    with pytest.raises(UsageError, match="is not a duration; write it like 500ms, 5s, 2m or 1h$"):
        units.parse_duration(written, "--timeout")


def test_parse_duration_messages() -> None:
    def message(value: object, what: str = "--timeout") -> str:
        with pytest.raises(UsageError) as failure:
            units.parse_duration(value, what)
        return failure.value.message

    assert message("abc") == "--timeout=abc is not a duration; write it like 500ms, 5s, 2m or 1h"
    assert message("0") == "--timeout=0 is not more than zero; give a positive duration, like 5s"
    assert message(-1) == "--timeout=-1 is not more than zero; give a positive duration, like 5s"
    assert (
        message("-5s") == "--timeout=-5s is not more than zero; give a positive duration, like 5s"
    )
    assert message("25h") == "--timeout=25h is above the 24h maximum; give at most 24h"
    # Limits are enforced in whole milliseconds: less than one is none at all.
    assert message("0.4ms") == "--timeout=0.4ms is below the 1ms minimum; give at least 1ms"
    assert message(0.0001) == "--timeout=0.0001 is below the 1ms minimum; give at least 1ms"
    assert message(86401) == "--timeout=86401 is above the 24h maximum; give at most 24h"
    assert message(10**400) == f"--timeout={10**400} is above the 24h maximum; give at most 24h"
    assert message("9" * 500 + "h").endswith("is above the 24h maximum; give at most 24h")
    assert message(10**5000) == (
        "--timeout=<an integer of 4999 digits or more> is above the 24h maximum; give at most 24h"
    )
    # A phrase names the key first; the value is then shown as it is written in TOML.
    assert message("abc", "timeout in [permissions] of /p/pynox.toml") == (
        'timeout = "abc" in [permissions] of /p/pynox.toml is not a duration;'
        " write it like 500ms, 5s, 2m or 1h"
    )


def test_parse_duration_raises_the_error_class_asked_for() -> None:
    with pytest.raises(ConfigError) as failure:
        units.parse_duration("later", "timeout in [pool] of /p/pynox.toml", error=ConfigError)
    assert failure.value.exit_code == 125


@pytest.mark.parametrize(
    ("written", "size"),
    [
        ("100", 100),
        ("64k", 65536),
        ("512m", 512 << 20),
        ("1g", 1 << 30),
        ("2t", 2 << 40),
        ("512MiB", 512 << 20),
        ("1GB", 1 << 30),
        ("1kb", 1024),
        ("1KiB", 1024),
        ("7b", 7),
        ("7B", 7),
        (" 64 k ", 65536),
        ("1.5g", 3 << 29),
        ("0.1k", 102),  # 102.4 rounded down
        ("1.1g", 1181116006),  # 1181116006.4 rounded down
        ("1.", 1),
        # However many zeros lead or trail: the size is what they surround.
        ("0" * 50 + "64m", 64 << 20),
        ("1." + "0" * 5000 + "k", 1024),
        ("0." + "0" * 100 + "1t", 0),
        ("000", 0),
        (65536, 65536),
        (0, 0),
    ],
)
def test_parse_size_accepts(written: object, size: int) -> None:
    parsed = units.parse_size(written, "--memory")
    assert parsed == size
    assert type(parsed) is int


@pytest.mark.parametrize(
    "written",
    [
        "abc",
        "",
        "1ib",
        "5x",
        "1.5.5k",
        "k",
        "1e3",
        "1kk",
        "1 gib b",
        True,
        None,
        1.5,
        1024.0,
        ["1g"],
    ],
)
def test_parse_size_rejects_what_is_not_a_size(written: object) -> None:
    with pytest.raises(UsageError, match="is not a size; write it like 65536, 64k, 512m or 1g$"):
        units.parse_size(written, "--max-output")


def test_parse_size_messages() -> None:
    def message(value: object, minimum: int = 0, maximum: int | None = None) -> str:
        with pytest.raises(UsageError) as failure:
            units.parse_size(value, "--memory", minimum, maximum)
        return failure.value.message

    assert message("abc") == "--memory=abc is not a size; write it like 65536, 64k, 512m or 1g"
    assert message("16m", limits.MIN_MEMORY) == (
        "--memory=16m is below the 32m minimum; give at least 32m"
    )
    assert message("32m", 0, limits.MAX_OUTPUT_LIMIT) == (
        "--memory=32m is above the 16m maximum; give at most 16m"
    )
    assert message(-3, limits.MIN_MEMORY) == "--memory=-3 is negative; give a size of at least 32m"
    assert message("-1k") == "--memory=-1k is negative; give a size of at least 0"
    # A floor of whole bytes says so: "below the 1 minimum" read as a count of nothing.
    assert message(0, 1) == "--memory=0 is below the 1 byte minimum; give at least 1 byte"
    assert message("1000", 1025) == (
        "--memory=1000 is below the 1025 bytes minimum; give at least 1025 bytes"
    )
    assert message("9" * 5000) == (
        f"--memory={'9' * 5000} is above the 1048576t maximum; give at most 1048576t"
    )


def test_parse_size_limits_are_inclusive() -> None:
    assert units.parse_size("32m", "--memory", limits.MIN_MEMORY) == limits.MIN_MEMORY
    assert units.parse_size("16m", "--max-output", 0, limits.MAX_OUTPUT_LIMIT) == 16 << 20


def test_parse_size_raises_the_error_class_asked_for() -> None:
    with pytest.raises(ConfigError, match=r'^memory = "1m" in \[permissions\] of /p/pynox.toml '):
        units.parse_size(
            "1m", "memory in [permissions] of /p/pynox.toml", limits.MIN_MEMORY, error=ConfigError
        )


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (5, "5s"),
        (0.5, "500ms"),
        (120, "2m"),
        (1.5, "1.5s"),
        (90, "90s"),
        (3600, "1h"),
        (86400, "24h"),
        (5400, "90m"),
        (0.0015, "1.5ms"),
        (0, "0s"),
    ],
)
def test_format_duration(seconds: float, shown: str) -> None:
    assert unit_format.format_duration(seconds) == shown


@pytest.mark.parametrize(
    ("size", "shown"),
    [
        (512 << 20, "512m"),
        (1 << 30, "1g"),
        (3 << 29, "1536m"),
        (2 << 40, "2t"),
        (65536, "65536"),
        (1000, "1000"),
        ((1 << 20) + 1, "1048577"),
        (300000 << 10, "300000k"),  # as ulimit -v 300000 sets it
        ((1 << 20) + (1 << 10), "1025k"),
        (1023 << 10, "1047552"),  # below a mebibyte: bytes, as 65536
        (0, "0"),
    ],
)
def test_format_size(size: int, shown: str) -> None:
    assert unit_format.format_size(size) == shown


@given(st.integers(min_value=0, max_value=units.LARGEST_SIZE))
def test_format_size_reads_back(size: int) -> None:
    assert units.parse_size(unit_format.format_size(size), "--memory") == size


@given(
    st.integers(min_value=0, max_value=1 << 20),
    st.sampled_from([("", 1), ("k", 1 << 10), ("m", 1 << 20), ("g", 1 << 30), ("t", 1 << 40)]),
    st.sampled_from(["", "b", "ib", "B", "iB"]),
)
def test_parse_size_of_any_unit(count: int, unit: tuple[str, int], suffix: str) -> None:
    letter, factor = unit
    if not letter and suffix.lower() == "ib":
        return  # "ib" needs a unit letter in front of it
    written = f"{count}{letter.upper() if count % 2 else letter}{suffix}"
    assert units.parse_size(written, "--memory") == count * factor


@given(st.integers(min_value=1, max_value=86_400_000))
def test_format_duration_reads_back(milliseconds: int) -> None:
    seconds = milliseconds / 1000
    shown = unit_format.format_duration(seconds)
    assert math.isclose(units.parse_duration(shown, "--timeout"), seconds, rel_tol=1e-9)


@pytest.mark.parametrize(
    ("limit", "hint"),
    [
        (0.0001, "make it faster or raise the limit with --timeout=1s"),
        (0.3, "make it faster or raise the limit with --timeout=1s"),
        (5.0, "make it faster or raise the limit with --timeout=10s"),
        (13 * 3600.0, "make it faster or raise the limit with --timeout=24h"),
        (limits.MAX_TIMEOUT, "make it faster: 24h is the longest time limit pynox allows"),
    ],
)
def test_a_timeout_hint_names_a_limit_pynox_accepts(limit: float, hint: str) -> None:
    """At least a second (a doubled hundredth of one would not cover the interpreter's
    start), at most what --timeout takes: a suggestion that is refused helps no one."""
    from pynox.engine.time_limit import timeout_error
    from pynox.policy.resolve import Policy

    policy = Policy()
    policy.timeout = limit
    assert timeout_error(policy, api=False)["hint"] == hint
    if "--timeout=" in hint:
        units.parse_duration(hint.rpartition("=")[2], "--timeout")  # raises if refused
