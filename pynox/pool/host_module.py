"""`pynox_host`: the module a sandboxed program imports to call host functions.

Each call travels as a frame to the pool server, which asks the client; the
function runs in the client's process, outside the sandbox. Arguments and
results are JSON (RFC 8259: NaN and Infinity are refused here, before they
leave). A failure in the host function raises HostError here.
"""

import sys
import threading

from pynox import strict_json
from pynox.limits import MAX_CALL_BYTES_IN_FLIGHT, MAX_CALLS_IN_FLIGHT, UNKNOWN_SIGNATURE
from pynox.pool import channel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    # Adds to a frame the number of the session step it belongs to (ChildLink.stamped).
    Stamp = Callable[[dict[str, object]], dict[str, object]]

MODULE_NAME = "pynox_host"


class HostError(Exception):
    """The host function raised, or the host could not run it."""


HostError.__module__ = MODULE_NAME  # what the program imports it from


class _HostFunction:
    def __init__(self, link: "_Link", name: str, signature: str, doc: str) -> None:
        self._link = link
        self.__name__ = self.__qualname__ = name
        self.__doc__ = doc or None
        self.signature = signature

    # self is positional-only: the host function may take a keyword of that name.
    def __call__(self, /, *args: object, **kwargs: object) -> object:
        return self._link.call(self.__name__, list(args), kwargs)

    def __repr__(self) -> str:
        return f"<host function {self.__name__}{self.signature}>"


class _Link:
    """The child's end of the channel; one call at a time, from any thread."""

    def __init__(self, fd: int, stamped: "Stamp") -> None:
        self.fd = fd
        self.stamped = stamped
        self.lock = threading.Lock()
        self.calls = 0
        # Calls sent and not yet answered, by number: the size of their frame's body. A call
        # that an exception interrupted while it waited (a signal handler's timeout) stays
        # here until its answer is read, which a later call does first.
        self.in_flight: dict[int, int] = {}

    def call(self, name: str, args: list[object], kwargs: dict[str, object]) -> object:
        with self.lock:
            self.calls += 1
            number = self.calls
            call = self.stamped(
                {"type": "call", "call": number, "function": name, "args": args, "kwargs": kwargs}
            )
            try:
                # The pool server's own bounds, checked here first: a call it would
                # refuse (and end the request for) is a HostError the program can catch.
                frame = channel.encode(
                    call,
                    limit=channel.CHILD_FRAME,
                    max_depth=channel.CHILD_DEPTH,
                    max_items=channel.CHILD_ITEMS,
                )
                # Read back as the host will: a dict whose keys JSON writes alike ({1: "a",
                # "1": "b"}) would reach it with one of them silently gone.
                strict_json.loads(frame[channel._HEADER :], unique_keys=True)
            except strict_json.RepeatedKey as exc:
                raise HostError(
                    f"{name}() takes JSON arguments only: a dict has two keys that JSON writes "
                    f"alike, as {exc.key!r} (such as 1 and '1'); give each key once"
                ) from None
            except (TypeError, ValueError) as exc:
                raise HostError(f"{name}() takes JSON arguments only: {exc}") from None
            except channel.ChannelError as exc:
                raise HostError(f"the arguments of {name}() are too large: {exc}") from None
            try:
                self._make_room(len(frame) - channel._HEADER)
                self.in_flight[number] = len(frame) - channel._HEADER
                channel.write_frame(self.fd, frame)
                reply = self._answer(number)
            except (OSError, channel.ChannelError) as exc:
                raise HostError(f"the host could not run {name}(): {exc}") from None
        if reply is None:
            raise HostError(f"the host went away while {name}() was running")
        if reply.get("type") == "return" and reply.get("call") == number:
            return reply.get("value")
        if reply.get("type") == "raise" and reply.get("call") == number:
            raise HostError(str(reply.get("message", f"{name}() failed")))
        raise HostError(f"the host answered {name}() with something unexpected")

    def _make_room(self, size: int) -> None:
        """Waits for the answers of interrupted calls while one more call would pass the pool
        server's bounds on calls in flight, which would end the request."""
        while self.in_flight and (
            len(self.in_flight) >= MAX_CALLS_IN_FLIGHT
            or sum(self.in_flight.values()) + size > MAX_CALL_BYTES_IN_FLIGHT
        ):
            if self._answer(None) is None:
                raise channel.ChannelError("the channel closed")

    def _answer(self, number: "int | None") -> "dict[str, object] | None":
        """The next answer to call `number` (to any call in flight, for None); None when the
        channel closed. The answers of interrupted calls come first: passed over, or each
        later call would read the answer of the one before."""
        while True:
            reply = channel.receive(self.fd)
            if reply is None or reply.get("type") not in ("return", "raise"):
                return reply
            answered = reply.get("call")
            if answered in self.in_flight:
                del self.in_flight[answered]
                if number is None or answered == number:
                    return reply
            elif number is not None:
                return reply  # not an answer to any call of ours: unexpected


def install(fd: int, functions: list[dict[str, str]], stamped: "Stamp") -> threading.Lock:
    """Puts a `pynox_host` module with the declared functions into sys.modules; returns
    the lock a call holds from sending it to reading its answer."""
    module = type(sys)(MODULE_NAME)
    module.__doc__ = "Functions of the host application, callable from the sandbox."
    link = _Link(fd, stamped)
    module.HostError = HostError  # type: ignore[attr-defined]
    names = []
    for spec in functions:
        name = spec["name"]
        setattr(
            module,
            name,
            _HostFunction(
                link, name, spec.get("signature", UNKNOWN_SIGNATURE), spec.get("doc", "")
            ),
        )
        names.append(name)
    module.__all__ = names  # type: ignore[attr-defined]
    sys.modules[MODULE_NAME] = module
    return link.lock
