"""Downloading one file over HTTP(S) or file://, with retries and resume.

The bytes go to a `.part` file that a retry continues with an HTTP Range
request; nothing here trusts the content: the caller verifies the sha256 of the
finished file before it is renamed into place or unpacked. A `.part` that cannot
be written (a full or read-only disk) is CannotWrite, not a failed download.
"""

from __future__ import annotations

import http.client
import io
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, cast
from urllib.parse import unquote, urlsplit, urlunsplit

from bundler.progress import Progress
from bundler.stall import Stall

USER_AGENT = "pynox-bundler"
ATTEMPTS = 4
TIMEOUT = 30.0
# Far above any runtime archive (tens of MB): a server that sends more, or an endless
# body, is refused before it fills the disk.
LIMIT = 1024 * 1024 * 1024


def printable(text: str, limit: int = 200) -> str:
    """What a server said, safe to put in a one-line message: its line breaks and control
    characters (a terminal's escape sequences) would break or forge the line."""
    text = " ".join(text.split())
    text = "".join(c if c.isprintable() else "?" for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def describe(exc: BaseException) -> str:
    """Why a request failed, in a few words on one line."""
    if isinstance(exc, http.client.BadStatusLine):
        return printable(f"its answer is not HTTP: {exc}")
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        if not isinstance(exc.reason, OSError):
            return printable(str(exc.reason))
        exc = exc.reason
    if isinstance(exc, OSError) and exc.strerror:
        return printable(exc.strerror)  # without "[Errno N]" and the path the message names
    return printable(str(exc) or type(exc).__name__)


def through_proxy(url: str) -> str:
    """ " through the proxy ... (HTTPS_PROXY)" when urllib would reach url through a proxy
    of the environment (one NO_PROXY does not exempt), else "": a proxy that does not
    answer fails the download with what it said, which reads as the server's fault."""
    parts = urlsplit(url)
    proxy = (
        urllib.request.getproxies().get(parts.scheme) if parts.scheme in ("http", "https") else None
    )
    if not proxy or urllib.request.proxy_bypass(parts.netloc.rpartition("@")[2]):
        return ""
    shown = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    address = shown.hostname or proxy
    if shown.port:
        address += f":{shown.port}"
    # Without the user and password a proxy URL may carry.
    return f" through the proxy {shown.scheme}://{address} ({parts.scheme.upper()}_PROXY)"


class DownloadFailed(Exception):
    """The file could not be had; `reason` says why in a few words, on one line."""

    def __init__(self, url: str, reason: str) -> None:
        reason = printable(reason)
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class CannotWrite(Exception):
    """The part file cannot be written: no attempt will do better, and the server is not
    to blame. `error` is the OSError, `part` the file."""

    def __init__(self, part: Path, error: OSError) -> None:
        super().__init__(f"{part}: {error}")
        self.part = part
        self.error = error


class _Retry(Exception):
    """A failure worth another attempt (connection lost, server busy, short body)."""


class _TooLarge(Exception):
    """The server sends more than the limit: no attempt will do better."""


class _Stalled(Exception):
    """The server all but stopped sending (see bundler.stall); not retried."""


def shown(url: str) -> str:
    """url as messages and records show it: without the password a mirror URL may carry
    (https://user:password@host/...), which logs and dist-config must never hold."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}@{host}"))


def open_url(
    url: str,
    timeout: float = TIMEOUT,
    headers: dict[str, str] | None = None,
    watch: Stall | None = None,
) -> http.client.HTTPResponse:
    """Opens url; a user and password in it are sent with HTTP basic authentication, to
    that server only (not to one it redirects to). With watch, its connections are cut
    when they all but stop (see bundler.stall)."""
    parts = urlsplit(url)
    handlers: list[urllib.request.BaseHandler] = watch.handlers() if watch else []
    if parts.username is not None:
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit(parts._replace(netloc=host))
        passwords = urllib.request.HTTPPasswordMgrWithPriorAuth()
        passwords.add_password(
            None,
            f"{parts.scheme}://{host}/",
            unquote(parts.username),
            unquote(parts.password or ""),
            is_authenticated=True,
        )
        handlers.append(urllib.request.HTTPBasicAuthHandler(passwords))
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT, **(headers or {})})
    opener = urllib.request.build_opener(*handlers)
    return cast(http.client.HTTPResponse, opener.open(request, timeout=timeout))


def read_small(url: str, most: int) -> bytes:
    """url's body, cut at `most` + 1 bytes (so that a caller sees it is longer); a server
    that all but stops (see bundler.stall) fails as a TimeoutError that says so."""
    with Stall() as watch:
        data = bytearray()
        try:
            with open_url(url, watch=watch) as response:
                while len(data) <= most and (chunk := watch.read(response)):
                    data += chunk
        except (OSError, http.client.HTTPException):
            if not watch.stalled:
                raise
        if watch.stalled:  # what arrived may be cut short anywhere
            raise TimeoutError(watch.describe())
    return bytes(data[: most + 1])


def download(
    url: str,
    part: Path,
    label: str,
    attempts: int = ATTEMPTS,
    backoff: float = 0.5,
    limit: int = LIMIT,
) -> Path:
    """Fetches `url` into `part`, continuing what an earlier attempt left there; an attempt
    that all but stops (see bundler.stall) fails the download."""
    part.parent.mkdir(parents=True, exist_ok=True)
    # A file:// mirror's errors (permission denied, a folder where the file should be) are
    # the same on every attempt: only a network's are worth another.
    local = urlsplit(url).scheme == "file"
    last = "no attempt was made"
    for attempt in range(attempts):
        if attempt:
            time.sleep(backoff * 2 ** (attempt - 1))
        try:
            _attempt(url, part, Progress(label), limit, Stall())
            return part
        except _Stalled as exc:
            # What arrived stays in part: the next run resumes from it.
            raise DownloadFailed(url, f"{exc}; running again resumes where it stopped") from None
        except _TooLarge:
            part.unlink(missing_ok=True)  # nothing to resume from
            raise DownloadFailed(
                url,
                f"the server sends more than {limit // (1024 * 1024)} MiB, more than any "
                "runtime archive",
            ) from None
        except _Retry as exc:
            last = str(exc)
        except urllib.error.HTTPError as exc:
            if exc.code in (408, 429) or exc.code >= 500:
                last = f"HTTP {exc.code} {exc.reason}"
                continue
            if 300 <= exc.code < 400:
                # urllib follows redirects; one it hands back loops, or goes nowhere.
                why = "a redirect that loops or leads nowhere"
                raise DownloadFailed(url, f"HTTP {exc.code}, {why}") from None
            raise DownloadFailed(url, f"HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            last = describe(exc)
            if isinstance(exc.reason, FileNotFoundError):
                raise DownloadFailed(url, "no such file") from None
            if local:
                raise DownloadFailed(url, last) from None
            if isinstance(exc.reason, ssl.SSLCertVerificationError):
                # Not retried: a mirror inside a network often has a certificate of its own
                # authority, which Python trusts once it is named.
                raise DownloadFailed(
                    url,
                    f"its certificate is not trusted: {exc.reason.verify_message}; set "
                    "SSL_CERT_FILE to the certificate (PEM) of the authority that signed it",
                ) from None
        except (OSError, http.client.HTTPException) as exc:
            last = describe(exc)
            if local:
                raise DownloadFailed(url, last) from None
    raise DownloadFailed(url, f"{last} (after {attempts} attempts)")


def _attempt(url: str, part: Path, progress: Progress, limit: int, watch: Stall) -> None:
    with watch:
        try:
            whole = _transfer(url, part, progress, limit, watch)
        except (OSError, http.client.HTTPException, _Retry):
            if watch.stalled:  # the failure is the cut connection's
                raise _Stalled(watch.describe()) from None
            raise
        if watch.stalled and not whole:
            raise _Stalled(watch.describe())
    progress.finish()


def _transfer(url: str, part: Path, progress: Progress, limit: int, watch: Stall) -> bool:
    """One request's bytes into part; whether part is known to be whole (its length
    was given), else the end of the body was taken for the end of the file."""
    offset = part.stat().st_size if part.exists() else 0
    resumable = urlsplit(url).scheme in ("http", "https")
    if offset and not resumable:
        offset = 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    try:
        response = open_url(url, headers=headers, watch=watch)
    except urllib.error.HTTPError as exc:
        if exc.code == 416 and offset:
            return True  # the part is already whole; the checksum decides
        raise
    with response:
        status = getattr(response, "status", 200)
        if offset and status == 206 and _range_start(response) == offset:
            mode = "ab"
        else:
            offset, mode = 0, "wb"
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length and length.isdigit() else None
        if (total or 0) > limit:
            raise _TooLarge()
        progress.start(total, resumed_at=offset)
        try:
            out = part.open(mode)
        except OSError as exc:
            raise CannotWrite(part, exc) from None
        try:
            _copy(cast(io.BufferedIOBase, response), out, progress, limit - offset, watch)
        finally:
            try:
                out.close()  # flushes the last bytes: a full disk can refuse them here
            except OSError as exc:
                raise CannotWrite(part, exc) from None
        size = part.stat().st_size
        if total is not None and size < total:
            raise _Retry(f"the connection closed at {size} of {total} bytes")
    return total is not None


def _copy(
    source: io.BufferedIOBase, out: IO[bytes], progress: Progress, room: int, watch: Stall
) -> None:
    def write(data: bytes) -> None:
        try:
            out.write(data)
        except OSError as exc:  # the disk's fault, not the connection's: never retried
            raise CannotWrite(Path(out.name), exc) from None

    try:
        while True:
            chunk = watch.read(source)
            if not chunk:
                return
            room -= len(chunk)
            if room < 0:
                raise _TooLarge()
            write(chunk)
            progress.advance(len(chunk))
    except http.client.IncompleteRead as exc:
        write(exc.partial)
        raise _Retry("the connection closed early") from None
    except (ConnectionError, TimeoutError) as exc:
        raise _Retry(f"the connection failed ({exc})") from None


def _range_start(response: http.client.HTTPResponse) -> int | None:
    value = response.headers.get("Content-Range", "")  # "bytes 100-199/200"
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return None
