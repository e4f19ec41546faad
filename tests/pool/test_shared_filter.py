"""The seccomp filter in two parts (runtime/sandbox.h, pynox_sandbox_share_filter): the
pool's zygote installs the part that names no process once, and every spare it forks
inherits it and adds only its own. That the two together still refuse all that a
command-line run's single filter refuses is checked where the escapes are: tests/escape
runs each probe as a pool request too, and tests/core/test_seccomp_rules.py checks that
the parts split the whole."""

from __future__ import annotations

import time

from support.pool_client import (
    PoolClient,
    is_scratch_helper,
    process_table,
    seccomp_filters,
    status_field,
)
from support.pool_requests import assert_ok, new_id


def _children(pid: int) -> list[int]:
    table = process_table()
    return [c for c, (parent, state) in table.items() if parent == pid and state != "Z"]


def test_the_zygote_forks_its_spares_under_the_shared_part() -> None:
    with PoolClient(workers=2) as client:
        (zygote,) = [pid for pid in _children(client.pid) if not is_scratch_helper(pid)]
        # A spare has its own part once it is prepared, before any request comes.
        deadline = time.monotonic() + 20
        while True:
            spares = _children(zygote)
            filters = seccomp_filters([zygote, *spares])
            if len(spares) == 2 and all(filters.get(pid) == 2 for pid in spares):
                break
            assert time.monotonic() < deadline, f"spares not prepared: {filters}"
            time.sleep(0.02)
        assert filters[zygote] == 1
        # Without no_new_privs the kernel would not have taken it from the zygote.
        assert status_field(zygote, "NoNewPrivs") == "1"
        assert_ok(client.run({"id": new_id(), "code": "print(6 * 7)"}), "42\n")
