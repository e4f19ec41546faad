"""A test certificate authority and a TLS server on loopback that presents a certificate
for localhost signed by it (made with the openssl command)."""

from __future__ import annotations

import contextlib
import http.server
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

from support.loopback_http import serving

BODY = b"hello over tls"

_LEAF_EXTENSIONS = """\
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
"""


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_certificates(folder: Path) -> Path:
    """ca.pem (the test CA) and server.pem/server.key (localhost) in folder."""
    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=pynox test CA",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=folder)  # fmt: skip
    _openssl("req", "-new", *key, "-keyout", "server.key", "-out", "server.csr",
             "-subj", "/CN=localhost", cwd=folder)  # fmt: skip
    (folder / "leaf.ext").write_text(_LEAF_EXTENSIONS)
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-days", "2", "-extfile", "leaf.ext", "-out", "server.pem",
             cwd=folder)  # fmt: skip
    return folder


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextlib.contextmanager
def https_server(certificates: Path) -> Iterator[str]:
    """The URL of a TLS server on loopback that answers BODY to every GET."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    with serving(_Hello, tls=context) as httpd:
        yield f"https://localhost:{httpd.server_address[1]}/"
