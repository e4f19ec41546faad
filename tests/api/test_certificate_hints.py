"""A CA file the code names itself: OpenSSL's refusal names no file, the hint does."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from support.tls import make_certificates

from pynox.api.pool import Pool


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("openssl") is None:
        pytest.fail("this test needs the openssl command to make its test CA")
    return os.path.realpath(make_certificates(tmp_path_factory.mktemp("tls")) / "ca.pem")


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    with Pool(workers=1) as pool:
        yield pool


@pytest.mark.parametrize(
    "code",
    [
        "import ssl\nssl.create_default_context(cafile={path!r})",
        "import ssl\nssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations({path!r})",
        "import ssl\nctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\nCA = {path!r}\n"
        "ctx.load_verify_locations(cafile=CA)",
    ],
)
def test_a_ca_file_refused_names_the_file(pool: Pool, ca: str, code: str) -> None:
    failed = pool.run(code.format(path=ca))
    assert failed.error is not None and failed.error["type"] == "PermissionError"
    assert failed.error["hint"] == f"reading {ca} is not allowed; grant it with allow_read=[{ca!r}]"
    followed = pool.run(code.format(path=ca), allow_read=[ca])
    assert followed.ok, followed.text
