"""Plain helpers the tests import, as `from support.commands import pynox`.

pytest puts tests/ on sys.path (`pythonpath` in pyproject.toml), so `support` is a
top-level package during a test run. Fixtures and hooks live in the conftest.py files;
everything a test calls lives here.
"""
