"""Pynox across a Ray cluster: `RayPool`, with the calls of `pynox.Pool` plus `map`.

Each Ray actor of a RayPool owns a local `pynox.Pool` on its node, started with the text of
the caller's pynox.toml, so its [pool.limits] hold on every node. Needs Ray here and on every
node (`pip install 'pynox[ray]'`), and Pynox on every node; see docs/ray.md.
"""

from pynox.ray.pool import RayPool, RaySession

__all__ = ["RayPool", "RaySession"]
