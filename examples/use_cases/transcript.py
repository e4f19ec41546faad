"""How the use cases print a conversation: the call the model made, the text it read back."""

from __future__ import annotations


def show_call(intent: str, reply: str, code: str | None = None, tool: str = "run_python") -> None:
    """One tool call: what the model meant to do, the call, and the tool's text output."""
    print(f"model: {intent}")
    if code is None:
        print(f"  {tool}()")
    else:
        print(f"  {tool}(code=")
        print(_quoted(code.rstrip("\n"), "    |"))
        print("  )")
    print("  the model reads:")
    print(_quoted(reply, "    >"))
    print()


def _quoted(text: str, mark: str) -> str:
    return "\n".join(f"{mark} {line}" if line else mark for line in text.splitlines())
