"""The names results give signals, worked out without importing signal (and enum)."""

from __future__ import annotations

import signal

import pytest

from pynox.engine.result import signal_name


@pytest.mark.unit
@pytest.mark.parametrize("signum", range(70))
def test_a_signal_is_named_as_the_signal_module_names_it(signum: int) -> None:
    try:
        expected = signal.Signals(signum).name
    except ValueError:
        expected = f"signal {signum}"
    assert signal_name(signum) == expected
