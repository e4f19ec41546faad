"""HTTPS under a network grant: the CA store becomes readable, and only then.

A test CA and a certificate for localhost signed by it (made with the openssl
command), a TLS server on loopback, and programs in the sandbox that verify it.
"""

from __future__ import annotations

import contextlib
import errno
import http.server
import json
import os
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import pynox, python
from support.loopback_http import serving
from support.pool_client import PoolClient, clean_env
from support.tls import https_server, make_certificates

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with ca.pem (the test CA) and server.pem/server.key (localhost)."""
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(certificates: Path) -> Iterator[str]:
    """The URL of a TLS server on loopback that presents the localhost certificate."""
    with https_server(certificates) as url:
        yield url


def _fetch(url: str) -> str:
    return f"import urllib.request; print(urllib.request.urlopen({url!r}, timeout=10).read())"


def test_urllib_verifies_with_the_ca_file_ssl_cert_file_names(
    certificates: Path, server: str
) -> None:
    env = {"SSL_CERT_FILE": str(certificates / "ca.pem")}
    done = pynox("--allow-network", "--allow-env=SSL_CERT_FILE", "-c", _fetch(server), env=env)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"b'hello over tls'\n"


def _ca_hint(name: str, grant: str) -> str:
    return (
        f"the environment variable {name} is set where pynox runs but not passed to the "
        f"program, which verified the certificate without the CAs it names; grant it with "
        f"{grant}"
    )


def test_without_the_test_ca_the_certificate_fails_to_verify(
    certificates: Path, server: str
) -> None:
    """The variable set where pynox runs, not passed: the hint names it, on the line and
    in --json (and following it works: test_urllib_verifies_with_the_ca_file_...)."""
    env = {"SSL_CERT_FILE": str(certificates / "ca.pem")}
    done = pynox("--allow-network", "-c", _fetch(server), env=env)  # the variable not passed
    assert done.returncode == 1
    assert b"CERTIFICATE_VERIFY_FAILED" in done.stderr
    hint = _ca_hint("SSL_CERT_FILE", "--allow-env=SSL_CERT_FILE")
    assert done.stderr.decode().endswith(f"\npynox: {hint}\n"), done.stderr.decode()
    result = json.loads(pynox("--json", "--allow-network", "-c", _fetch(server), env=env).stdout)
    assert result["error"]["hint"] == hint


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "SSL_CERT_DIR"])
def test_a_relative_ca_variable_names_what_openssl_opens_where_the_program_runs(
    certificates: Path, server: str, tmp_path: Path, variable: str
) -> None:
    """OpenSSL opens a relative SSL_CERT_FILE or SSL_CERT_DIR in the program's working
    directory, a pool request's cwd, wherever the pool runs; and there the kernel takes a
    ".." after a link from where the link leads. pynox took it lexically, from beside the
    link: it granted (or, not passed, named in its hint) a path that OpenSSL never opens,
    and the certificate that python verifies failed to verify."""
    program, elsewhere = tmp_path / "program", tmp_path / "elsewhere"
    (elsewhere / "inner").mkdir(parents=True)
    (elsewhere / "cas").mkdir()
    shutil.copy(certificates / "ca.pem", elsewhere / "cas")
    subprocess.run(["openssl", "rehash", str(elsewhere / "cas")], check=True, capture_output=True)
    program.mkdir()
    (program / "store").symlink_to(elsewhere / "inner")
    # store/.. is elsewhere for the kernel; read as words, it would be program.
    value = "store/../cas" + ("/ca.pem" if variable == "SSL_CERT_FILE" else "")
    env = clean_env({variable: value})
    assert python("-I", "-c", _fetch(server), cwd=program, env=env).returncode == 0
    request = {"code": _fetch(server), "allow_network": True, "cwd": str(program)}
    with PoolClient(workers=1, env=env, cwd=tmp_path) as pool:
        refused = pool.run({"id": 1, **request})
        assert refused["exit"] == 1, refused
        assert refused["error"]["hint"] == _ca_hint(variable, f'"allow_env": ["{variable}"]')
        followed = pool.run({"id": 2, **request, "allow_env": [variable]})
    assert followed["exit"] == 0, followed
    assert followed["stdout"] == "b'hello over tls'\n"
    cas = elsewhere.resolve() / "cas"
    assert (
        str(cas / "ca.pem" if variable == "SSL_CERT_FILE" else cas)
        in (followed["policy"]["implicit_read"])
    )


def test_a_ca_directory_not_passed_gets_its_hint_and_following_it_works(
    certificates: Path, server: str, tmp_path: Path
) -> None:
    hashed = tmp_path / "hashed"
    hashed.mkdir()
    shutil.copy(certificates / "ca.pem", hashed)
    subprocess.run(["openssl", "rehash", str(hashed)], check=True, capture_output=True)
    env = {"SSL_CERT_DIR": str(hashed)}
    refused = pynox("--allow-network", "-c", _fetch(server), env=env)
    hint = _ca_hint("SSL_CERT_DIR", "--allow-env=SSL_CERT_DIR")
    assert refused.stderr.decode().endswith(f"\npynox: {hint}\n"), refused.stderr.decode()
    followed = pynox("--allow-network", "--allow-env=SSL_CERT_DIR", "-c", _fetch(server), env=env)
    assert followed.returncode == 0, followed.stderr.decode()


def test_a_ca_file_the_run_can_read_is_named_too(certificates: Path, server: str) -> None:
    """A CA file beside the script, readable by the implicit grant of its directory: the
    program verifies with OpenSSL's default store all the same until it is passed."""
    script = certificates / "fetch.py"
    script.write_text(_fetch(server) + "\n")
    env = {"SSL_CERT_FILE": str(certificates / "ca.pem")}
    refused = pynox("--allow-network", str(script), env=env)
    hint = _ca_hint("SSL_CERT_FILE", "--allow-env=SSL_CERT_FILE")
    assert refused.stderr.decode().endswith(f"\npynox: {hint}\n"), refused.stderr.decode()
    followed = pynox("--allow-network", "--allow-env=SSL_CERT_FILE", str(script), env=env)
    assert followed.returncode == 0, followed.stderr.decode()


def test_a_ca_variable_naming_the_default_store_gets_no_hint(server: str) -> None:
    """What every run granted the network reads already: passing it would bring no CA."""
    default = ssl.get_default_verify_paths().openssl_cafile
    if not os.path.isfile(default):
        pytest.skip(f"OpenSSL's default CA file {default} does not exist here")
    done = pynox("--allow-network", "-c", _fetch(server), env={"SSL_CERT_FILE": default})
    _assert_no_hint(done, "CERTIFICATE_VERIFY_FAILED")


def test_the_pool_names_the_ca_variable_the_request_did_not_pass(
    certificates: Path, server: str
) -> None:
    env = clean_env({"SSL_CERT_FILE": str(certificates / "ca.pem")})
    with PoolClient(workers=1, env=env) as pool:
        refused = pool.run({"id": 1, "code": _fetch(server), "allow_network": True})
        assert refused["exit"] == 1, refused
        assert refused["error"]["hint"] == _ca_hint(
            "SSL_CERT_FILE", '"allow_env": ["SSL_CERT_FILE"]'
        )
        followed = pool.run(
            {"id": 2, "code": _fetch(server), "allow_network": True, "allow_env": ["SSL_CERT_FILE"]}
        )
        assert followed["exit"] == 0, followed


def test_a_pool_whose_limits_refuse_the_ca_variable_names_no_grant(
    certificates: Path, server: str, tmp_path: Path
) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\nallow_network = true\nallow_env = ["LANG"]\n')
    env = clean_env({"SSL_CERT_FILE": str(certificates / "ca.pem")})
    with PoolClient(workers=1, env=env, config=config) as pool:
        refused = pool.run({"id": 1, "code": _fetch(server), "allow_network": True})
        hint = _ca_hint("SSL_CERT_FILE", "")
        assert refused["error"]["hint"] == (
            hint.removesuffix("; grant it with ") + "; [pool.limits] lets no request grant it"
        )


def test_the_default_context_has_the_system_cas() -> None:
    stats = "import ssl; print(ssl.create_default_context().cert_store_stats())"
    outside = python("-I", "-c", stats)  # the commands' environment sets no SSL_CERT_*
    assert outside.returncode == 0, outside.stderr.decode()
    if "'x509_ca': 0" in outside.stdout.decode():
        pytest.skip("this machine has no CA bundle where OpenSSL looks by default")
    inside = pynox("--allow-network", "-c", stats)
    assert inside.returncode == 0, inside.stderr.decode()
    assert inside.stdout == outside.stdout


def test_the_json_policy_lists_the_ca_reads(certificates: Path) -> None:
    ca = certificates / "ca.pem"
    done = pynox("--allow-network", "--allow-env=SSL_CERT_FILE", "--json", "-c", "pass",
                 env={"SSL_CERT_FILE": str(ca)})  # fmt: skip
    implicit = json.loads(done.stdout)["policy"]["implicit_read"]
    assert str(ca.resolve()) in implicit
    default_dir = ssl.get_default_verify_paths().openssl_capath
    if os.path.isdir(default_dir):
        assert os.path.realpath(default_dir) in implicit
    plain = pynox(
        "--allow-env=SSL_CERT_FILE", "--json", "-c", "pass", env={"SSL_CERT_FILE": str(ca)}
    )
    assert json.loads(plain.stdout)["policy"]["implicit_read"] == []


def test_requests_verifies_with_requests_ca_bundle(certificates: Path, server: str) -> None:
    packages = os.environ.get("PYNOX_TEST_PACKAGES")
    if not packages:
        pytest.skip("PYNOX_TEST_PACKAGES is unset: no directory with requests installed")
    if not os.path.isdir(os.path.join(packages, "requests")):
        pytest.skip(f"requests is not installed in PYNOX_TEST_PACKAGES ({packages})")
    code = f"import requests; print(requests.get({server!r}, timeout=10).text)"
    env = {"REQUESTS_CA_BUNDLE": str(certificates / "ca.pem")}
    done = pynox("--allow-network", f"--package-dir={packages}",
                 "--allow-env=REQUESTS_CA_BUNDLE", "-c", code, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout == b"hello over tls\n"
    # Not passed: requests reads its own variable, not OpenSSL's, and the hint names it.
    refused = pynox("--allow-network", f"--package-dir={packages}", "-c", code,
                    env={**env, "SSL_CERT_FILE": str(certificates / "ca.pem")})  # fmt: skip
    hint = _ca_hint("REQUESTS_CA_BUNDLE", "--allow-env=REQUESTS_CA_BUNDLE")
    assert refused.stderr.decode().endswith(f"\npynox: {hint}\n"), refused.stderr.decode()


@contextlib.contextmanager
def _plain_http_server() -> Iterator[int]:
    """The port of a server on loopback that answers in plain HTTP, not TLS."""
    with serving(http.server.BaseHTTPRequestHandler) as httpd:
        yield httpd.server_address[1]


_TLS_TO_PLAIN = """\
import socket, ssl, sys
raw = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
ssl.create_default_context().wrap_socket(raw, server_hostname="localhost")
"""


def _assert_no_hint(done: subprocess.CompletedProcess[bytes], error: str) -> None:
    """A TLS failure is no denial: python's traceback alone, with no pynox line."""
    assert done.returncode == 1, done.stderr.decode()
    err = done.stderr.decode()
    assert error in err and "pynox" not in err, err


def test_a_tls_failure_with_the_network_granted_gets_no_hint(
    certificates: Path, server: str
) -> None:
    """A certificate that does not verify, or a peer that does not speak TLS, raises an
    SSLError whose errno (1) is OpenSSL's: the network is granted, and no grant helps."""
    fetch = ("--allow-network", "-c", _fetch(server))  # the test CA not passed in
    _assert_no_hint(pynox(*fetch), "CERTIFICATE_VERIFY_FAILED")
    result = json.loads(pynox("--json", *fetch).stdout)
    assert result["policy"]["network"] == "allow"
    assert result["error"]["type"] == "urllib.error.URLError"
    assert result["error"]["hint"] is None
    with _plain_http_server() as port:
        done = pynox("--allow-network", "-c", _TLS_TO_PLAIN, str(port))
        _assert_no_hint(done, "ssl.SSLError")
        with PoolClient(workers=1, env=clean_env()) as pool:
            code = _TLS_TO_PLAIN.replace("int(sys.argv[1])", str(port))
            ran = pool.run({"id": 1, "code": code, "allow_network": True})
    assert ran["exit"] == 1 and ran["error"]["type"] == "ssl.SSLError", ran
    assert ran["error"]["hint"] is None and "pynox" not in ran["stderr"]


def test_requests_with_a_certificate_that_does_not_verify_gets_no_hint(server: str) -> None:
    packages = os.environ.get("PYNOX_TEST_PACKAGES")
    if not packages or not os.path.isdir(os.path.join(packages, "requests")):
        pytest.skip("PYNOX_TEST_PACKAGES is unset or has no requests installed")
    code = f"import requests; requests.get({server!r}, timeout=10)"
    done = pynox("--allow-network", f"--package-dir={packages}", "-c", code)
    _assert_no_hint(done, "requests.exceptions.SSLError")


@pytest.mark.unit
def test_a_denial_on_a_socket_never_names_the_network_when_it_is_granted() -> None:
    from pynox.engine.hints import classify
    from pynox.policy.resolve import Policy

    refused = PermissionError(errno.EPERM, "Operation not permitted")
    event = ("socket.connect", (None, ("127.0.0.1", 443)))
    policy = Policy()
    assert classify(refused, event, policy)[0] == "network"
    policy.allow_network = True
    assert classify(refused, event, policy) == (None, None, None)


_OPENS = """\
import os, ssl
paths = ssl.get_default_verify_paths()
for path in (os.environ["SSL_CERT_FILE"], paths.openssl_cafile, paths.openssl_capath):
    if os.path.exists(path):
        try:
            (os.listdir if os.path.isdir(path) else open)(path)
        except PermissionError:
            print("denied", path)
        else:
            print("read", path)
print(ssl.create_default_context().cert_store_stats()["x509_ca"] > 0)
"""


def test_without_the_network_the_ca_store_stays_closed(certificates: Path) -> None:
    env = {"SSL_CERT_FILE": str(certificates / "ca.pem")}
    closed = pynox("--allow-env=SSL_CERT_FILE", "-c", _OPENS, env=env)
    assert closed.returncode == 0, closed.stderr.decode()
    lines = closed.stdout.decode().splitlines()
    assert lines[0] == f"denied {certificates / 'ca.pem'}"
    assert all(line.startswith("denied ") for line in lines[:-1]) and lines[-1] == "False"
    # The same program with the network reads all of it.
    opened = pynox("--allow-network", "--allow-env=SSL_CERT_FILE", "-c", _OPENS, env=env)
    assert opened.returncode == 0, opened.stderr.decode()
    assert all(line.startswith("read ") for line in opened.stdout.decode().splitlines()[:-1])


def test_a_ca_variable_through_a_proc_magic_link_is_refused(
    certificates: Path, server: str
) -> None:
    ca = certificates / "ca.pem"
    env = {"SSL_CERT_FILE": f"/proc/self/root{ca}"}
    args = ("--allow-network", "--allow-env=SSL_CERT_FILE", "-c", _fetch(server))
    refused = pynox(*args, env=env)
    assert refused.returncode == 125
    message = refused.stderr.decode()
    assert message.startswith("pynox: SSL_CERT_FILE names /proc/self/root/") and (
        message.count("\n") == 1
    )
    assert "set SSL_CERT_FILE to the real path" in message
    assert pynox(*args, env={"SSL_CERT_FILE": str(ca)}).returncode == 0  # the hint works


def test_a_ca_variable_naming_nothing_adds_nothing(certificates: Path) -> None:
    env = {"SSL_CERT_FILE": str(certificates / "missing.pem")}
    done = pynox("--allow-network", "--allow-env=SSL_CERT_FILE", "--json", "-c", "pass", env=env)
    assert done.returncode == 0, done.stderr.decode()
    implicit = json.loads(done.stdout)["policy"]["implicit_read"]
    assert not any(path.startswith(str(certificates)) for path in implicit)


def test_no_write_grant_reaches_the_ca_store() -> None:
    capath = ssl.get_default_verify_paths().openssl_capath
    if not os.path.isdir(capath):
        pytest.skip(f"OpenSSL's CA directory {capath} does not exist here")
    done = pynox(f"--allow-write={capath}", "-c", "pass")
    assert done.returncode == 125
    assert b"the CA store, which runs granted the network read" in done.stderr


def test_pool_requests_and_sessions_verify_with_the_granted_ca(
    certificates: Path, server: str
) -> None:
    env = clean_env({"SSL_CERT_FILE": str(certificates / "ca.pem")})
    request = {"code": _fetch(server), "allow_network": True, "allow_env": ["SSL_CERT_FILE"]}
    with PoolClient(workers=1, env=env) as pool:
        one = pool.run({"id": 1, **request})
        assert one["exit"] == 0, one
        assert one["stdout"] == "b'hello over tls'\n"
        assert str((certificates / "ca.pem").resolve()) in one["policy"]["implicit_read"]
        step = pool.run({"id": 2, "session": "s", **request})
        assert step["exit"] == 0, step
        assert step["stdout"] == "b'hello over tls'\n"
        closed = pool.run({"id": 3, "code": _fetch(server), "allow_env": ["SSL_CERT_FILE"]})
        assert closed["exit"] == 1 and closed["policy"]["implicit_read"] == []


@pytest.mark.unit
def test_a_ca_directory_grants_the_directories_its_links_lead_to_files_in(tmp_path: Path) -> None:
    """Each directory a link leads to is granted when a link leads to a file there, however
    many links lead there and in whatever order: a link to a directory grants nothing."""
    from pynox.policy import ca_store

    store, files, elsewhere = tmp_path / "certs", tmp_path / "files", tmp_path / "elsewhere"
    for directory in (store, files, elsewhere / "sub"):
        directory.mkdir(parents=True)
    for name in ("a.crt", "b.crt"):
        (files / name).write_text("pem")
    (elsewhere / "c.crt").write_text("pem")
    (store / "0-dir.pem").symlink_to(elsewhere / "sub")  # a directory: grants nothing
    (store / "a.pem").symlink_to(files / "a.crt")
    (store / "b.pem").symlink_to(files / "b.crt")
    (store / "c.pem").symlink_to(elsewhere / "c.crt")  # a file beside it: grants elsewhere
    (store / "1234abcd.0").symlink_to("a.pem")  # a hash link beside its file
    (store / "gone.pem").symlink_to(tmp_path / "missing" / "x.crt")
    found = ca_store._dirs_leading_out(str(store))
    assert sorted(found) == sorted([str(files), str(elsewhere)])


_HOSTILE = """\
import ssl
class Refused(Exception):
    @property
    def {}(self):
        raise RuntimeError("read me not")
try:
    raise ssl.SSLCertVerificationError(1, "certificate verify failed")
except ssl.SSLError:
    raise Refused("made up")
"""


@pytest.mark.parametrize("attribute", ["reason", "__cause__"])
def test_a_hostile_exception_keeps_its_report_when_a_ca_variable_is_set(
    certificates: Path, attribute: str
) -> None:
    """An attribute of the program's exception that raises when read: the error is
    reported all the same, with the hint when pynox could tell it without that attribute."""
    env = {"SSL_CERT_FILE": str(certificates / "ca.pem")}
    done = pynox("--json", "--allow-network", "-c", _HOSTILE.format(attribute), env=env)
    error = json.loads(done.stdout)["error"]
    assert error is not None, done.stdout
    assert error["type"] == "Refused" and error["message"] == "made up", error
    if attribute == "reason":
        assert error["hint"] == _ca_hint("SSL_CERT_FILE", "--allow-env=SSL_CERT_FILE")
