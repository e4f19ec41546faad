"""A program's file is refused as python's own reading of it refuses it.

python reads a script with its file reader, which refuses some files before parsing a
line: bytes that are not UTF-8 with no encoding declared, a declared encoding it cannot
read the file in, a NUL byte (pynox.engine.source_file). Each test writes files that the
interpreter running the suite, a `python` of the same version as pynox's, then reads:
pynox must refuse exactly those, in the same words, and nothing else.
"""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support.commands import PYTHON, pynox, python
from support.examples import examples

from pynox.engine.source_file import refusal

# Lines python's reader treats each in its own way: declarations (of UTF-8, of Latin-1
# under other names, of encodings that cannot read what follows, of no encoding at
# all), bytes that are not UTF-8 (a lone byte, a surrogate, an overlong form, a code
# point past U+10FFFF), valid UTF-8, a NUL, and plain code.
LINES = [
    b"x = 1",
    b"print(x)",
    b"# a comment",
    b"",
    b"   ",
    b"#!/usr/bin/env python",
    b"# -*- coding: latin-1 -*-",
    b"# coding: Latin_1",
    b"# coding: utf-8",
    b"# coding: UTF-8-sig",
    b"#coding:utf8",
    b"# coding=ascii",
    b"# vim: set fileencoding=cp1252 :",
    b"# coding: no-such-codec",
    b"# coding: utf-16",
    b"# coding: rot13",
    b"s = 'caf\xe9'",
    b"# \xff",
    b"# \xed\xa0\x80",
    b"# \xc0\xaf",
    b"# \xf4\x90\x80\x80",
    b"z = 2  # \xc3",
    b"y = '\xc3\xa9'",
    b"# \xe2\x82\xac",
    b"# a\x00b",
    b"\x00",
    b"if x:\n    pass",
    b"x = (",
]

sources = st.builds(
    lambda bom, lines, newline, last: bom + newline.join(lines) + last * newline,
    st.sampled_from([b"", b"\xef\xbb\xbf"]),
    st.lists(st.sampled_from(LINES), min_size=1, max_size=5),
    st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.booleans(),
)
READER_ERRORS = ("Non-UTF-8 code", "encoding problem", "source code cannot contain null bytes")


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(source=sources)
def test_refused_as_python_refuses(tmp_path: Path, source: bytes) -> None:
    # 3.10 reads a line with a NUL its own way; pynox leaves those to compile().
    assume(b"\0" not in source or sys.version_info >= (3, 11))
    path = tmp_path / "program.py"
    path.write_bytes(source)
    ran = subprocess.run([PYTHON, "-I", str(path)], capture_output=True, timeout=30)
    stderr = ran.stderr.decode("utf-8", "replace")
    refused = refusal(source, str(path))
    if refused is None:
        assert not any(error in stderr for error in READER_ERRORS), stderr
    else:
        assert ran.returncode == 1
        assert stderr.endswith("".join(traceback.format_exception_only(refused)))


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 reads a NUL as the end of its line")
def test_a_nul_byte_in_the_script_is_refused_at_its_line(tmp_path: Path) -> None:
    (tmp_path / "nul.py").write_bytes(b"print('never runs')\nx = 1  \x00 y\nprint(x)\n")
    ref = python("nul.py", cwd=tmp_path)
    got = pynox("nul.py", cwd=tmp_path)
    assert ref.returncode == 1
    assert ref.stderr.endswith(b"SyntaxError: source code cannot contain null bytes\n")
    assert (got.returncode, got.stdout, got.stderr) == (ref.returncode, ref.stdout, ref.stderr)
