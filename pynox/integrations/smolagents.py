"""A smolagents executor: each step of a `CodeAgent` runs in a Pynox session.

    from smolagents import CodeAgent
    from pynox.integrations.smolagents import PynoxExecutor

    agent = CodeAgent(tools=[...], model=model, executor=PynoxExecutor(allow_read=["data"]))

Variables persist between steps (one session, like a notebook). The agent's tools run on
the host as Pynox host functions, so a sandboxed step can call them by name, with JSON data
for arguments and results. `final_answer(x)` ends the run with `x` (JSON data; anything
else reaches the host as its repr). A step that fails, a denial included, raises an error
whose message is the Result's text, which smolagents hands the model as the observation:
the output, the error, its line and the hint. Needs `pip install 'pynox[smolagents]'`.
"""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any

from smolagents.local_python_executor import CodeOutput, PythonExecutor

from pynox.api.options import Spec, effective_grants
from pynox.api.pool import Pool
from pynox.api.result import for_model, session_ended_note
from pynox.api.session import Session
from pynox.step_names import step_name

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from pynox.api.options import SessionOptions
    from pynox.api.result import Result

# The host function final_answer() hands its answer to, and the exception that then ends
# the step (a BaseException, so the step's own `except Exception` cannot swallow it).
_ANSWER = "pynox_final_answer"
_PRELUDE = """\
from pynox_host import {imports}


class FinalAnswerException(BaseException):
    pass


def final_answer(answer):
    try:
        {answer}(answer)
    except Exception:  # not JSON data
        {answer}(repr(answer))
    raise FinalAnswerException()
"""


class StepError(Exception):
    """A step that failed; its message is what the model reads (Result.text)."""


class PynoxExecutor(PythonExecutor):  # type: ignore[misc]
    """Runs a CodeAgent's steps in one Pynox session with the options of `Pool.session`.

    `pool` is the Pool to run on (default: a new one, closed by `cleanup()`); the other
    keyword arguments are the session's permissions (profile, allow_read, timeout, ...).
    """

    def __init__(self, pool: Pool | None = None, **options: Unpack[SessionOptions]) -> None:
        if "functions" in options:
            raise TypeError("the agent's tools are the host functions; pass them to the agent")
        spec = Spec.of(type(self).__name__, options)  # checked now, not at the first step
        if pool is not None and not isinstance(pool, Pool):
            raise TypeError(f"pool takes a pynox.Pool, not {type(pool).__name__}")
        self._own_pool = pool is None
        self.pool = Pool(lazy=True) if pool is None else pool
        # A profile the pool's config lacks (or no config): a ValueError now, not an
        # observation the model reads at every step and cannot act on.
        effective_grants(spec, self.pool._load_config())
        # So is whatever else the pool would refuse when the first step starts the session
        # (a limit above [pool.limits], a loader variable, a path that does not exist):
        # asked of the pool itself, which then stays warm for that step.
        checked = self.pool.run_spec("pass", spec)
        if not checked.ok:
            if self._own_pool:
                self.pool.close()
            raise ValueError(checked.error["message"] if checked.error else checked.text)
        self._options = options
        self._tools: dict[str, Any] = {}
        self._variables: dict[str, Any] = {}
        self._session: Session | None = None
        self._answered: list[Any] = []
        # The model's code actions, counted from 1: its tracebacks name its own steps
        # (<step-1> for its first code), not the session's, whose first steps are ours.
        self._code_actions = 0
        self.state: dict[str, Any] = {}

    def send_tools(self, tools: dict[str, Any]) -> None:
        tools = {name: tool for name, tool in tools.items() if name != "final_answer"}
        if tools.keys() != self._tools.keys():
            self._close_session()  # the host functions of a session are fixed when it starts
        self._tools = tools

    def send_variables(self, variables: dict[str, Any]) -> None:
        for name, value in variables.items():
            try:
                encoded = json.dumps(value)
            except (TypeError, ValueError, RecursionError):
                raise TypeError(
                    f"variable {name!r} is {type(value).__name__}, not JSON data; the Pynox "
                    "executor passes str, int, float, bool, None, lists and dicts"
                ) from None
            # JSON writes every key as a string: {1: "a", "1": "b"} would arrive with one.
            try:
                json.loads(encoded, object_pairs_hook=_keys_kept)
            except _KeysAlike as alike:
                raise TypeError(
                    f"variable {name!r} holds a dict with two keys that JSON writes alike "
                    f"(as {alike.key!r}); the Pynox executor passes variables as JSON, whose "
                    "keys are strings: give that dict keys that differ as strings"
                ) from None
        self._variables.update(variables)
        if self._session is not None and variables:
            self._step(_assign(variables))

    def __call__(self, code_action: str) -> CodeOutput:
        self._answered.clear()
        self._code_actions += 1
        result = self._run(code_action, step_name(self._code_actions))
        logs = result.stdout + result.stderr
        ended = result.session.get("ended") if result.session is not None else None
        if ended and result.ok:  # sys.exit(0): the model must know its variables are gone
            logs += session_ended_note(str(ended)) + "\n"
        if self._answered:
            # final_answer() ends the step by raising; its traceback is no log of the model's.
            logs = result.stdout + _without_final_answer(result.stderr)
            return CodeOutput(output=self._answered[0], logs=logs, is_final_answer=True)
        if not result.ok:
            raise StepError(result.text)
        return CodeOutput(output=result.value, logs=logs, is_final_answer=False)

    def cleanup(self) -> None:
        self._close_session()
        if self._own_pool:
            self.pool.close()

    def _run(self, code: str, name: str) -> Result:
        if self._session is None:
            self._session = self._start()
        result = for_model(self._session.run(code, name=name))
        if result.session is not None and result.session.get("ended"):
            self._close_session()  # a timeout or a crash: the next step starts afresh
        return result

    def _start(self) -> Session:
        functions = {name: _host_function(name, tool) for name, tool in self._tools.items()}
        functions[_ANSWER] = self._answer
        options: SessionOptions = {**self._options, "functions": functions}
        session = self.pool.session(**options)
        imports = ", ".join([*self._tools, _ANSWER])
        prelude = _PRELUDE.format(imports=imports, answer=_ANSWER)
        if self._variables:
            prelude += _assign(self._variables)
        result = session.run(prelude, name="prelude.py")
        if not result.ok:
            session.close()
            raise StepError(f"the session did not start: {result.text}")
        return session

    def _answer(self, answer: Any) -> None:
        """Keeps the step's first answer only: code that calls the host function in a loop
        must not make this process hold every answer it sent."""
        if not self._answered:
            self._answered.append(answer)

    def _step(self, code: str) -> None:
        assert self._session is not None
        result = self._session.run(code, name="variables.py")
        if not result.ok:
            raise StepError(result.text)

    def _close_session(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


class _KeysAlike(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _keys_kept(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's pairs as a dict, refusing a key given twice rather than keeping one."""
    value = dict(pairs)
    if len(value) != len(pairs):
        keys = [key for key, _ in pairs]
        raise _KeysAlike(next(key for key in keys if keys.count(key) > 1))
    return value


def _without_final_answer(stderr: str) -> str:
    """stderr without the traceback of the FinalAnswerException that ended the step."""
    if not stderr.rstrip().endswith("FinalAnswerException"):
        return stderr
    start = stderr.rfind("Traceback (most recent call last):\n")
    return stderr if start < 0 else stderr[:start]


def _assign(variables: dict[str, Any]) -> str:
    """Code that sets the variables, binding no name of its own: a helper name (_json, say)
    would be deleted after use, and with it a variable of that name."""
    data = json.dumps(json.dumps(variables))
    return f"globals().update(__import__('json').loads({data}))\n"


def _host_function(name: str, tool: Any) -> Any:
    """The tool as a plain function with its own parameters, for the model's docs."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return tool(*args, **kwargs)

    call.__name__ = name
    call.__doc__ = getattr(tool, "description", None)
    parameters = [
        inspect.Parameter(argument, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        for argument in getattr(tool, "inputs", {})
    ]
    call.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return call
