"""The launcher's hint templates for a --json run: the texts that read the same in every
run (which the start-up image holds) and those a memory or file size limit changes
(LIMIT_KINDS, made by each run that has such a limit) together make all of them."""

from __future__ import annotations

import pytest

from pynox.engine.hint_text import hint_texts, unlimited_hint_texts
from pynox.engine.limit_hints import limit_hint_texts
from pynox.policy.resolve import Policy

pytestmark = pytest.mark.unit

MIB = 1 << 20


def _policy(memory: int | None, max_file_size: int | None) -> Policy:
    policy = Policy()
    policy.memory, policy.max_file_size = memory, max_file_size
    return policy


@pytest.mark.parametrize("memory", [None, 16 * MIB, 64 * MIB, 1 << 30, 1 << 50])
@pytest.mark.parametrize("max_file_size", [None, 1, MIB, 1 << 40])
def test_unlimited_texts_and_the_limits_own_make_every_template(
    memory: int | None, max_file_size: int | None
) -> None:
    policy = _policy(memory, max_file_size)
    assert unlimited_hint_texts() | limit_hint_texts(policy) == hint_texts(policy)


def test_a_limit_changes_only_the_texts_of_its_kinds() -> None:
    limited = limit_hint_texts(_policy(64 * MIB, MIB))
    assert {"memory", "file_size", "open_files"} <= set(limited)
    assert not set(limited) & set(unlimited_hint_texts())
