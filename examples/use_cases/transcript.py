"""How the examples print a conversation: the call the model made, the text it read back."""

from __future__ import annotations


def show_call(intent: str, reply: str, code: str | None = None, tool: str = "run_python") -> None:
    """One tool call: what the model meant to do, the call, and the tool's text output."""
    show_request(intent, code, tool)
    show_reply(reply)


def show_request(intent: str, code: str | None = None, tool: str = "run_python") -> None:
    print(f"model: {intent}")
    if code is None:
        print(f"  {tool}()")
    else:
        print(f"  {tool}(code=")
        print(quoted(code.rstrip("\n"), "    |"))
        print("  )")


def show_reply(reply: str) -> None:
    print("  the model reads:")
    print(quoted(reply, "    >"))
    print()


def quoted(text: str, mark: str) -> str:
    """`text` with `mark` before every line, so that it stands apart from the narration."""
    return "\n".join(f"{mark} {line}" if line else mark for line in text.splitlines())
