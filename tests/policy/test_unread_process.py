"""Write grants where pynox cannot read what its own process loaded, or its mounts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from pynox.errors import PolicyError
from pynox.policy import bind_mounts, loaded_objects, trusted

pytestmark = pytest.mark.unit


def test_a_write_grant_is_refused_where_the_loaders_list_cannot_be_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where /proc/self/mem could not be read (a process made undumpable, run as another
    user than root, finds it root's), the loader's list counted as empty: the folders its
    libraries' RUNPATHs name and the links it opened them by went unprotected, and a grant
    over one was taken."""
    missing = tmp_path / "mem"
    monkeypatch.setattr(loaded_objects, "MEMORY", str(missing))
    policy = SimpleNamespace(allow_write=[str(tmp_path / "out")])
    with pytest.raises(PolicyError) as refused:
        trusted.refuse_trusted_writes(policy, trusted.installation(), [])  # type: ignore[arg-type]
    assert str(refused.value) == (
        f"cannot grant writing {tmp_path}/out: pynox cannot read {missing} (No such file or"
        " directory), which tells what it loaded before its sandbox, to check that the grant"
        " reaches none of it; run pynox where it can read its own entries of /proc (mounted,"
        " and the process not made undumpable by a set-user-ID or set-group-ID start), or"
        " grant no writes"
    )
    nothing_written: Any = SimpleNamespace(allow_write=[])  # needs none of it
    trusted.refuse_trusted_writes(nothing_written, trusted.installation(), [])


def test_no_grant_is_checked_without_the_mount_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An unreadable /proc/self/mountinfo counted as no mounts at all: a grant holding a
    bind mount of pynox's own package was taken."""
    missing = tmp_path / "mountinfo"
    monkeypatch.setattr(bind_mounts, "_MOUNTINFO", str(missing))
    with pytest.raises(PolicyError) as refused:
        bind_mounts.mounts()
    assert str(refused.value) == (
        f"pynox cannot read {missing} (No such file or directory), which tells where a grant"
        " reaches through mounts, to check that it reaches nothing pynox trusts; run pynox"
        " where /proc is mounted"
    )
    with pytest.raises(PolicyError):
        bind_mounts.MountTable().current()
