"""The end of a run that Ctrl-C interrupted before its program ran.

Imported only then, by whichever part of pynox was running (its start, the command, the
sandboxed child): a module of its own, which imports nothing of pynox's.
"""

import posix

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn


def die_interrupted() -> "NoReturn":
    """Ends pynox on a Ctrl-C before the program ran, as python ends on one it does not
    handle: by SIGINT, without a traceback of pynox's own. A shell then sees the job
    interrupted (a script's loop stops), where an exit status would not tell it."""
    import _signal

    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    posix.kill(posix.getpid(), _signal.SIGINT)
    posix._exit(128 + _signal.SIGINT)  # not reached: SIGINT ends the process
