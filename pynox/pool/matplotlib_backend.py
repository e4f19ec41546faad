"""The matplotlib backend of pool children: `plt.show()` returns each figure as a PNG.

Selected with MPLBACKEND=module://pynox.pool.matplotlib_backend in a pool child's
environment (pynox.pool.child_link), so matplotlib imports this module only once the
program uses pyplot. Figures render with Agg, in memory: no display, no file, no grant.
Each figure shown is sent to the pool server (pynox.pool.display) and closed, as a
notebook's inline backend does.
"""

import io

from matplotlib._pylab_helpers import Gcf
from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

from pynox.limits import MAX_IMAGE_SIDE
from pynox.pool import display

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args: object, **kwargs: object) -> None:
    """Sends every open figure as a PNG, then closes them."""
    for manager in Gcf.get_all_fig_managers():
        figure = manager.canvas.figure
        try:
            width, height = (round(side) for side in figure.get_size_inches() * figure.dpi)
            if max(width, height) > MAX_IMAGE_SIDE:
                display.send_png(b"", width, height)  # refused, with a note saying why
                continue
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png")
            data = buffer.getvalue()
            display.send_png(data, *_png_size(data))
        finally:
            Gcf.destroy(manager)


def _png_size(data: bytes) -> "tuple[int, int]":
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
