"""A Python tool for an agent, made with `pynox.tool()`.

The function it returns is what you register with an agent framework: a typed
`run_python(code: str) -> str` whose docstring tells the model what the sandbox
allows. The application fixes the permissions; the model only writes code, and
each call runs in a fresh sandboxed process.

    python examples/agent_tool.py     # with the pynox package installed
"""

import pynox

# One pool serves the whole application; the permissions belong to the tool.
run_python = pynox.tool(timeout="10s", memory="256m")

if __name__ == "__main__":
    print(run_python.__doc__)
    print()
    print(run_python("import sys\nprint('Hello from an agent tool', sys.argv)"))
    print()
    print(run_python("open('/etc/passwd').read()"))
