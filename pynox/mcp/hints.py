"""Hints in the words of the server's owner: the grants of its pynox.toml.

The pool words a hint for an API caller (`allow_read=['/srv/data']`), but no MCP call can
grant anything: the permissions are the pynox.toml's that the server started with. So each
grant a hint names is spelled as that file's key and value, and the hint says where it
goes and who can put it there; a session step's note that says to start a new session with
the grant goes, since a new session would have the same permissions.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import TYPE_CHECKING

from pynox.policy.grants import GRANT_NAMES, SESSION_NOTE

if TYPE_CHECKING:
    from pynox.api.result import Result

_STRING = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
# A grant as pynox.engine.hint_style.Style(api=True) spells it (tests/mcp/test_mcp_hints.py
# reads its hints back): name=['path'] (paths and names), name=True (a switch), name='4s' (a
# limit), as a word of its own. Or a path as the hint shows it in its text, which the
# program chose, and which is left as it is: a word in single quotes as a shell reads it
# (pynox.engine.hint_style.shown_path), whatever it holds; a plain one is one word already.
_API_GRANT = re.compile(
    r"(?<!\S)(?P<path>'[^']*'(?:\"'\"'[^']*')*)"
    rf"|(?<!\S)(?P<name>{'|'.join(GRANT_NAMES)})=(?P<value>\[(?:{_STRING})\]|True|{_STRING})",
)
# What TOML takes in a literal string: no quote, no control character.
_LITERAL = re.compile(r"[^'\x00-\x1f\x7f]*")


def for_server(result: Result, table: str, config: str | None) -> Result:
    """result, whose hint names the grants it needs as `table` of `config` takes them."""
    error = result.error
    if error is None or not error["hint"]:
        return result
    hint = error["hint"]
    spelled = _API_GRANT.sub(_as_toml, hint.removesuffix(SESSION_NOTE))
    if spelled == hint:
        return result
    if config is not None:
        spelled += (
            f"; this server's permissions are those of {table} of {config}, which neither "
            "the code nor a new session can change: tell the user, who can grant it there "
            "and restart the server"
        )
    else:  # "there" would be nowhere: the server reads a file only where it was told to
        spelled += (
            "; this server runs without a pynox.toml, and neither the code nor a new "
            "session can change its permissions: tell the user, who can grant it in "
            f"{table} of a pynox.toml and restart the server with --config naming that file"
        )
    raw = result.raw
    if isinstance(raw.get("error"), dict):  # Result.from_json(raw) gives this Result again
        raw = {**raw, "error": {**raw["error"], "hint": spelled}}
    return dataclasses.replace(result, error={**error, "hint": spelled}, raw=raw)


def _as_toml(found: re.Match[str]) -> str:
    if found.group("path") is not None:
        return found.group("path")
    name, value = found.group("name"), ast.literal_eval(found.group("value"))
    return f"{name} = {_toml_value(value)}"


def _toml_value(value: object) -> str:
    if value is True:
        return "true"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    text = str(value)
    if _LITERAL.fullmatch(text):
        return f"'{text}'"
    escaped = "".join(
        "\\" + character
        if character in '"\\'
        else f"\\u{ord(character):04x}"
        if ord(character) < 0x20 or ord(character) == 0x7F
        else character
        for character in text
    )
    return f'"{escaped}"'
