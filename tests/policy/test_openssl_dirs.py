"""Where the interpreter's OpenSSL reads its configuration, and the record of it."""

from __future__ import annotations

import json
import os
import posix
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pynox import lean_os
from pynox.errors import PolicyError
from pynox.policy import cache, openssl_dirs, trusted

pytestmark = pytest.mark.unit

# What OpenSSL itself says, through OpenSSL_version() (ctypes: a test may load libffi).
_ASK_OPENSSL = """
import ctypes, json, _ssl
version = ctypes.CDLL(_ssl.__file__).OpenSSL_version
version.restype = ctypes.c_char_p
said = [version(kind) for kind in (4, 5)]  # OPENSSL_DIR, OPENSSL_ENGINES_DIR
print(json.dumps([text.decode().split('"')[1] for text in said if b'"' in text]))
"""
# What pynox finds, in a process of its own, as a run would.
_ASK_PYNOX = """
import json
from pynox.policy import openssl_dirs
print(json.dumps(openssl_dirs.directories()))
"""


@pytest.fixture(autouse=True)
def _not_asked_yet(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test asks anew, with a cache of its own (in the environment pynox reads:
    posix.environ, which os.environ does not change)."""
    monkeypatch.setattr(openssl_dirs, "_found", None)
    (tmp_path / "home").mkdir()
    monkeypatch.setitem(posix.environ, b"HOME", os.fsencode(tmp_path / "home"))
    if b"XDG_CACHE_HOME" in posix.environ:
        monkeypatch.delitem(posix.environ, b"XDG_CACHE_HOME")


def _entry() -> Path:
    entry = cache.entry_path(sys.executable, lean_os.environment(), cache.OPENSSL_CACHE)
    assert entry is not None
    return Path(entry)


def test_the_directories_are_those_openssl_names() -> None:
    """The real value, as the library returns it."""
    pytest.importorskip("_ssl")
    said = json.loads(subprocess.check_output([sys.executable, "-I", "-c", _ASK_OPENSSL]))
    found = json.loads(subprocess.check_output([sys.executable, "-I", "-c", _ASK_PYNOX]))
    assert said and said[0] == next(path for path, what in found if what == "configuration")
    assert set(said) <= {path for path, _ in found}


def test_the_answer_is_kept_and_taken_while_its_files_are_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("_ssl")
    asked = openssl_dirs.directories()
    assert _entry().stat().st_mode & 0o777 == 0o600
    monkeypatch.setattr(openssl_dirs, "_found", None)
    monkeypatch.setattr(openssl_dirs, "_asked", _never_asked)
    assert openssl_dirs.directories() == asked


def _never_asked(remember: bool) -> list[tuple[str, str]]:
    raise AssertionError("OpenSSL was asked again")


def test_a_changed_library_has_openssl_asked_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The answer came from the files recorded beside it: one that changed (a new
    libcrypto, or the loader's cache rewritten) may say another directory."""
    pytest.importorskip("_ssl")
    openssl_dirs.directories()
    key, files, found = _stored()
    library = tmp_path / "libcrypto.so.3"
    library.write_bytes(b'OPENSSLDIR: "/old"')
    files = (*files, (str(library), openssl_dirs._identity(str(library))))
    _store((key, files, (("/old", "configuration"),)))
    monkeypatch.setattr(openssl_dirs, "_found", None)
    assert openssl_dirs.directories() == [("/old", "configuration")]  # as recorded
    library.write_bytes(b'OPENSSLDIR: "/newer"')  # a size of its own: a tick may pass unseen
    monkeypatch.setattr(openssl_dirs, "_found", None)
    assert openssl_dirs.directories() == [tuple(each) for each in found]  # asked anew


@pytest.mark.parametrize("forged", ["group-writable", "of-another-key", "damaged", "a-link"])
def test_an_entry_pynox_cannot_trust_is_not_taken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, forged: str
) -> None:
    """An entry another could have written, or one for another interpreter or loader
    environment, names no directory: OpenSSL is asked."""
    pytest.importorskip("_ssl")
    openssl_dirs.directories()
    key, files, _ = _stored()
    entry = _entry()
    if forged == "of-another-key":
        _store(((*key[:3], ("/elsewhere", None, None, None)), files, (("/x", "configuration"),)))
    elif forged == "damaged":
        entry.write_bytes(b"\x00garbage")
    else:
        _store((key, files, (("/x", "configuration"),)))
        if forged == "group-writable":
            entry.chmod(0o620)
        else:
            target = tmp_path / "target"
            entry.rename(target)
            entry.symlink_to(target)
    monkeypatch.setattr(openssl_dirs, "_found", None)
    monkeypatch.setattr(openssl_dirs, "_remember", lambda stored: None)
    found = openssl_dirs.directories()
    assert ("/x", "configuration") not in found and found


def _stored() -> Any:
    return cache.read_own_entry(str(_entry()))


def _store(stored: object) -> None:
    from pynox.policy.cache_writer import write_entry

    entry = _entry()
    write_entry(str(entry), stored, str(entry.parent.parent.parent), cache.SUFFIX)  # type: ignore[arg-type]


def test_the_markers_name_each_directory() -> None:
    data = (
        b'\0OPENSSLDIR: "/opt/brew/etc/openssl@3"\0ENGINESDIR: "/opt/brew/lib/engines-3"\0'
        b'MODULESDIR: "/opt/brew/lib/ossl-modules"\0OPENSSLDIR: N/A\0OPENSSLDIR: "relative"'
    )
    assert sorted(openssl_dirs._named(data)) == [
        ("/opt/brew/etc/openssl@3", "configuration"),
        ("/opt/brew/lib/engines-3", "engines"),
        ("/opt/brew/lib/ossl-modules", "providers"),
    ]
    far = b'OPENSSLDIR: "/a"' + bytes(1 << 17) + b'MODULESDIR: "/b"'
    assert openssl_dirs._named(far) == [("/a", "configuration"), ("/b", "providers")]
    assert openssl_dirs._named(b'MODULESDIR: "/b"') == []  # no OpenSSL's own: none of it


@pytest.mark.parametrize(
    ("grant", "expected"),
    [
        ("ssl", "it is {}/ssl, the directory the interpreter's OpenSSL reads its configuration"),
        ("ssl/certs", "it lies inside {}/ssl, the directory the interpreter's OpenSSL reads"),
        ("", "it covers {}/ssl, the directory the interpreter's OpenSSL reads its configuration"),
        ("lib", "it is {}/lib, the directory the interpreter's OpenSSL loads its providers"),
    ],
)
def test_a_write_grant_reaching_openssls_own_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, grant: str, expected: str
) -> None:
    """An OpenSSL built with its directory elsewhere than the usual places (Homebrew's
    etc/openssl@3 on Linux, a custom --openssldir): a program granted it wrote an
    openssl.cnf naming a provider of its own, which a pool preloading requests loaded
    unconfined. What the library says is faked at the file's reading."""
    pytest.importorskip("_ssl")
    (tmp_path / "ssl" / "certs").mkdir(parents=True)
    (tmp_path / "lib").mkdir()
    (tmp_path / "out").mkdir()
    named = [(str(tmp_path / "ssl"), "configuration"), (str(tmp_path / "lib"), "providers")]
    monkeypatch.setattr(openssl_dirs, "_named", lambda data: named)
    target = tmp_path / grant
    policy: Any = SimpleNamespace(allow_write=[str(target)])
    with pytest.raises(PolicyError) as refused:
        trusted.refuse_trusted_writes(policy, trusted.installation(), [])
    assert expected.format(tmp_path) in str(refused.value)
    unrelated: Any = SimpleNamespace(allow_write=[str(tmp_path / "out")])
    trusted.refuse_trusted_writes(unrelated, trusted.installation(), [])
