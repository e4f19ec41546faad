"""The file name tracebacks give a session's step: the pool names a step the client did
not name after its number (pynox.pool.step_lines), and the smolagents executor names the
model's code actions alike, counted from its first (pynox.integrations.smolagents)."""


def step_name(step: "int | None") -> str:
    """The file name of step number `step`."""
    return f"<step-{step}>"
