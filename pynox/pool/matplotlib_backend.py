"""The matplotlib backend of pool children: `plt.show()` returns each figure as a PNG.

Selected with MPLBACKEND=module://pynox.pool.matplotlib_backend in a pool child's
environment (pynox.pool.child_link), so matplotlib imports this module only once the
program uses pyplot. Figures render with Agg, in memory: no display, no file, no grant.
Each figure shown is sent to the pool server (pynox.pool.display) and closed, as a
notebook's inline backend does.
"""

from matplotlib.backend_bases import FigureManagerBase
from matplotlib.backends.backend_agg import FigureCanvasAgg

from pynox.pool.display import show_figures

FigureCanvas = FigureCanvasAgg
FigureManager = FigureManagerBase


def show(*args: object, **kwargs: object) -> None:
    """Sends every open figure as a PNG, then closes them."""
    show_figures()
