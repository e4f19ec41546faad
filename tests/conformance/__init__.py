"""The conformance suite: what an installed bundle must pass to ship (see conftest)."""
