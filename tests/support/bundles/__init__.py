"""Helpers for the bundle, fetch and install tests.

The bundler is not installed in the test environment; it runs from the source
tree, which goes at the end of sys.path so that `import pynox` still finds the
installed package (with its compiled parts) first.
"""

from __future__ import annotations

import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[3]
if str(PROJECT) not in sys.path:
    sys.path.append(str(PROJECT))


def extract(archive: Path, destination: Path) -> None:
    """Unpacks a test archive (with the "tar" filter where this CPython has filters)."""
    import tarfile

    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "tar_filter"):
            tar.extractall(destination, filter="tar")
        else:  # pragma: no cover - CPython without extraction filters
            tar.extractall(destination)
