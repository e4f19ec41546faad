"""Preloading (`pynox pool --preload`, `[pool].preload`): host code that runs once in the
pool server, whose modules every request then shares, so nothing of the pool's own
environment may reach a request through them, and a module that fails stops the pool
with one sentence."""

from __future__ import annotations

from pathlib import Path

from support.pool_client import PoolClient, clean_env
from support.pool_requests import assert_ok, code, new_id

# Keeps, as it is imported, what the environment holds then.
KEEPS_THE_ENVIRONMENT = code("""
    import os
    KEY = os.environ.get("SERVICE_KEY")
    SEEN = sorted(os.environ)
""")


def test_a_preloaded_module_keeps_nothing_of_the_pools_environment(tmp_path: Path) -> None:
    """A package that reads a key as it is imported would hand it to every request: the
    preload and the warm-up see the environment a request sees, the locale alone."""
    (tmp_path / "keeps.py").write_text(KEEPS_THE_ENVIRONMENT)
    warmup = "import os, sys\nsys.pynox_key = os.environ.get('SERVICE_KEY')\n"
    env = clean_env({"SERVICE_KEY": "the-service-key"})
    show = "import keeps, sys; print(keeps.KEY, keeps.SEEN, sys.pynox_key)"
    with PoolClient(
        "--package-dir", str(tmp_path), "--warmup", warmup, workers=1, preload=["keeps"], env=env
    ) as client:
        assert_ok(client.run({"id": new_id(), "code": show}), "None ['LANG'] None\n")
        # The pool's environment is as it was: a request granted the variable gets it.
        granted = "import os; print(os.environ['SERVICE_KEY'])"
        request = {"id": new_id(), "code": granted, "allow_env": ["SERVICE_KEY"]}
        assert_ok(client.run(request), "the-service-key\n")
        assert client.close() == 0


def test_what_a_preloaded_module_sets_in_the_environment_stays(tmp_path: Path) -> None:
    (tmp_path / "sets.py").write_text("import os\nos.environ['SET_BY_PRELOAD'] = 'yes'\n")
    env = clean_env({"SERVICE_KEY": "the-service-key"})
    with PoolClient("--package-dir", str(tmp_path), workers=1, preload=["sets"], env=env) as client:
        show = "import os; print(os.environ.get('SET_BY_PRELOAD'), os.environ['SERVICE_KEY'])"
        request = {"id": new_id(), "code": show, "allow_env": ["SET_BY_PRELOAD", "SERVICE_KEY"]}
        assert_ok(client.run(request), "yes the-service-key\n")
        assert client.close() == 0
