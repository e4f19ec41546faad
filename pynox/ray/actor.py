"""One node's share of a RayPool: a Ray actor owning a local `pynox.Pool` and its sessions.

The policy travels once, at creation: the text of the caller's pynox.toml, written to a
private file on the node that the local pool is started with. Requests then carry only the
fields of a pool request; the actor rebuilds and checks them as `pynox.Pool` would, and the
local pool refuses what exceeds that file's [pool.limits]. Nothing a request carries can
name another config, so no request widens the limits by travelling.

This module does not import Ray: `pynox.ray.pool` makes the class an actor.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from typing import Any

from pynox.api.connection import PoolError
from pynox.api.options import Spec
from pynox.api.pool import Pool
from pynox.api.result import failure
from pynox.api.session import Session
from pynox.policy.grants import HINTS_PYTHON
from pynox.policy.location import CONFIG_NAME

# The request fields an actor takes besides `code`: Spec's options, but for host functions,
# which never travel (they run in the caller's process), and files, which RayPool does not
# carry to its actors.
REQUEST_FIELDS = frozenset(Spec.__slots__) - {"functions", "files", "_limits"}
# The fields that are not options: the code, and the spelling of hints, which the local
# pool's own requests ask for as the driver's did (a Python caller's).
_NOT_OPTIONS = frozenset({"code", "hints"})
DIRECTORY_PREFIX = "pynox-ray-"


def checked_request(request: object) -> tuple[str, Spec]:
    """The code and options of a request as the actor received it; TypeError or ValueError
    with one sentence when it is not one."""
    if not isinstance(request, dict):
        raise TypeError("a RayPool request is a dict of pool request fields")
    unknown = sorted(
        str(key) for key in request if key not in _NOT_OPTIONS and key not in REQUEST_FIELDS
    )
    if unknown:
        raise ValueError(f"a RayPool request cannot carry {', '.join(unknown)}")
    code = request.get("code")
    if not isinstance(code, str):
        raise TypeError("a RayPool request's code must be a str of Python source")
    if request.get("hints", HINTS_PYTHON) != HINTS_PYTHON:
        raise ValueError(f"a RayPool request's hints are spelled {HINTS_PYTHON!r}, for Python")
    options = {key: value for key, value in request.items() if key not in _NOT_OPTIONS}
    return code, Spec(**options)


class NodePool:
    """A local pool on this node, started with the config text the RayPool shipped."""

    def __init__(
        self,
        generation: int,
        config_text: str,
        workers: int | None,
        preload: list[str],
        package_dirs: list[str],
        warmup: str | None = None,
    ) -> None:
        self.generation = generation
        # A private directory: the file the local pool reads its limits from is ours alone.
        # Its name holds this process's id, so that the next actor on the node removes it
        # should this one be killed before it could.
        _remove_orphans()
        self._directory = tempfile.mkdtemp(prefix=f"{DIRECTORY_PREFIX}{os.getpid()}-")
        config = os.path.join(self._directory, CONFIG_NAME)
        try:
            with open(config, "x", encoding="utf-8") as file:
                file.write(config_text)
            self.pool = Pool(workers, preload, config, warmup=warmup, package_dirs=package_dirs)
        except BaseException:  # an actor that cannot start leaves no directory behind
            shutil.rmtree(self._directory, ignore_errors=True)
            raise
        self.sessions: dict[str, Session] = {}

    async def ready(self) -> dict[str, Any]:
        """Waits until the local pool serves; what the caller may want to know of it."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, self.pool._connection)
        except BaseException:
            # RayPool kills an actor whose pool cannot start: it never calls shutdown.
            await self.shutdown()
            raise
        return {
            "generation": self.generation,
            "pid": os.getpid(),
            "pool_pid": self.pool.pid,
            "python": self.pool.python,
            "node": _node_id(),
        }

    async def run(self, request: object, session_id: str | None) -> dict[str, Any]:
        """Runs one request (a session step when session_id is given); the result line."""
        try:
            code, spec = checked_request(request)
            if session_id is not None and not isinstance(session_id, str):
                raise TypeError("a session id is a str")
        except (TypeError, ValueError) as exc:
            return failure("RequestError", str(exc), hint=None).raw
        session = None
        if session_id is not None:
            session = self.sessions.get(session_id)
            if session is None:
                session = self.sessions[session_id] = Session(self.pool, spec)
            # As Session.run would mark it, which this bypasses: else its close() would not
            # tell the pool, whose session would then hold its place until the step ended.
            session._sent = True
        try:
            result = await self.pool.arun_spec(code, spec, session)
        except PoolError as exc:
            return failure("PoolError", str(exc)).raw
        raw = dict(result.raw)
        if session_id is not None and result.session is not None:
            # As the local session saw the step (restarted after a crash of the local pool),
            # under the id the caller knows it by.
            raw["session"] = {**result.session, "id": session_id}
        return raw

    async def close_session(self, session_id: str) -> None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            await asyncio.get_running_loop().run_in_executor(None, session.close)

    async def shutdown(self) -> None:
        """Closes the local pool (its sessions with it) and removes the config file."""
        self.sessions.clear()
        await asyncio.get_running_loop().run_in_executor(None, self.pool.close)
        shutil.rmtree(self._directory, ignore_errors=True)


def _remove_orphans() -> None:
    """Removes the config directories of actors on this node whose process is gone."""
    parent = tempfile.gettempdir()
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        pid = name[len(DIRECTORY_PREFIX) :].split("-", 1)[0]
        if not name.startswith(DIRECTORY_PREFIX) or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            continue  # alive, another user's


def _node_id() -> str | None:
    try:
        import ray

        return str(ray.get_runtime_context().get_node_id())
    except Exception:  # outside Ray (a test of the class itself)
        return None
