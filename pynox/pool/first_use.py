"""What a preloaded package imports only when its common functions first run.

Some packages defer imports from their own functions: numpy 2's `median` reaches
`numpy.ma` (numpy 1 imported it with numpy), and pandas with pyarrow installed makes
the labels of every frame with named columns pyarrow-backed strings, which import
pyarrow's pandas layer on first use. Preloaded alone, such a package still has each
child import those modules for its request's first use, copying the pages they write
to: about half of a small numpy or pandas request in a fresh child. So preloading the
package imports them too, when they are installed.

Only what a package's own code imports on its first common use belongs here, not the
submodules a program names itself (`numpy.random`): those, a pool preloads by name.
"""

import sys

# By the preloaded module's name, the modules its first common use imports.
COMPANIONS = {
    "numpy": ("numpy.ma",),
    # The second, pyarrow.pandas_compat's own first use imports.
    "pandas": ("pyarrow.pandas_compat", "pyarrow.vendored.version"),
}


def import_companions(module: str) -> "list[str]":
    """Imports the modules `module`'s first use would import; returns those imported.

    One that is not installed or fails to import is left to the request that uses it,
    as without the preload: it is no module the pool was asked for.
    """
    imported = []
    for companion in COMPANIONS.get(module, ()):
        if companion in sys.modules:
            continue
        try:
            __import__(companion)
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001, S112 - the request then imports it itself
            continue
        imported.append(companion)
    return imported
