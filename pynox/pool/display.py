"""What a pool child shows besides its output: its last expression's value and its figures.

Runs inside the sandbox. The value's repr and the figures' PNG bytes are made here, cut to
the bounds of pynox.limits, and sent to the pool server as `value` and `image` frames on
the child's channel; the server checks them again (pynox.pool.display_check), since the
program can write frames of its own there. Figures come from matplotlib, only when the
program imported it: pynox's backend (pynox.pool.matplotlib_backend) sends each figure
that `plt.show()` shows, and figures still open when the code ends are sent then.
"""

import os
import sys

from pynox.limits import MAX_IMAGE_BYTES, MAX_IMAGE_SIDE, MAX_IMAGES, MAX_VALUE, value_limit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

# The backend a pool child's matplotlib uses unless the run's environment names another.
BACKEND = "module://pynox.pool.matplotlib_backend"

# How this child sends a frame to the pool server (ChildLink.send); None outside the pool.
sender: "Callable[[dict[str, object]], bool] | None" = None
# What the current run or session step has sent so far: [images, bytes].
_sent = [0, 0]
# The most bytes of UTF-8 of a value this run sends (limit_value).
_value_bytes = [MAX_VALUE]
# In a session, only the thread that runs the steps sends figures, each before its step
# ends: another thread's could reach the pool server between two steps, which ends the
# session. The figures a thread shows stay open, and come back when the step ends.
_session: list[bool] = [False]


def serve_session() -> None:
    """This child is a session's (pynox.pool.child_link)."""
    _session[0] = True


def prepare_preloaded() -> None:
    """For a pool that preloaded matplotlib, which then read its backend already: it gets
    pynox's, and the PIL plugins its PNG writer imports on first use are imported now,
    from where the pool found them, not later inside a sandbox that may not read there."""
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is None:
        return
    try:
        matplotlib.use(BACKEND)
        from PIL import Image

        Image.preinit()
    except Exception:  # noqa: BLE001, S110 - figures then stay in the program, as before
        pass


def release_warmup_leftovers() -> None:
    """After the pool's warm-up (pynox.pool.warmup), what it left that a request must not get.

    Its open figures would come back as the request's images. matplotlib's cached fonts
    hold their files open, which the sandbox closes before the program runs; matplotlib
    drops that cache after a fork for the same reason, but a spare's warm-up comes after
    its fork.
    """
    pyplot = sys.modules.get("matplotlib.pyplot")
    font_manager = sys.modules.get("matplotlib.font_manager")
    try:
        if pyplot is not None:
            pyplot.close("all")
        clear = getattr(getattr(font_manager, "_get_font", None), "cache_clear", None)
        if clear is not None:
            clear()
    except Exception:  # noqa: BLE001, S110 - a matplotlib without these has nothing to drop
        pass


def limit_value(max_output: int) -> None:
    """The run's max_output bounds its value too (pynox.limits.value_limit)."""
    _value_bytes[0] = value_limit(max_output)


def start_step() -> None:
    """A session step starts: its images are counted afresh."""
    _sent[0] = _sent[1] = 0


def value_repr(value: object) -> "str | None":
    """The repr of a value, cut to the run's bound; None for None, as a notebook shows it.

    A repr that fails is told on stderr and gives no value: it must not fail the run.
    """
    if value is None:
        return None
    try:
        text = repr(value)
    except Exception as exc:  # noqa: BLE001 - the program's repr, whatever it raises
        _note(f"repr() of the last expression's value failed: {_describe(exc)}")
        return None
    # str's own encode, not a str subclass's; a repr may hold lone surrogates.
    return cut_value(str.encode(text, "utf-8", "backslashreplace"), _value_bytes[0])


def cut_value(data: bytes, limit: int) -> str:
    """data (a repr as UTF-8) as text of at most `limit` bytes: its start, then a note of
    how many bytes were cut; its start alone when the limit cannot hold the note, as a
    stream's is under a max_output too small for its line."""
    if len(data) <= limit:
        return data.decode()
    room = len(_cut_note(len(data)).encode())  # the longest note: no more cut than all of it
    if room > limit:
        return data[:limit].decode("utf-8", "ignore")
    kept = data[: limit - room].decode("utf-8", "ignore")
    return kept + _cut_note(len(data) - len(kept.encode()))


def _cut_note(cut: int) -> str:
    return f"... [{cut} more bytes of the value's repr were cut]"


def send_value(value: object) -> None:
    text = value_repr(value)
    if text is not None and sender is not None:
        sender({"type": "value", "repr": text})


def _refusal(width: int, height: int, size: int) -> "str | None":
    """Why an image would not come back (the bound it passes), or None when it fits."""
    if _sent[0] >= MAX_IMAGES:
        return f"a figure was not returned: at most {MAX_IMAGES} images come back per run"
    if max(width, height) > MAX_IMAGE_SIDE:
        return f"a figure of {width}x{height} was not returned: at most {MAX_IMAGE_SIDE} a side"
    if _sent[1] + size > MAX_IMAGE_BYTES:
        return f"a figure was not returned: images come back up to {MAX_IMAGE_BYTES} bytes a run"
    return None


def send_png(data: bytes, width: int, height: int) -> bool:
    """Sends one image if it fits the run's bounds; False (and a note) when it does not."""
    if sender is None:
        return False
    refusal = _refusal(width, height, len(data))
    if refusal is not None:
        _note(refusal)
        return False
    import binascii

    _sent[0] += 1
    _sent[1] += len(data)
    return sender({"type": "image", "data": binascii.b2a_base64(data, newline=False).decode()})


def show_figures() -> None:
    """Sends every figure pyplot has open as a PNG, then closes them (plt.show()).

    A figure that fails to draw is told on stderr, as a notebook shows its error, and
    costs only itself: the figures after it still come back. In a session, another thread
    than the steps' leaves them open (see _session).
    """
    import threading

    from matplotlib._pylab_helpers import Gcf

    if _session[0] and threading.current_thread() is not threading.main_thread():
        return
    for manager in Gcf.get_all_fig_managers():
        try:
            _show_figure(manager.canvas.figure)
        except Exception as exc:  # noqa: BLE001 - drawing runs the program's artists
            _note(f"a figure could not be drawn: {_describe(exc)}")
        finally:
            Gcf.destroy(manager)


def _show_figure(figure: "Any") -> None:
    import io

    width, height = (round(side) for side in figure.get_size_inches() * figure.dpi)
    # Checked before drawing too: a figure that cannot come back is not worth drawing
    # (a program that leaves hundreds open would spend its time limit on them).
    refusal = _refusal(width, height, 0)
    if refusal is not None:
        _note(refusal)
        return
    buffer = io.BytesIO()
    # At the figure's own dpi, as a notebook draws it, and as the size checked above:
    # rcParams["savefig.dpi"] would have it drawn past the bounds (3000 dpi takes gigabytes).
    figure.savefig(buffer, format="png", dpi=figure.dpi)
    data = buffer.getvalue()
    # IHDR's width and height, as the PNG has them.
    send_png(data, int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big"))


def send_open_figures() -> None:
    """The figures the code left open, when it used pyplot; never imports matplotlib."""
    if sender is None or "matplotlib.pyplot" not in sys.modules:
        return
    try:
        show_figures()
    except Exception as exc:  # noqa: BLE001 - drawing is the program's; it must not fail the run
        _note(f"the open figures could not be drawn: {_describe(exc)}")


def finish_code(value: object, echo: bool) -> None:
    """At the end of a run or session step: its value (when echo), then its open figures."""
    if echo:
        send_value(value)
    send_open_figures()


def _describe(exc: Exception) -> str:
    """The exception's type and message; its type alone when its message fails too."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception:  # noqa: BLE001 - the program's __str__, whatever it raises
        return type(exc).__name__


def _note(message: str) -> None:
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        os.write(2, f"pynox: {message}\n".encode(errors="replace"))
    except OSError:
        pass
