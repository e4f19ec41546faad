"""A Python tool for an agent, made with `pynox.tool()`.

The function it returns is what you register with an agent framework: a typed
`run_python(code: str) -> str` whose docstring tells the model what the sandbox
allows. The application fixes the permissions; the model only writes code, and
each call runs in a fresh sandboxed process. As in a notebook, the value of the
code's last expression comes back too, and so do the figures it draws with
matplotlib: the text names each image, and `run_python.run(code)` gives the whole
result, with the PNG bytes, for a framework that hands images to the model.

    python examples/agent_tool.py     # with the pynox package installed
"""

import importlib.util
import os

import pynox

# One pool serves the whole application; the permissions belong to the tool.
run_python = pynox.tool(timeout="10s", memory="256m")

CHART = """\
import matplotlib.pyplot as plt
plt.bar(["North", "South", "West"], [1931.0, 1111.5, 2360.5])
plt.title("Revenue by region")
plt.show()
"""


def matplotlib_dir() -> "str | None":
    """The package directory matplotlib is installed in, beside this interpreter."""
    spec = importlib.util.find_spec("matplotlib")
    if spec is None or spec.origin is None:
        return None
    return os.path.dirname(os.path.dirname(spec.origin))


if __name__ == "__main__":
    print(run_python.__doc__)
    print()
    print(run_python("import sys\nprint('Hello from an agent tool', sys.argv)"))
    print()
    print(run_python("open('/etc/passwd').read()"))
    print()
    print(run_python("prices = [19.5, 420.0, 8.25]\nsum(prices)"))
    print()
    packages = matplotlib_dir()
    if packages is None:
        print("matplotlib is not installed beside this Python: no chart to draw")
    else:
        draw = pynox.tool(timeout="60s", package_dirs=[packages])
        print(draw(CHART))
        result = draw.run(CHART)
        for image in result.images:
            print(
                f"the application holds {image.mime}, {image.width}x{image.height}: "
                f"{image.data[:8]!r}..."
            )
