"""The names of signals, as results and pynox's lines give them."""

import _signal

_names: "dict[int, str] | None" = None


def signal_names() -> "dict[int, str]":
    """signal.Signals(n).name for every n that has one, without importing signal and
    enum (~1 ms of a --json run): of a number's names (SIGABRT, SIGIOT), the enum
    keeps the first. Made once a process; not to be changed."""
    global _names
    if _names is None:
        _names = {}
        for name, value in vars(_signal).items():
            named = isinstance(value, int) and name.isupper() and name[:3] == "SIG"
            if named and "_" not in name[:4] and (value not in _names or name < _names[value]):
                _names[value] = name
    return _names


def signal_name(signum: int) -> str:
    return signal_names().get(signum) or f"signal {signum}"
