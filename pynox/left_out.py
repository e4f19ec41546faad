"""The line that stands for what an output stream cut to its limit left out (its middle,
or its start), as results show it; runtime/launcher_result.c writes it too."""

_BEFORE, _AFTER = "[... ", " bytes left out ...]"


def left_out_line(count: int) -> bytes:
    return f"{_BEFORE}{count}{_AFTER}\n".encode()


def is_left_out_line(line: str) -> bool:
    return (
        line.startswith(_BEFORE)
        and line.endswith(_AFTER)
        and line[len(_BEFORE) : -len(_AFTER)].isdigit()
    )
