"""A sibling module imported by several corpus programs."""

GREETING = "hello from the helper"


def add(a, b):
    return a + b


def describe():
    return f"{__name__} {__file__.rsplit('/', 1)[-1]}"


def _inner(value):
    return {"a": 1}[value]


def outer(value):
    return _inner(value) * 2
