"""Proxy variables under a network grant: not passed unless allow_env names them, and
a client that then connected directly, where python would have gone through the proxy,
gets a hint naming the variable. A proxy on loopback answers for a host that resolves
nowhere (.invalid is reserved), so only a request that goes through it succeeds."""

from __future__ import annotations

import http.server
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.commands import pynox, python
from support.hints import follow, hint_line
from support.loopback_http import serving
from support.pool_client import PoolClient, clean_env

URL = "http://pynox-test.invalid/page"
FETCH = {
    "urllib": f"import urllib.request; print(urllib.request.urlopen({URL!r}, timeout=10).read())",
    "requests": f"import requests; print(repr(requests.get({URL!r}, timeout=10).content))",
    "httpx": f"import httpx; print(repr(httpx.get({URL!r}, timeout=10).content))",
}
ANSWER = b"b'through the proxy: " + URL.encode() + b"'\n"


def _proxy_hint(name: str, grant: str) -> str:
    return (
        f"pynox: the environment variable {name} is set where pynox runs but not passed to "
        f"the program, which connected directly instead of through the proxy it names; "
        f"grant it with {grant}"
    )


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward proxy's answer: what it was asked for, without going anywhere."""

    def do_GET(self) -> None:  # noqa: N802 - the name http.server calls
        body = b"through the proxy: " + self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture(scope="module")
def proxy() -> Iterator[str]:
    with serving(_Proxy) as httpd:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"


def _package_flags(client: str) -> list[str]:
    if client == "urllib":
        return []
    packages = os.environ.get("PYNOX_TEST_PACKAGES")
    if not packages or not os.path.isdir(os.path.join(packages, client)):
        pytest.skip(f"PYNOX_TEST_PACKAGES has no {client} installed")
    return [f"--package-dir={packages}"]


@pytest.mark.parametrize("client", ["httpx", "requests"])
def test_all_proxy_not_passed_gets_its_hint_from_clients_that_read_it(
    proxy: str, client: str, tmp_path: Path
) -> None:
    """requests and httpx go through ALL_PROXY for a request of any scheme (urllib does
    not: see below)."""
    flags = ["--allow-network", *_package_flags(client)]
    env = {"ALL_PROXY": proxy}
    done, hints = follow(
        lambda grants: pynox(*grants, "-c", FETCH[client], cwd=tmp_path, env=env), flags
    )
    assert done.stdout == ANSWER
    assert hints == [_proxy_hint("ALL_PROXY", "--allow-env=ALL_PROXY")]


@pytest.mark.parametrize("client", sorted(FETCH))
def test_a_proxy_not_passed_gets_its_hint_and_following_it_works(
    proxy: str, client: str, tmp_path: Path
) -> None:
    flags = ["--allow-network", *_package_flags(client)]
    env = {"HTTP_PROXY": proxy}
    if client == "urllib":
        assert python("-I", "-c", FETCH[client], env=env).stdout == ANSWER
    done, hints = follow(
        lambda grants: pynox(*grants, "-c", FETCH[client], cwd=tmp_path, env=env), flags
    )
    assert done.stdout == ANSWER
    assert hints == [_proxy_hint("HTTP_PROXY", "--allow-env=HTTP_PROXY")]


def test_the_pool_names_the_proxy_variable_the_request_did_not_pass(proxy: str) -> None:
    request = {"code": FETCH["urllib"], "allow_network": True}
    with PoolClient(workers=1, env=clean_env({"https_proxy": proxy, "http_proxy": proxy})) as pool:
        refused = pool.run({"id": 1, **request})
        assert refused["exit"] == 1, refused
        # http_proxy, the one python takes for an http:// URL; https_proxy would leave
        # it direct.
        assert "pynox: " + refused["error"]["hint"] == _proxy_hint(
            "http_proxy", '"allow_env": ["http_proxy"]'
        )
        followed = pool.run({"id": 2, **request, "allow_env": ["http_proxy"]})
    assert followed["exit"] == 0, followed
    assert followed["stdout"].encode() == ANSWER


def test_a_pool_whose_limits_refuse_the_proxy_variable_names_no_grant(
    proxy: str, tmp_path: Path
) -> None:
    config = tmp_path / "pynox.toml"
    config.write_text('[pool.limits]\nallow_network = true\nallow_env = ["LANG"]\n')
    with PoolClient(workers=1, env=clean_env({"HTTP_PROXY": proxy}), config=config) as pool:
        refused = pool.run({"id": 1, "code": FETCH["urllib"], "allow_network": True})
    hint = _proxy_hint("HTTP_PROXY", "")
    assert "pynox: " + refused["error"]["hint"] == (
        hint.removesuffix("; grant it with ") + "; [pool.limits] lets no request grant it"
    )


@pytest.mark.parametrize(
    "code",
    [
        # The program's own socket reads no proxy variable: python fails alike.
        "import socket; socket.create_connection(('pynox-test.invalid', 80), timeout=10)",
        # Refused on loopback: the host was reached, no proxy was missing.
        "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9/', timeout=10)",
    ],
    ids=["own-socket", "refused"],
)
def test_no_proxy_hint_for_a_failure_a_proxy_would_not_change(
    proxy: str, code: str, tmp_path: Path
) -> None:
    done = pynox("--allow-network", "-c", code, cwd=tmp_path, env={"HTTP_PROXY": proxy})
    assert done.returncode == 1
    assert "pynox:" not in done.stderr.decode(), done.stderr.decode()


@pytest.mark.parametrize("client", sorted(FETCH))
def test_no_proxy_hint_names_the_variable_of_another_scheme(
    proxy: str, client: str, tmp_path: Path
) -> None:
    """An https:// URL goes through https_proxy alone: under python, http_proxy leaves it
    direct, so a hint naming http_proxy would be followed in vain."""
    code = FETCH[client].replace("http://", "https://")
    flags = ["--allow-network", *_package_flags(client)]
    done = pynox(*flags, "-c", code, cwd=tmp_path, env={"http_proxy": proxy})
    assert done.returncode == 1
    assert "pynox:" not in done.stderr.decode(), done.stderr.decode()


@pytest.mark.parametrize("client", sorted(FETCH))
def test_a_variable_of_another_scheme_passed_leaves_the_hint_for_this_one(
    proxy: str, client: str, tmp_path: Path
) -> None:
    """Passing https_proxy does nothing for an http:// URL, which goes through http_proxy
    alone: the hint named nothing once any proxy variable was passed, and now names the
    scheme's own, which works once passed too."""
    flags = ["--allow-network", *_package_flags(client), "--allow-env=https_proxy"]
    env = {"https_proxy": proxy, "http_proxy": proxy}
    done, hints = follow(
        lambda grants: pynox(*grants, "-c", FETCH[client], cwd=tmp_path, env=env), flags
    )
    assert done.stdout == ANSWER
    assert hints == [_proxy_hint("http_proxy", "--allow-env=http_proxy")]


@pytest.mark.parametrize("client", sorted(FETCH))
@pytest.mark.parametrize(
    "no_proxy",
    [
        {"NO_PROXY": "pynox-test.invalid"},
        {"no_proxy": ".invalid"},
        {"NO_PROXY": "localhost, pynox-test.invalid"},
        {"NO_PROXY": "*"},
    ],
    ids=["host", "domain", "list", "star"],
)
def test_no_proxy_hint_for_a_host_no_proxy_sends_directly(
    proxy: str, client: str, no_proxy: dict[str, str], tmp_path: Path
) -> None:
    """NO_PROXY where pynox runs sends a request for its hosts directly under python too
    (by the client's own rule, whichever it is): passing the proxy variable would not send
    it through the proxy, so no hint names it."""
    flags = ["--allow-network", *_package_flags(client)]
    env = {"HTTP_PROXY": proxy, **no_proxy}
    done = pynox(*flags, "-c", FETCH[client], cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "pynox:" not in done.stderr.decode(), done.stderr.decode()
    # A NO_PROXY for other hosts changes nothing: the hint is there, and works.
    env = {"HTTP_PROXY": proxy, "NO_PROXY": "localhost,127.0.0.1,example.invalid"}
    done, hints = follow(
        lambda grants: pynox(*grants, "-c", FETCH[client], cwd=tmp_path, env=env), flags
    )
    assert done.stdout == ANSWER
    assert hints == [_proxy_hint("HTTP_PROXY", "--allow-env=HTTP_PROXY")]


def test_no_proxy_hint_for_a_variable_an_empty_lowercase_one_overrides(
    proxy: str, tmp_path: Path
) -> None:
    """An empty http_proxy names no proxy, and hides HTTP_PROXY from urllib (and from
    requests and httpx, which read the variables through it): python connects directly."""
    env = {"http_proxy": "", "HTTP_PROXY": proxy}
    assert python("-I", "-c", FETCH["urllib"], env=env).returncode == 1
    done = pynox("--allow-network", "-c", FETCH["urllib"], cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "pynox:" not in done.stderr.decode(), done.stderr.decode()


def test_no_all_proxy_hint_for_urllib_which_does_not_read_it(proxy: str, tmp_path: Path) -> None:
    """urllib goes through ALL_PROXY for no scheme: python connects directly too."""
    env = {"ALL_PROXY": proxy}
    assert python("-I", "-c", FETCH["urllib"], env=env).returncode == 1
    done = pynox("--allow-network", "-c", FETCH["urllib"], cwd=tmp_path, env=env)
    assert done.returncode == 1
    assert "pynox:" not in done.stderr.decode(), done.stderr.decode()


def test_no_proxy_hint_without_the_network(proxy: str, tmp_path: Path) -> None:
    """Without the network, the network is what to grant."""
    done = pynox("-c", FETCH["urllib"], cwd=tmp_path, env={"HTTP_PROXY": proxy})
    assert hint_line(done.stderr) == "pynox: the network is off; grant it with --allow-network"


# A client error of httpx's module name whose request's URL raises as it is read.
_URL_THAT_RAISES = """
class URL:
    def __str__(self):
        raise KeyboardInterrupt
class Request:
    url = URL()
class ConnectError(Exception):
    pass
ConnectError.__module__ = "httpx"
error = ConnectError("[Errno 111] Connection refused")
error.request = Request()
raise error
"""


def test_a_request_url_that_raises_as_it_is_read_ends_as_under_python(
    proxy: str, tmp_path: Path
) -> None:
    """The proxy hint reads the failed request's URL, which is the program's object: one
    whose str() raised KeyboardInterrupt ended the run with exit status 130 and a
    traceback of pynox's own frames, where python ends with 1 and the program's."""
    env = {"http_proxy": proxy}
    expected = python("-I", "-c", _URL_THAT_RAISES, env=env)
    done = pynox("--allow-network", "-c", _URL_THAT_RAISES, cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (1, b"", expected.stderr)
