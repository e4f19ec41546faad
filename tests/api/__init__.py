"""The Python API: pynox.run, pynox.tool, Pool, Session and Result.

Three layers: the pure parts (Result.text, argument checks, the tool's docstring) need no
pool and are marked unit; a fake `pynox pool` drives the client through the failures a
real pool should never show (garbage, silence, death); everything else runs on the
installed pool.
"""
