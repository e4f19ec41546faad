"""The host calls of the pool's children (pynox.pool.server): each call checked and
relayed to the client within the bounds of calls and bytes in flight, the client's
answer sent back, and the calls no client or step can answer refused.

HostCalls is a mixin of PoolServer, as SessionSteps is (see pynox.pool.session_steps
for why): the server state and methods it uses are declared below for the type
checker, which checks them against PoolServer's own.
"""

from pynox.limits import MAX_CALL_BYTES_IN_FLIGHT, MAX_CALLS_IN_FLIGHT
from pynox.pool import channel
from pynox.pool.records import Child, Run
from pynox.pool.request import RequestError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A host call's answer when the client closed the pool's input, which its answers come on.
NO_CLIENT_TO_ANSWER = "the pool's client closed its input, so no host function answers now"
# A client's answer to a host call: its call's number and this, as in these examples.
_ANSWER_KEYS = {"host_result": "value", "host_error": "message"}
_ANSWER_EXAMPLES = {
    "host_result": '{"call": 1, "value": [1, 2]}',
    "host_error": '{"call": 1, "message": "the catalog is down"}',
}
# A call between a session's steps is refused at once, with an answer the child reads
# (pynox_host waits for it, so a program has one such call at most). A program that writes
# call frames and never reads the answers ends its session once this many bytes of
# answers wait in the pool server, which would hold them for as long as the session idles.
MAX_UNREAD_REFUSALS = 64 << 10
# Answers to host calls wait in the pool server until the child reads them. pynox_host
# reads each before its next call (and passes over those of calls an exception
# interrupted), so only a program that writes call frames and never reads its answers
# makes them pile up: past this many bytes waiting, its request ends. One answer, however
# large, always fits: the bound is checked before it is added.
MAX_UNREAD_ANSWERS = MAX_CALL_BYTES_IN_FLIGHT
_MAX_CALL_NUMBER = (1 << 53) - 1  # what a JSON client reads exactly as a double


class HostCalls:
    """The host-call part of PoolServer."""

    # What it uses of the server's state and methods (pynox.pool.server.PoolServer),
    # declared for the type checker only.
    runs: dict[object, Run]
    stdin_open: bool

    if TYPE_CHECKING:

        def emit(self, message: "dict[str, Any]") -> None: ...
        def _send_frame(self, child: Child, frame: dict[str, object]) -> None: ...
        def _kill(self, child: Child, reason: str) -> None: ...

    def _check_call(self, child: Child, frame: dict[str, object]) -> None:
        """Refuses (ChannelError) a call frame that does not match its declaration."""
        call, function = frame.get("call"), frame.get("function")
        valid = (
            channel.small_int(call, 0, _MAX_CALL_NUMBER)
            and call not in child.pending_calls
            and type(function) is str
            and function in child.functions
            and type(frame.get("args")) is list
            and type(frame.get("kwargs")) is dict
        )
        if not valid:
            raise channel.ChannelError("a host call that does not match its declaration")

    def _refuse_call_between_steps(self, child: Child, frame: dict[str, object]) -> None:
        """A session's thread that calls the host while no step runs: there is no request
        to relay the call under, so the call fails in the program, which goes on."""
        self._check_call(child, frame)
        if len(child.outbound) > MAX_UNREAD_REFUSALS:
            raise channel.OverBound(
                "the program called the host between steps again and again without reading "
                "the answers; the pool ended its session"
            )
        message = (
            f"{frame['function']}() was called between two steps of the session; a host "
            "function answers only while a step runs"
        )
        self._refuse_call(child, frame["call"], message)

    def _drop_pending_calls(self, child: Child, refusal: str | None) -> None:
        """Forgets the child's host calls in flight, each answered with `refusal` as a
        HostError first unless it is None."""
        if refusal is not None:
            for call in child.pending_calls:
                self._refuse_call(child, call, refusal)
        child.pending_calls.clear()
        child.pending_bytes = 0

    def _refuse_call(self, child: Child, call: object, message: str) -> None:
        """Answers a host call with a HostError the program can catch."""
        self._send_frame(child, {"type": "raise", "call": call, "message": message})

    def _host_call(self, run: Run, child: Child, frame: dict[str, object], size: int) -> None:
        """Relays a call to the client, within the bounds of calls and bytes in flight."""
        self._check_call(child, frame)
        call, function = frame.get("call"), frame.get("function")
        if not self.stdin_open:
            # Answers come on stdin: the program would wait for one until its timeout.
            if len(child.outbound) > MAX_UNREAD_REFUSALS:
                raise channel.OverBound(_unread_answers(MAX_UNREAD_REFUSALS))
            self._refuse_call(child, call, NO_CLIENT_TO_ANSWER)
            return
        args, kwargs = frame.get("args"), frame.get("kwargs")
        if len(child.pending_calls) >= MAX_CALLS_IN_FLIGHT:
            raise channel.OverBound(
                f"the program had more than {MAX_CALLS_IN_FLIGHT} host calls in flight at once, "
                "the pool's bound per request (pynox_host makes one at a time)"
            )
        if child.pending_bytes + size > MAX_CALL_BYTES_IN_FLIGHT:
            raise channel.OverBound(
                f"the program's host calls in flight carried more than "
                f"{MAX_CALL_BYTES_IN_FLIGHT >> 20} MiB of arguments, the pool's bound per request"
            )
        child.pending_calls[call] = size  # type: ignore[index]
        child.pending_bytes += size
        self.emit(
            {
                "id": run.id,
                "event": "host_call",
                "call": call,
                "function": function,
                "args": args,
                "kwargs": kwargs,
            }
        )

    def _answer_host_call(self, message: dict[str, object]) -> None:
        """Sends a child the client's answer (host_result or host_error) to its host call."""
        request_id = message["id"]
        field = "host_result" if "host_result" in message else "host_error"
        answer = message[field]
        if not isinstance(answer, dict) or set(answer) != {"call", _ANSWER_KEYS[field]}:
            raise RequestError(
                f"{field} takes an object of exactly call and {_ANSWER_KEYS[field]}, like "
                f"{_ANSWER_EXAMPLES[field]}",
                request_id,
            )
        run = self.runs.get(request_id)
        child = run.child if run is not None else None
        if child is None:
            raise RequestError(
                f"no running request {request_id!r} waits for a host result", request_id
            )
        call = answer["call"]
        if type(call) is not int:
            raise RequestError(f"{field}'s call is the number its host_call event gave", request_id)
        if call not in child.pending_calls:
            raise RequestError(f"request {request_id!r} has no pending call {call}", request_id)
        text = answer.get("message", "")
        if field == "host_error" and not isinstance(text, str):
            raise RequestError("a host_error's message must be a string", request_id)
        child.pending_bytes -= child.pending_calls.pop(call)
        if len(child.outbound) > MAX_UNREAD_ANSWERS:
            self._kill(child, _unread_answers(MAX_UNREAD_ANSWERS))
            return
        if "host_result" in message:
            frame = {"type": "return", "call": call, "value": answer.get("value")}
        else:
            frame = {"type": "raise", "call": call, "message": text}
        try:
            self._send_frame(child, frame)
        except channel.ChannelError as exc:
            self._kill(child, f"a host result could not be sent: {exc}")


def _unread_answers(bound: int) -> str:
    """Why a request ends whose program made host calls and never read their answers."""
    size = f"{bound >> 20} MiB" if bound >= 1 << 20 else f"{bound >> 10} KiB"
    return (
        f"the program made host calls without reading their answers, and more than {size} "
        "of answers waited for it in the pool; call host functions through pynox_host, "
        "which reads each answer"
    )
