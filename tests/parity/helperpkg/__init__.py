"""A package next to the corpus programs."""
from .sub import double

VERSION = (1, 2)
__all__ = ["double", "VERSION"]
