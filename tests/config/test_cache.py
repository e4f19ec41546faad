"""The parsed-configuration cache: plain data that round-trips, an entry per file keyed
by its real path and holding its bytes, parsed again whenever the file changed, and
ignored (never trusted) when corrupt, foreign or writable by others."""

from __future__ import annotations

import marshal
import os
import pwd
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from support.config_files import FULL_EXAMPLE, write_config

from pynox.policy import cache as config_cache
from pynox.policy import cache_writer, config
from pynox.policy.cache import load_config
from pynox.policy.config import Config

pytestmark = pytest.mark.unit


SOME_MTIME = 1_600_000_000


def test_data_round_trip(project: Path, environ: dict[str, str]) -> None:
    loaded = load_config(write_config(project, FULL_EXAMPLE), environ)
    data = loaded.to_data()
    assert marshal.loads(marshal.dumps(data)) == data  # builtins only
    again = Config.from_data(data)
    assert again == loaded
    assert again.profiles["fetch"] == loaded.profiles["fetch"]
    assert again.pool == loaded.pool
    assert again.pool_limits == loaded.pool_limits
    assert again != Config.from_data({**data, "path": "/elsewhere/pynox.toml"})


def bad_shapes() -> list[Callable[[dict[str, object]], None]]:
    def missing_key(data: dict[str, object]) -> None:
        del data["pool"]

    def extra_key(data: dict[str, object]) -> None:
        data["extra"] = 1

    def bool_for_int(data: dict[str, object]) -> None:
        data["pool"] = {**data["pool"], "workers": True}  # type: ignore[dict-item]

    def int_for_float(data: dict[str, object]) -> None:
        data["permissions"] = {**data["permissions"], "timeout": 10}  # type: ignore[dict-item]

    def number_in_path_list(data: dict[str, object]) -> None:
        data["permissions"] = {**data["permissions"], "allow_read": [1]}  # type: ignore[dict-item]

    def profile_not_a_dict(data: dict[str, object]) -> None:
        data["profiles"] = {"fetch": []}

    def path_not_a_string(data: dict[str, object]) -> None:
        data["path"] = b"/p"

    return [
        missing_key,
        extra_key,
        bool_for_int,
        int_for_float,
        number_in_path_list,
        profile_not_a_dict,
        path_not_a_string,
    ]


@pytest.mark.parametrize("damage", bad_shapes())
def test_from_data_rejects_other_shapes(
    project: Path, environ: dict[str, str], damage: Callable[[dict[str, object]], None]
) -> None:
    data = load_config(write_config(project, FULL_EXAMPLE), environ).to_data()
    damage(data)
    with pytest.raises((ValueError, TypeError)):
        Config.from_data(data)


def entry_for(path: str, environ: dict[str, str]) -> Path:
    directory = config_cache.cache_dir(environ)
    assert directory is not None
    return Path(directory) / (path.replace("%", "%25").replace("/", "%2F") + ".marshal")


def test_cache_dir_locations(tmp_path: Path) -> None:
    xdg = str(tmp_path / "xdg")
    assert config_cache.cache_dir({"XDG_CACHE_HOME": xdg, "HOME": "/h"}) == f"{xdg}/pynox/config"
    assert config_cache.cache_dir({"HOME": "/h"}) == "/h/.cache/pynox/config"
    # The XDG spec says relative values are invalid and to be ignored.
    assert config_cache.cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == (
        "/h/.cache/pynox/config"
    )
    assert config_cache.cache_dir({}) is None


def test_the_cache_of_any_run_of_this_user_is_named(tmp_path: Path) -> None:
    """What no write grant may reach: this run's cache, and those of runs of the same
    user with or without XDG_CACHE_HOME and HOME."""
    user_home = pwd.getpwuid(os.getuid()).pw_dir  # as /etc/passwd lists it, here
    environ = {"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    assert config_cache.cache_dirs_of_any_run(environ) == list(
        dict.fromkeys(
            [
                f"{tmp_path}/xdg/pynox",
                f"{tmp_path}/home/.cache/pynox",
                f"{user_home}/.cache/pynox",
            ]
        )
    )
    assert config_cache.cache_dirs_of_any_run({}) == [f"{user_home}/.cache/pynox"]


def test_every_module_that_decides_what_a_file_means_stamps_its_entry() -> None:
    """A changed bound (say the smallest memory limit) must not leave entries that a
    pynox with the old one validated; only modules that word messages may be left out."""
    code = (
        "import sys\n"
        "from pynox.policy import config\n"
        'text = b\'[permissions]\\nmemory = "64m"\\nallow_read = ["~/x"]\\n\'\n'
        "config.parse_config_bytes(text, '/p/pynox.toml', {'HOME': '/h'})\n"
        "print(*(m.__file__ for m in list(sys.modules.values())"
        " if m.__name__.startswith('pynox.')))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-I", "-c", code], capture_output=True, check=True, text=True
    ).stdout.split()
    here = Path(config_cache.__file__).parent
    stamped = {(here / name).resolve() for name in config_cache._VALIDATING_MODULES}
    wording = {"errors.py", "unit_format.py", "cache.py", "__init__.py"}
    unstamped = [
        f for f in loaded if Path(f).resolve() not in stamped and Path(f).name not in wording
    ]
    assert unstamped == []


def test_second_load_uses_the_cache(
    project: Path, environ: dict[str, str], parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    assert parses == [path]
    entry = entry_for(path, environ)
    assert entry.is_file()

    def no_parsing(raw: bytes, path: str, environ: dict[str, str]) -> Config:
        raise AssertionError("parsed although the cache was fresh")

    monkeypatch.setattr(config, "parse_config_bytes", no_parsing)
    second = load_config(path, environ)
    assert second == first
    assert second.permissions.memory == 512 << 20


def test_cache_file_and_directory_modes(project: Path, environ: dict[str, str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    entry = entry_for(path, environ)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert stat.S_IMODE(entry.parent.stat().st_mode) & 0o077 == 0
    assert stat.S_IMODE(entry.parent.parent.stat().st_mode) & 0o077 == 0
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no temporary files left


def test_changed_file_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n')
    assert load_config(path, environ).permissions.timeout == 5.0
    write_config(project, '[permissions]\ntimeout = "50s"\n')
    assert load_config(path, environ).permissions.timeout == 50.0
    assert len(parses) == 2


def test_same_size_and_mtime_but_replaced_file_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n', mtime=SOME_MTIME)
    load_config(path, environ)
    replacement = project / "new.toml"
    replacement.write_text('[permissions]\ntimeout = "6s"\n')  # same size
    os.utime(replacement, (SOME_MTIME, SOME_MTIME))  # same mtime
    os.replace(replacement, path)
    assert load_config(path, environ).permissions.timeout == 6.0
    assert len(parses) == 2


def test_same_size_and_mtime_edited_in_place_is_parsed_again(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    # Size, mtime, inode and device all stay (as after a rewrite within one timestamp
    # tick, or `cp -p`): only the bytes tell.
    path = write_config(project, '[permissions]\ntimeout = "5s"\n', mtime=SOME_MTIME)
    before = os.stat(path)
    load_config(path, environ)
    write_config(project, '[permissions]\ntimeout = "7s"\n', mtime=SOME_MTIME)
    after = os.stat(path)
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert load_config(path, environ).permissions.timeout == 7.0
    assert len(parses) == 2


def test_an_edit_during_the_parse_never_leaves_a_wrong_entry(
    project: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    old_text = '[permissions]\ntimeout = "5s"\n'
    path = write_config(project, old_text)
    edited: list[bool] = []

    def edit_once() -> None:
        if not edited:
            edited.append(True)
            write_config(project, '[permissions]\ntimeout = "9s"\n')

    # The edit lands just after the cache has read the file, before any parsing.
    parse_file, parse_bytes = config.parse_config_file, config.parse_config_bytes

    def file_then_edit(path: str, environ: dict[str, str]) -> Config:
        edit_once()
        return parse_file(path, environ)

    def bytes_then_edit(raw: bytes, path: str, environ: dict[str, str]) -> Config:
        edit_once()
        return parse_bytes(raw, path, environ)

    monkeypatch.setattr(config, "parse_config_file", file_then_edit)
    monkeypatch.setattr(config, "parse_config_bytes", bytes_then_edit)
    load_config(path, environ)
    write_config(project, old_text)  # back to the bytes the cache read
    assert load_config(path, environ).permissions.timeout == 5.0


def test_a_file_written_just_now_is_cached(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\ntimeout = "5s"\n')
    load_config(path, environ)
    load_config(path, environ)
    assert len(parses) == 1
    assert entry_for(path, environ).is_file()


def test_change_of_home_is_parsed_again(
    project: Path, environ: dict[str, str], tmp_path: Path, parses: list[str]
) -> None:
    path = write_config(project, '[permissions]\nallow_read = ["~/data"]\n')
    assert load_config(path, environ).permissions.allow_read == [f"{environ['HOME']}/data"]
    other_home = {**environ, "HOME": str(tmp_path / "other")}
    assert load_config(path, other_home).permissions.allow_read == [f"{tmp_path}/other/data"]
    assert len(parses) == 2


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"garbage",
        b"\xff" * 64,
        marshal.dumps([1, 2, 3]),
        marshal.dumps((1, 2)),
        marshal.dumps("abc"),
    ],
)
def test_corrupt_cache_file_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str], content: bytes
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    entry = entry_for(path, environ)
    entry.write_bytes(content)
    assert load_config(path, environ) == first
    assert len(parses) == 2
    # ... and the entry is written again, good this time.
    assert load_config(path, environ) == first
    assert len(parses) == 2


def test_cache_entry_of_the_wrong_shape_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    first = load_config(path, environ)
    entry = entry_for(path, environ)
    version, key, raw, data = marshal.loads(entry.read_bytes())
    data["permissions"]["memory"] = "a lot"
    entry.write_bytes(marshal.dumps((version, key, raw, data)))
    assert load_config(path, environ) == first
    assert len(parses) == 2


def test_cache_entry_others_can_write_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str]
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    entry = entry_for(path, environ)
    entry.chmod(0o666)
    load_config(path, environ)
    assert len(parses) == 2


def test_cache_from_another_format_version_is_ignored(
    project: Path, environ: dict[str, str], parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    monkeypatch.setattr(config_cache, "CACHE_FORMAT", config_cache.CACHE_FORMAT + 1)
    load_config(path, environ)
    assert len(parses) == 2


def test_unwritable_cache_is_fine(
    project: Path, environ: dict[str, str], tmp_path: Path, parses: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    environ = {**environ, "XDG_CACHE_HOME": str(blocker)}  # mkdir below a file fails
    path = write_config(project, FULL_EXAMPLE)
    assert load_config(path, environ).pool.workers == 4
    assert load_config(path, environ).pool.workers == 4
    assert len(parses) == 2


def test_missing_home_does_not_get_created(
    project: Path, tmp_path: Path, parses: list[str]
) -> None:
    environ = {"HOME": str(tmp_path / "no-home")}
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, environ)
    assert not (tmp_path / "no-home").exists()


def test_no_cache_location_means_parsing(project: Path, parses: list[str]) -> None:
    path = write_config(project, FULL_EXAMPLE)
    load_config(path, {})
    load_config(path, {})
    assert len(parses) == 2


def test_long_paths_are_not_cached(
    tmp_path: Path, environ: dict[str, str], parses: list[str]
) -> None:
    deep = tmp_path / ("d" * 100) / ("e" * 100)
    deep.mkdir(parents=True)
    path = write_config(deep, FULL_EXAMPLE)
    load_config(path, environ)
    load_config(path, environ)
    assert len(parses) == 2
    cache = config_cache.cache_dir(environ)
    assert cache is None or not os.path.exists(cache) or os.listdir(cache) == []


def test_percent_in_path_does_not_collide(
    tmp_path: Path, environ: dict[str, str], parses: list[str]
) -> None:
    # "a%2Fb/pynox.toml" and "a/b/pynox.toml" must get different entries.
    one = tmp_path / "a%2Fb"
    two = tmp_path / "a" / "b"
    one.mkdir()
    two.mkdir(parents=True)
    first = write_config(one, '[permissions]\ntimeout = "1s"\n')
    second = write_config(two, '[permissions]\ntimeout = "2s"\n')
    assert load_config(first, environ).permissions.timeout == 1.0
    assert load_config(second, environ).permissions.timeout == 2.0
    assert load_config(first, environ).permissions.timeout == 1.0
    assert load_config(second, environ).permissions.timeout == 2.0
    assert len(parses) == 2
    assert entry_for(first, environ).name.startswith("%2F")
    assert "%252F" in entry_for(first, environ).name


def test_cache_drops_entries_of_deleted_files_and_keeps_a_bounded_number(
    tmp_path: Path, environ: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = Path(config_cache.cache_dir(environ) or "")
    paths = []
    for n in range(4):
        path = tmp_path / f"project-{n}" / "pynox.toml"
        path.parent.mkdir()
        path.write_text('[permissions]\nallow_env = ["A"]\n')
        paths.append(path)
    load_config(str(paths[0]), environ)
    load_config(str(paths[1]), environ)
    assert len(list(directory.iterdir())) == 2
    paths[0].unlink()  # a project (or a temporary directory) that is gone
    load_config(str(paths[2]), environ)
    entries = sorted(p.name for p in directory.iterdir())
    assert len(entries) == 2 and not any("project-0" in name for name in entries)
    monkeypatch.setattr(cache_writer, "_MAX_ENTRIES", 2)
    load_config(str(paths[3]), environ)
    entries = sorted(p.name for p in directory.iterdir())
    assert len(entries) == 2 and any("project-3" in name for name in entries)
