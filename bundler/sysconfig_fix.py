"""Pointing the runtime's sysconfig data at wherever the bundle is installed.

PBS builds in /install (pack-runtime's archives in their original prefix), and
_sysconfigdata keeps those build-time paths: LIBDIR, INCLUDEPY, LIBPL and the
like would name folders that do not exist on the installed machine. CPython
already replaces `prefix` and `exec_prefix` at run time; the other pure paths
under the build prefix are rewritten at import against the module's own
location, so the relocatable bundle stays right wherever it is moved. Compiler
flags are left alone: a sandboxed program does not compile extensions.
"""

from __future__ import annotations

from pathlib import Path

from bundler.runtime_layout import read_build_vars

MARKER = "# pynox bundler: relocation"

RELOCATE = """
{marker}
def _pynox_relocate():
    import os

    built = {built!r}
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for key, value in build_time_vars.items():
        if isinstance(value, str) and (value == built or value.startswith(built + "/")):
            build_time_vars[key] = here + value[len(built):]


_pynox_relocate()
del _pynox_relocate
"""


def fix_sysconfigdata(stdlib: Path) -> list[Path]:
    """Appends the relocation to every _sysconfigdata module; returns those changed."""
    changed = []
    for module in sorted(stdlib.glob("_sysconfigdata_*.py")):
        text = module.read_text(encoding="utf-8")
        if MARKER in text:
            continue
        built = read_build_vars(module).get("prefix")
        if not isinstance(built, str) or not built.startswith("/") or built == "/":
            continue
        module.write_text(
            text.rstrip("\n") + "\n" + RELOCATE.format(marker=MARKER, built=built.rstrip("/")),
            encoding="utf-8",
        )
        changed.append(module)
    return changed
