"""Pynox inside agent frameworks that take an executor rather than a tool."""
