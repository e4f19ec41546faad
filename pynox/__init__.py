"""Pynox: a Python with the sandbox built in."""

__version__ = "0.1.0"
