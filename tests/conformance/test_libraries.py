"""The standard library's C-backed modules work from the bundle's own libraries.

In the minimal cell the root's libssl, libsqlite3, libffi, readline (and more) are made
unloadable (PYNOX_ABSENT_LIBS lists them): these modules then load only because the
bundle carries what they link. PYNOX_TLS_DIR holds a throwaway certificate for the
loopback HTTPS check, made outside the root.
"""

from __future__ import annotations

import os
import textwrap

import pytest

from .support import Install

IMPORTS = textwrap.dedent(
    """
    import bz2, ctypes, decimal, hashlib, lzma, sqlite3, ssl, uuid, zlib
    assert hashlib.sha3_256(b"x").hexdigest() and hashlib.blake2b(b"x").hexdigest()
    assert sqlite3.connect(":memory:").execute("select 41 + 1").fetchone() == (42,)
    assert ctypes.sizeof(ctypes.c_void_p) == 8
    assert zlib.decompress(zlib.compress(b"z")) == b"z"
    assert lzma.decompress(lzma.compress(b"l")) == b"l"
    assert bz2.decompress(bz2.compress(b"b")) == b"b"
    assert str(decimal.Decimal(1) / 8) == "0.125"
    assert uuid.uuid4().version == 4
    print(ssl.OPENSSL_VERSION)
    """
)

HTTPS = textwrap.dedent(
    """
    import http.server, ssl, sys, threading, urllib.request
    folder = sys.argv[1]

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello over tls")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Hello)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(folder + "/cert.pem", folder + "/key.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.handle_request, daemon=True).start()
    client = ssl.create_default_context(cafile=folder + "/cert.pem")
    url = "https://127.0.0.1:%d/" % server.server_address[1]  # the root may lack /etc/hosts
    print(urllib.request.urlopen(url, context=client, timeout=30).read().decode())
    """
)


def test_c_backed_modules_import(install: Install) -> None:
    done = install.run_python("-I", "-c", IMPORTS)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("OpenSSL "), done.stdout


def test_readline_imports_or_is_not_built(install: Install) -> None:
    done = install.run_python(
        "-I", "-c", "import importlib.util as u; print(u.find_spec('readline') is not None)"
    )
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "False":
        pytest.skip("this runtime has no readline module")
    loaded = install.run_python("-I", "-c", "import readline; print(readline.__doc__ is not None)")
    assert (loaded.returncode, loaded.stdout.strip()) == (0, "True"), loaded.stderr


def test_https_on_loopback(install: Install) -> None:
    folder = os.environ.get("PYNOX_TLS_DIR")
    if not folder:
        pytest.skip("PYNOX_TLS_DIR is not set: no test certificate was made")
    done = install.run_python("-I", "-c", HTTPS, folder)
    assert (done.returncode, done.stdout) == (0, "hello over tls\n"), done.stderr


def test_the_roots_own_libraries_are_unloadable(install: Install) -> None:
    """The minimal cell is what it claims: the root's copies do not load."""
    hidden = [p for p in os.environ.get("PYNOX_ABSENT_LIBS", "").split(":") if p]
    if not hidden:
        pytest.skip("this cell leaves the root's libraries in place")
    script = textwrap.dedent(
        """
        import ctypes, sys
        for path in sys.argv[1:]:
            try:
                ctypes.CDLL(path)
            except OSError:
                continue
            print("loaded", path)
        """
    )
    done = install.run_python("-I", "-c", script, *hidden)
    assert (done.returncode, done.stdout) == (0, ""), done.stderr
