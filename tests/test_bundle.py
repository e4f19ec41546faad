"""Bundles: pack-runtime, the assembled layout, the manifest, byte-reproducibility.

The session builds one runtime with pack-runtime from the CPython running the
tests, and the bundle twice from it: once through PYNOX_RUNTIME, once through
the loopback mirror. Both must be the same bytes.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

import pytest
from support.bundles import PROJECT, extract
from support.bundles.artifacts import (
    SHARES_BUNDLES,
    Bundles,
    Runtime,
    bundler,
    bundles,
    clean_env,
    host_target,
    minor,
    runtime,
    throwaway_key,
)

pytestmark = SHARES_BUNDLES  # the bundles' tests run on one worker

# Building the bundles takes half a minute per CPython: the primary CPython runs these
# (nox's `tests` session) and the conformance cell installs a bundle of its own.
BUILDS_BUNDLES = pytest.mark.slow


@pytest.fixture(scope="session")
def packed(tmp_path_factory: pytest.TempPathFactory) -> Runtime:
    return runtime(tmp_path_factory)


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return bundles(tmp_path_factory)


def members(archive: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(archive) as tar:
        return tar.getmembers()


def differing(one: Path, two: Path) -> list[str]:
    """The paths whose sha256 differs between two bundles' manifests."""
    found = []
    for archive in (one, two):
        with tarfile.open(archive) as tar:
            member = next(m for m in tar.getmembers() if m.name.endswith("/MANIFEST.json"))
            found.append(json.loads(tar.extractfile(member).read())["files"])  # type: ignore[union-attr]
    return sorted(
        k for k in found[0].keys() | found[1].keys() if found[0].get(k) != found[1].get(k)
    )


def test_pack_runtime_has_the_pbs_layout(packed: Runtime) -> None:
    names = {m.name: m for m in members(packed.archive)}
    x = minor()
    assert names[f"python/bin/python{x}"].isreg()
    assert names["python/bin/python3"].issym()
    assert names["python/bin/python3"].linkname == f"python{x}"
    assert f"python/lib/python{x}/os.py" in names
    assert f"python/include/python{x}/Python.h" in names
    assert f"python/include/python{x}/patchlevel.h" in names
    site = f"python/lib/python{x}/site-packages/"
    assert [n for n in names if n.startswith(site)] == [site + "README.txt"] or not [
        n for n in names if n.startswith(site) and not n.endswith("README.txt")
    ]
    assert not [n for n in names if "/__pycache__/" in n or n.endswith(".pyc")]
    assert f"python/lib/python{x}/test/__init__.py" not in names
    if any(n.startswith(f"python/lib/libpython{x}") for n in names):
        assert names[f"python/lib/libpython{x}.so"].issym()


def test_packed_runtime_is_relocatable(packed: Runtime, tmp_path: Path) -> None:
    extract(packed.archive, tmp_path / "first")
    moved = tmp_path / "moved"
    shutil.move(tmp_path / "first", moved)
    python = moved / "python" / "bin" / "python3"
    done = subprocess.run(
        [
            str(python),
            "-c",
            "import sys, json, ssl, sqlite3, ctypes; print(json.dumps(sys.prefix))",
        ],
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == str(moved / "python")
    from bundler import elf

    binary = elf.read(moved / "python" / "bin" / f"python{minor()}")
    assert binary is not None
    if any(n.startswith("libpython") for n in binary.needed):
        assert binary.runpath == "$ORIGIN/../lib"
        if shutil.which("readelf"):
            dynamic = subprocess.run(
                ["readelf", "-d", str(moved / "python/bin/python3")], capture_output=True, text=True
            ).stdout
            assert "Library runpath: [$ORIGIN/../lib]" in dynamic


@pytest.mark.slow
def test_bundles_are_byte_reproducible(built: Bundles) -> None:
    """Built twice, in other scratch folders, from the archive and through the mirror."""
    one, two = built.from_archive, built.from_mirror
    assert one.name == two.name
    assert one.read_bytes() == two.read_bytes(), f"files that differ: {differing(one, two)}"
    assert Path(f"{one}.sha256").read_text() == Path(f"{two}.sha256").read_text()
    digest = hashlib.sha256(one.read_bytes()).hexdigest()
    assert Path(f"{one}.sha256").read_text() == f"{digest}  {one.name}\n"
    assert built.mirror_requests == 1, "the mirror served the runtime once"


@BUILDS_BUNDLES
def test_archive_metadata_is_normalized(built: Bundles) -> None:
    raw = built.from_archive.read_bytes()
    assert raw[:3] == b"\x1f\x8b\x08"
    assert raw[3] & 0x08 == 0, "no file name in the gzip header"
    assert raw[4:8] == b"\0\0\0\0", "no time in the gzip header"
    found = members(built.from_archive)
    names = [m.name for m in found]
    assert names == sorted(names)
    assert len({m.mtime for m in found}) == 1
    assert {(m.uid, m.gid, m.uname, m.gname) for m in found} == {(0, 0, "", "")}
    assert {m.mode for m in found} <= {0o755, 0o644, 0o777}


@BUILDS_BUNDLES
def test_bundle_layout(built: Bundles) -> None:
    top = built.from_archive.name.removesuffix(".tar.gz")
    assert (
        top == f"pynox-0.1.0-{top.split('-', 2)[2].rsplit('-', 1)[0]}-cp{minor().replace('.', '')}"
    )
    names = {
        PurePosixPath(n).relative_to(top).as_posix()
        for n in (m.name for m in members(built.from_archive))
        if n != top
    }
    x = minor()
    site = f"python/lib/python{x}/site-packages"
    assert "bin/pynox" in names
    assert f"{site}/pynox/cli/main.py" in names
    assert f"{site}/pynox-json.pth" in names  # json.dump's fast path under --no-sandbox
    assert f"{site}/_pynox_json.py" in names
    assert any(n.startswith(f"{site}/pynox/_core.cpython-") and n.endswith(".so") for n in names)
    assert any(n.startswith(f"{site}/_cffi_backend.cpython-") for n in names)
    assert f"python/lib/python{x}/__pycache__/os.cpython-{x.replace('.', '')}.pyc" in names
    assert {
        "licenses/CPython-LICENSE.txt",
        "licenses/runtime-NOTICE.txt",
        "licenses/pynox-LICENSE.txt",
        "MANIFEST.json",
    } <= names
    assert any(n.startswith("licenses/cffi-") for n in names)
    for left_out in ("test", "idlelib", "tkinter", "ensurepip/_bundled", "turtledemo"):
        assert not [n for n in names if n.startswith(f"python/lib/python{x}/{left_out}/")], left_out
    tag = f"cpython-{x.replace('.', '')}"
    assert f"{site}/__pycache__/_pynox_json.{tag}.pyc" in names
    assert not [
        n
        for n in names
        if n.startswith(f"{site}/")
        and n.split("/")[4]
        not in ("pynox", "README.txt", "tomli", "pynox-json.pth", "_pynox_json.py", "__pycache__")
        and not n.split("/")[4].startswith("_cffi_backend")
    ]
    # site-packages' own __pycache__ holds the hook module's bytecode and nothing else.
    assert {n for n in names if n.startswith(f"{site}/__pycache__/")} == {
        f"{site}/__pycache__/_pynox_json.{tag}.pyc"
    }


@BUILDS_BUNDLES
def test_manifest_lists_every_file(built: Bundles, tmp_path: Path) -> None:
    extract(built.from_archive, tmp_path)
    root = next(tmp_path.iterdir())
    document = json.loads((root / "MANIFEST.json").read_text())
    assert document["python"] == ".".join(map(str, sys.version_info[:3]))
    assert document["python_tag"] == "cp" + minor().replace(".", "")
    assert document["version"] == "0.1.0"
    assert document["bytecode"] == "unchecked-hash"
    assert document["kernel_min"] == "6.2"
    assert document["cffi"]
    assert any(e.startswith("pynox/_core.") for e in document["extensions"])
    on_disk = {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.name != "MANIFEST.json"
    }
    assert document["files"] == on_disk
    # Manifest fields install.sh reads with sed: one top-level scalar per line.
    text = (root / "MANIFEST.json").read_text()
    for key in ("version", "arch", "libc", "kernel_min"):
        assert f'\n  "{key}": "{document[key]}",\n' in text


@BUILDS_BUNDLES
def test_sbom_names_every_part_and_its_licence_files(
    built: Bundles, packed: Runtime, tmp_path: Path
) -> None:
    """The bundle's SBOM is valid CycloneDX; its licence files are in the bundle."""
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    extract(built.from_archive, tmp_path)
    root = next(tmp_path.iterdir())
    text = (root / "SBOM.cdx.json").read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    document = json.loads(text)
    assert json.loads((root / "MANIFEST.json").read_text())["sbom"] == "SBOM.cdx.json"
    found = {c["bom-ref"]: c for c in document["components"]}
    values = {
        ref: {p["name"]: p["value"] for p in c.get("properties", [])} for ref, c in found.items()
    }
    # Built from PYNOX_RUNTIME, an archive with the sha256 the test's dist-config pins:
    # it is named as that release's asset (a local archive of other bytes says "local").
    assert found["cpython"]["version"] == packed.version
    assert values["cpython"]["pynox:runtime:release"] == "test"
    assert values["cpython"]["pynox:runtime:asset"] == packed.archive.name
    assert values["cpython"]["pynox:runtime:sha256"] == packed.sha256
    assert found["pypi:pynox"]["version"] == "0.1.0"
    assert found["pypi:cffi"]["purl"].startswith("pkg:pypi/cffi@")
    assert ("pypi:tomli" in found) == (minor() == "3.10")
    named = [
        p["value"]
        for c in found.values()
        for p in c.get("properties", [])
        if p["name"] == "pynox:license-file"
    ]
    assert "licenses/CPython-LICENSE.txt" in named
    assert [n for n in named if n.startswith("licenses/cffi-")]
    for path in named:
        assert (root / path).is_file(), path
    # Every library the packed runtime carries from its build machine is a component.
    carried = sorted(p.name for p in (root / "python" / "lib").glob("lib*.so*"))
    carried = [name for name in carried if not name.startswith("libpython")]
    assert carried, "the packed CPython links host libraries, which the bundle carries"
    assert sorted(
        ref.removeprefix("vendored:") for ref in found if ref.startswith("vendored:")
    ) == (carried)


def test_user_errors_are_one_line(packed: Runtime) -> None:
    env = clean_env(PYNOX_DIST_CONFIG=str(packed.config), PYNOX_RUNTIME=str(packed.archive))
    own, _ = host_target()
    other = (
        own.replace("x86_64", "aarch64")
        if own.startswith("x86_64")
        else own.replace("aarch64", "x86_64")
    )
    for args, expected in (
        (["bundle", "--target", "sparc-linux-gnu"], "unknown target 'sparc-linux-gnu'"),
        (
            ["bundle", "--target", other],
            f"not {other}; give a runtime for {other}, or build for the runtime's own target"
            f" with --target {own}",
        ),
        (["bundle", "--python", "3.9"], f"is CPython {packed.version}, not 3.9"),
        (
            ["pack-runtime", "--python", "/nonexistent/python", "--output", "x.tar.gz"],
            "cannot run /nonexistent/python",
        ),
    ):
        done = bundler(args, env, timeout=120)
        assert done.returncode == 1, done.stderr
        assert "Traceback" not in done.stderr
        lines = done.stderr.strip().splitlines()
        assert lines[-1].startswith("bundler: ") and expected in lines[-1], done.stderr


def test_a_work_folder_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    """The bundler unpacks into WORK/runtime, replacing what is there: never a user's."""
    work = tmp_path / "project"
    (work / "runtime").mkdir(parents=True)
    (work / "runtime" / "sandbox.c").write_text("precious\n")
    runtime = tmp_path / "runtime.tar.gz"
    with tarfile.open(runtime, "w:gz") as tar:
        tar.add(work / "runtime", "python")
    env = clean_env(PYNOX_RUNTIME=str(runtime))
    done = bundler(["bundle", "--work", str(work), "--out", str(tmp_path / "out")], env)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bundler: the --work folder {work} is not empty; give a new or empty folder,"
        " or leave --work out for a temporary one"
    ]
    assert (work / "runtime" / "sandbox.c").read_text() == "precious\n"


@pytest.mark.parametrize("command", ["pack-runtime", "bundle", "wheel"])
def test_an_output_path_of_the_wrong_kind_is_refused_before_the_work(
    tmp_path: Path, command: str
) -> None:
    """Not a traceback at the end of the build, nor a half-written archive left beside."""
    folder, file = tmp_path / "folder", tmp_path / "file"
    folder.mkdir()
    file.write_text("mine\n")
    if command == "pack-runtime":
        args = ["pack-runtime", "--python", sys.executable, "--output", str(folder)]
        expected = (
            f"bundler: --output {folder} is a folder; give the archive to write, such as"
            f" {folder}/cpython.tar.gz"
        )
    else:
        args = [command, "--out", str(file)]
        expected = f"bundler: --out {file} is a file; give the folder to write into"
    done = bundler(args, clean_env(), timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "folder"]
    assert file.read_text() == "mine\n" and list(folder.iterdir()) == []


@pytest.mark.parametrize("command", ["bundle", "wheel"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_work(
    tmp_path: Path, command: str
) -> None:
    """Not a traceback once the build is done, when the archive is written."""
    file = tmp_path / "file"
    file.write_text("mine\n")
    offline = clean_env(PYNOX_PBS_MIRROR="http://127.0.0.1:9")  # nothing is fetched
    done = bundler([command, "--out", str(file / "dist")], offline, timeout=120)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"bundler: cannot write into --out {file}/dist (Not a directory); give a folder you"
        " may write to"
    ]


def test_a_full_disk_under_the_archive_is_one_sentence(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Nothing half-written is left, and gzip's buffer does not fail again, noisily."""
    import gc

    from bundler.archive import write_tar_gz
    from bundler.errors import BundlerError

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "data").write_bytes(os.urandom(300_000))  # more than gzip and tar buffer
    output = tmp_path / "out" / "bundle.tar.gz"
    output.parent.mkdir()
    temporary = output.with_name("bundle.tar.gz.tmp")
    temporary.symlink_to("/dev/full")  # every write there fails with ENOSPC
    with pytest.raises(BundlerError) as caught:
        write_tar_gz(tree, "top", output, 0)
    gc.collect()
    assert str(caught.value) == (
        f"cannot write {output} (No space left on device); make room there, or write it to"
        " another folder"
    )
    assert list(output.parent.iterdir()) == []
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("where", ["unpacking", "copying"])
def test_a_work_folder_whose_disk_fills_up_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Not "give a python-build-standalone .tar.gz whole", nor copytree's list of every
    file it could not copy: the disk is named, with what to do."""
    import errno
    import io

    from bundler import fetch, pipeline
    from bundler.digest import sha256_file
    from bundler.errors import BundlerError

    runtime = tmp_path / "runtime.tar.gz"
    with tarfile.open(runtime, "w:gz") as tar:
        tar.addfile(tarfile.TarInfo("python/x"), io.BytesIO(b""))
    source = fetch.RuntimeSource("archive", runtime, runtime.name, sha256_file(runtime), "here")
    monkeypatch.setattr(fetch, "resolve", lambda *args, **kwargs: source)
    full = os.strerror(errno.ENOSPC)
    if where == "unpacking":

        def no_room(*args: object, **kwargs: object) -> None:
            raise OSError(errno.ENOSPC, full)

        monkeypatch.setattr(tarfile.TarFile, "extractall", no_room)
    else:

        def copytree_failed(*args: object) -> None:
            raise shutil.Error([(f"a{n}", f"b{n}", f"[Errno 28] {full}: 'a{n}'") for n in range(9)])

        monkeypatch.setattr(pipeline.runtime_layout, "inspect", copytree_failed)
    work = tmp_path / "work"
    request = pipeline.Request(None, None, None, None, None)
    with pytest.raises(BundlerError) as caught:
        pipeline.bundle(request, tmp_path / "out", work)
    assert str(caught.value) == (
        f"cannot build in {work} ({full}); make room there, or give --work a folder on a disk"
        " with more room"
    )


@pytest.mark.parametrize("command", ["pack-runtime", "wheel"])
def test_a_tmpdir_whose_disk_fills_up_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """pack-runtime and wheel work in TMPDIR too: its disk is named, not a traceback."""
    import errno
    import tempfile

    from bundler import pack_runtime, wheel
    from bundler.errors import BundlerError

    def no_room(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(BundlerError) as caught:
        if command == "pack-runtime":
            monkeypatch.setattr(pack_runtime, "stage", no_room)
            pack_runtime.pack_runtime(sys.executable, tmp_path / "cpython.tar.gz")
        else:
            monkeypatch.setattr(wheel, "build_raw", no_room)
            wheel.build_wheel(tmp_path / "dist", "native")
    assert str(caught.value) == (
        f"cannot build in {tmp_path} (No space left on device); make room there, or set TMPDIR"
        " to a folder on a disk with more room"
    )
    assert list(tmp_path.iterdir()) == [], "the scratch folder is removed"


@BUILDS_BUNDLES
def test_a_work_folder_mounted_noexec_is_named_not_a_bundle_without_bytecode(
    packed: Runtime, tmp_path: Path
) -> None:
    """Hardened build hosts mount /tmp noexec. The runtime's own interpreter cannot run
    there to compile the bundle's Python files: the build stops and says why, instead of
    writing a bundle whose every run starts slower."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    folder = tmp_path / "noexec"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512m,noexec", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        env = clean_env(
            XDG_CACHE_HOME=str(packed.cache),
            PYNOX_DIST_CONFIG=str(packed.config),
            PYNOX_RUNTIME=str(packed.archive),
        )
        args = ["bundle", "--out", str(tmp_path / "dist"), "--python", minor()]
        done = bundler([*args, "--compiler", "native", "--work", str(folder / "work")], env)
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=True, timeout=60)
    assert done.returncode == 1, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert line.startswith(f"bundler: the bundle's own python{minor()} does not run on this")
    assert line.endswith(
        ": Permission denied), so its Python files cannot be compiled; if the work folder is on"
        " a file system mounted noexec, set TMPDIR (or --work) to a folder on another one"
    )
    assert list((tmp_path / "dist").iterdir()) == []


def test_a_wheelhouse_that_is_not_a_folder_is_refused_before_the_work(tmp_path: Path) -> None:
    """Not once the runtime was fetched and built, when the first wheel is wanted."""
    missing = tmp_path / "wheels"
    done = bundler(["bundle", "--wheelhouse", str(missing), "--out", str(tmp_path)], clean_env())
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"bundler: --wheelhouse {missing} is not a folder; give the folder of wheels"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("damage", ["truncated", "other-bytes"])
def test_a_wheel_whose_sha256_is_not_the_pinned_one_is_refused(tmp_path: Path, damage: str) -> None:
    """Whatever lies in the wheelhouse under the pinned wheel's name (cut short when it was
    copied, or another build): never shipped, and named with what to do."""
    import zipfile

    from bundler import config, wheel_pins, wheelhouse
    from bundler.errors import BundlerError

    target = config.load_matrix().target(host_target()[0])
    pin = wheel_pins.pin("cffi", target.name, minor())
    wheel = tmp_path / pin.name
    tag = f"cp{minor().replace('.', '')}"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"_cffi_backend.{tag}-x86_64-linux-gnu.so", b"\x7fELF" + b"x" * 4000)
    if damage == "truncated":
        wheel.write_bytes(wheel.read_bytes()[:100])
    with pytest.raises(BundlerError) as caught:
        wheelhouse.cffi_backend(target, minor(), tmp_path)
    found = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert str(caught.value) == (
        f"{wheel} has sha256 {found}, not the {pin.sha256} that wheels.toml pins (from "
        f"https://pypi.org/simple/cffi/); delete it, and put the wheel from {pin.url} there or "
        "let the bundler download it again"
    )


def test_a_wheel_swapped_after_its_check_is_not_what_the_bundle_takes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program granted the wheel cache could replace a wheel between the check of its
    sha256 and the reading of its files: the bundle takes the bytes that were checked."""
    import dataclasses
    import zipfile

    from bundler import config, wheel_pins, wheelhouse

    target = config.load_matrix().target(host_target()[0])
    tag = f"cp{minor().replace('.', '')}"
    module = f"_cffi_backend.{tag}-x86_64-linux-gnu.so"
    real = wheel_pins.pin("cffi", target.name, minor())
    made = {}
    for kind in ("checked", "swapped"):
        made[kind] = tmp_path / kind
        with zipfile.ZipFile(made[kind], "w") as archive:
            archive.writestr(module, f"\x7fELF {kind}".encode())
    checked_sha256 = hashlib.sha256(made["checked"].read_bytes()).hexdigest()
    pinned = dataclasses.replace(real, sha256=checked_sha256)
    monkeypatch.setattr(wheelhouse, "pin", lambda *args: pinned)
    (tmp_path / "wheels").mkdir()
    wheel = tmp_path / "wheels" / real.name
    made["checked"].replace(wheel)
    opened = zipfile.ZipFile

    def swap_then_open(*args: object, **kwargs: object) -> zipfile.ZipFile:
        if made["swapped"].exists():
            made["swapped"].replace(wheel)  # another process, just after the check
        return opened(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(zipfile, "ZipFile", swap_then_open)
    found = wheelhouse.cffi_backend(target, minor(), tmp_path / "wheels")
    assert found.files == {module: b"\x7fELF checked"}
    assert found.sha256 == checked_sha256
    assert not made["swapped"].exists(), "the swap happened"


def test_a_wheelhouse_without_the_pinned_wheel_names_the_file_to_put_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An air-gapped build host learns which file to fetch elsewhere, and from where."""
    from bundler import config, wheel_pins, wheelhouse
    from bundler.errors import BundlerError

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "wheels").mkdir()
    target = config.load_matrix().target(host_target()[0])
    pin = wheel_pins.pin("cffi", target.name, minor())
    with pytest.raises(BundlerError) as caught:
        wheelhouse.cffi_backend(target, minor(), tmp_path / "wheels")
    message = str(caught.value)
    assert message.startswith(f"cannot get {pin.name} from the folder {tmp_path / 'wheels'} (")
    assert message.endswith(
        f"); put that file, from {pin.url}, in a folder and pass --wheelhouse FOLDER"
    )


def test_every_wheel_a_bundle_takes_is_pinned_from_pypi() -> None:
    """cffi for each target and CPython minor of the matrix, tomli for 3.10: each with its
    PyPI URL and a sha256, of the version packages.toml names (not the build host's)."""
    from bundler import wheel_pins

    wanted = wheel_pins.wanted_wheels()
    for project, target, python, _ in wanted:
        pin = wheel_pins.pin(project, target, python)
        assert pin.version == wheel_pins.version(project)
        assert pin.url.startswith(wheel_pins.PYPI_FILES) and pin.url.endswith("/" + pin.name)
        assert len(pin.sha256) == 64 and int(pin.sha256, 16) >= 0
        assert pin.source == f"https://pypi.org/simple/{project}/"
    # As refresh-wheel-pins writes it: the file holds these pins and nothing else.
    pins = [wheel_pins.pin(project, target, python) for project, target, python, _ in wanted]
    assert (PROJECT / "dist-config" / "wheels.toml").read_text() == wheel_pins.render(pins)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["bundle", "--compiler", "gcc"],
            ("bundler: argument --compiler: invalid choice: 'gcc'", "bundler bundle --help`"),
        ),
        (["bundel"], ("bundler: argument COMMAND: invalid choice: 'bundel'", "bundler --help`")),
    ],
)
def test_a_usage_error_is_one_line(args: list[str], expected: tuple[str, str]) -> None:
    """As every other failure of the bundler: one line, `bundler: ...`, exit status 1."""
    done = bundler(args, clean_env())
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(expected[0]) and lines[0].endswith(expected[1]), done.stderr


def test_a_reader_that_stops_early_is_no_traceback() -> None:
    """`python -m bundler targets | head -1`: the pipe closes; the bundler says nothing."""
    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bundler", "targets"],
            cwd=PROJECT,
            env=clean_env(),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (1, "")


def test_a_cell_the_matrix_lacks_is_named_with_the_ones_it_has() -> None:
    """`make bundle TARGET=... PYTHON=...` checks the cell first: nox would only say it has
    no session of that name."""
    found = bundler(["targets", "--has", "x86_64-linux-musl", "3.12"], clean_env(), timeout=60)
    assert (found.returncode, found.stdout, found.stderr) == (0, "", "")
    missing = bundler(["targets", "--has", "x86_64-linux", "3.9"], clean_env(), timeout=60)
    assert missing.returncode == 1
    assert missing.stderr == (
        "bundler: no bundle for TARGET=x86_64-linux PYTHON=3.9; give TARGET as one of "
        "x86_64-linux-gnu, aarch64-linux-gnu, x86_64-linux-musl, aarch64-linux-musl, and "
        "PYTHON as one of 3.10, 3.11, 3.12, 3.13, 3.14\n"
    )
    recipe = (PROJECT / "Makefile").read_text().split("\nbundle:")[1].split("\n\n")[0]
    assert recipe.index("targets --has") < recipe.index("nox -s")


def test_elf_reader_agrees_with_readelf() -> None:
    if not shutil.which("readelf"):
        pytest.skip("readelf (binutils) is not installed")
    from bundler import elf

    path = Path(os.path.realpath(sys.executable))
    info = elf.read(path)
    assert info is not None
    dynamic = subprocess.run(
        ["readelf", "-d", "-V", str(path)], capture_output=True, text=True
    ).stdout
    for needed in info.needed:
        assert f"Shared library: [{needed}]" in dynamic
    if info.runpath:
        assert f"[{info.runpath}]" in dynamic
    for version in info.versions:
        assert version in dynamic


def test_conformance_cells_come_from_dist_config() -> None:
    """Each cell once, in dist-config/conformance.toml: the runner and nox read the same."""
    from bundler.config import load_matrix
    from bundler.conformance import cells

    listed = cells.names()
    assert listed and len(set(listed)) == len(listed)
    targets = {target.name: target for target in load_matrix().targets}
    for cell in cells.load():
        assert targets[cell.target].arch == cell.cpu
        assert cell.platform in ("linux/amd64", "linux/arm64")
        assert cell.runtime in cells.RUNTIMES
    done = subprocess.run(
        [sys.executable, "-m", "bundler.conformance", "no-such-cell"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and ", ".join(listed) in done.stderr, done.stderr


def test_prune_rules() -> None:
    from bundler.prune import dropped

    x = "lib/python3.12"
    for path in (
        f"{x}/test",
        f"{x}/idlelib",
        f"{x}/ensurepip/_bundled",
        f"{x}/__pycache__",
        f"{x}/site-packages/pip",
        f"{x}/lib-dynload/_testcapi.cpython-312-x.so",
        "share",
        "bin/idle3",
        "lib/tcl8.6",
        f"{x}/config-3.12-x/libpython3.12.a",
    ):
        assert dropped(PurePosixPath(path)), path
    for path in (
        f"{x}/os.py",
        f"{x}/ensurepip/__init__.py",
        f"{x}/site-packages/README.txt",
        f"{x}/lib-dynload/_ssl.cpython-312-x.so",
        "bin/python3.12",
        "include/python3.12",
        f"{x}/unittest/__init__.py",
        "lib/libpython3.12.so.1.0",
    ):
        assert not dropped(PurePosixPath(path)), path


def test_archive_writer_is_deterministic(tmp_path: Path) -> None:
    from bundler.archive import write_tar_gz
    from bundler.errors import BundlerError

    tree = tmp_path / "tree"
    (tree / "b").mkdir(parents=True)
    (tree / "b" / "tool").write_text("#!/bin/sh\n")
    (tree / "b" / "tool").chmod(0o700)
    (tree / "a.txt").write_text("a")
    (tree / "link").symlink_to("a.txt")
    write_tar_gz(tree, "top", tmp_path / "one.tar.gz", 1_700_000_000)
    os.utime(tree / "a.txt", (1, 1))
    (tree / "a.txt").chmod(0o600)
    write_tar_gz(tree, "top", tmp_path / "two.tar.gz", 1_700_000_000)
    assert (tmp_path / "one.tar.gz").read_bytes() == (tmp_path / "two.tar.gz").read_bytes()
    with tarfile.open(tmp_path / "one.tar.gz") as tar:
        listed = {m.name: m for m in tar.getmembers()}
    assert list(listed) == ["top", "top/a.txt", "top/b", "top/b/tool", "top/link"]
    assert listed["top/b/tool"].mode == 0o755 and listed["top/a.txt"].mode == 0o644
    assert gzip.decompress((tmp_path / "one.tar.gz").read_bytes())  # a valid gzip stream
    # A write that fails (here a FIFO the writer refuses) leaves no half-written file.
    os.mkfifo(tree / "fifo")
    with pytest.raises(BundlerError, match="is neither a file, a folder nor a link"):
        write_tar_gz(tree, "top", tmp_path / "three.tar.gz", 1_700_000_000)
    assert not list(tmp_path.glob("three*"))


def test_pyc_normalization_removes_reference_count_noise() -> None:
    """On 3.10 and 3.11 what else the process holds changes marshal's bytes; not after this."""
    import marshal

    from bundler.pyc_normalize import NEEDS_NORMALIZING, normalize_marshal

    running = minor()
    if running not in NEEDS_NORMALIZING:
        pytest.skip(f"CPython {running} marshals interned strings the same way every time")
    source = "def f(alpha_parameter):\n    return alpha_parameter + beta_global_name\n"
    plain = marshal.dumps(compile(source, "m.py", "exec"))
    held = [sys.intern("beta_global_name"), sys.intern("alpha_parameter")]
    busy = marshal.dumps(compile(source, "m.py", "exec"))
    assert held
    assert normalize_marshal(plain, running) == normalize_marshal(busy, running)
    for module in (json, gzip, tarfile, shutil):
        path = Path(str(module.__file__))
        code = compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        canonical = normalize_marshal(marshal.dumps(code), running)
        assert marshal.loads(canonical) == code
        assert normalize_marshal(canonical, running) == canonical


@BUILDS_BUNDLES
def test_a_signing_key_signs_the_archive(built: Bundles, tmp_path: Path) -> None:
    """--sign-key (make bundle SIGN_KEY=...) writes ARCHIVE.sig for namespace pynox-bundle."""
    signature = Path(f"{built.from_archive}.sig")
    public = built.signing_key.with_name("key.pub").read_text()
    signers = tmp_path / "allowed_signers"
    signers.write_text(f'builder namespaces="pynox-bundle" {public}')
    with built.from_archive.open("rb") as archive:
        done = subprocess.run(
            ["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", "builder"]
            + ["-n", "pynox-bundle", "-s", str(signature)],
            stdin=archive,
            capture_output=True,
            text=True,
        )
    assert done.returncode == 0, done.stderr
    assert not Path(f"{built.from_mirror}.sig").exists(), "no key, no signature"


def test_a_signing_key_others_can_read_is_named_with_the_fix(tmp_path: Path) -> None:
    """ssh-keygen ignores such a key and says only "No private key found"."""
    if not shutil.which("ssh-keygen"):
        pytest.skip("ssh-keygen is not installed")
    from bundler import signing
    from bundler.errors import BundlerError

    key = throwaway_key(tmp_path / "keys")
    key.chmod(0o644)
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(b"bundle")
    expected = (
        f"the signing key {key} can be read by other users, so ssh-keygen will not use it;"
        f" chmod 600 {key}"
    )
    with pytest.raises(BundlerError) as caught:
        signing.sign(archive, key)
    assert str(caught.value) == expected
    # `bundle` says so before it fetches or builds anything.
    done = bundler(["bundle", "--sign-key", str(key), "--out", str(tmp_path / "out")], clean_env())
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"bundler: {expected}"]
    key.chmod(0o600)
    assert signing.sign(archive, key) == Path(f"{archive}.sig")


def test_a_signing_key_that_is_no_key_is_refused_before_the_build(tmp_path: Path) -> None:
    """A wrong file given as the key (a note, a certificate) was found only when the
    finished archive was to be signed."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("no ssh-keygen")
    not_a_key = tmp_path / "release-key"
    not_a_key.write_text("not a key\n")
    not_a_key.chmod(0o600)
    expected = (
        f"the signing key {not_a_key} is not an OpenSSH key; give SIGN_KEY=PRIVATE_KEY, a key"
        " that `ssh-keygen -t ed25519` made"
    )
    done = bundler(
        ["bundle", "--sign-key", str(not_a_key), "--out", str(tmp_path / "out")],
        clean_env(PYNOX_RUNTIME=str(tmp_path / "no-runtime.tar.gz")),
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"bundler: {expected}"]


def test_make_bundle_passes_sign_key_to_the_bundler() -> None:
    done = subprocess.run(
        ["make", "-n", "--no-print-directory", "bundle", "SIGN_KEY=keys/release key"],
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert '-- --sign-key "keys/release key"' in done.stdout.splitlines()[-1]


def _fake_venv(root: Path) -> Path:
    """A project environment whose python is this one and whose nox prints what reaches it
    (no build, no network); `make setup` finds it up to date."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "nox").write_text(
        '#!/bin/sh\necho "PYNOX_WHEELHOUSE=$PYNOX_WHEELHOUSE"\nprintf "%s\\n" "$@"\n'
    )
    for script in bin_dir.iterdir():
        script.chmod(0o755)
    (root / ".installed").touch()
    return root


def _make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=PROJECT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("target", ["bundle", "wheel", "wheels"])
def test_make_with_a_wheelhouse_hands_it_on(tmp_path: Path, target: str) -> None:
    """`make bundle WHEELHOUSE=FOLDER` on a host without PyPI: `make setup`'s pip and nox's
    sessions get the folder (what the sessions do with it: the test below)."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    venv = _fake_venv(tmp_path / "venv")
    done = _make(target, f"VENV={venv}", f"WHEELHOUSE={wheels}", "PYTHON=3.12")
    assert done.returncode == 0, done.stderr
    assert f"PYNOX_WHEELHOUSE={wheels}" in done.stdout.splitlines(), done.stdout
    dry = _make("-n", target, f"VENV={venv}", f"WHEELHOUSE={wheels}", "PYTHON=3.12")
    assert f'PIP_NO_INDEX=1 PIP_FIND_LINKS="{wheels}" make --no-print-directory setup' in dry.stdout
    missing = _make(target, f"VENV={venv}", f"WHEELHOUSE={tmp_path / 'nothing'}")
    assert missing.returncode != 0
    assert missing.stderr.splitlines()[0] == (
        f"make: WHEELHOUSE={tmp_path / 'nothing'} is not a folder; give the folder of wheels"
    )
    assert missing.stdout == "", "nothing ran"
    spaced = tmp_path / "my wheels"
    spaced.mkdir()
    split = _make(target, f"VENV={venv}", f"WHEELHOUSE={spaced}")
    assert split.returncode != 0
    assert split.stderr.splitlines()[0] == (
        f"make: WHEELHOUSE={spaced} holds a space: make and pip would read it as "
        "several folders; put the wheels in a folder whose path has none"
    )
    assert split.stdout == "", "nothing ran"


class _Session:
    """What a nox session function does, recorded: each command with the environment
    nox would run it in."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python
        self.posargs: list[str] = []
        self.env: dict[str, str] = {}
        self.commands: list[tuple[tuple[str, ...], dict[str, str]]] = []

    def install(self, *args: str) -> None:
        self.commands.append((("pip", "install", *args), dict(self.env)))

    def run(self, *args: str, **options: object) -> None:
        self.commands.append((args, dict(self.env)))

    def error(self, message: str) -> None:
        raise RuntimeError(message)

    def skip(self, message: str) -> None:
        raise RuntimeError(message)


def test_nox_sessions_install_from_a_wheelhouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pip of the session (its installs, those the bundler runs) reads PYNOX_WHEELHOUSE
    alone, and the bundle takes the wheels it ships from there."""
    pytest.importorskip("nox")
    import noxfile

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}
    monkeypatch.setenv("PYNOX_WHEELHOUSE", str(wheels))
    session = _Session()
    noxfile.bundle(session, target="x86_64-linux-gnu", cpython="3.12")
    (install, install_env), (build, build_env) = session.commands
    assert install[:2] == ("pip", "install") and install_env == offline
    assert build[:4] == ("python", "-m", "bundler", "bundle") and build_env == offline
    assert build[-2:] == ("--wheelhouse", str(wheels))
    session = _Session(python=minor())
    noxfile.wheels(session)
    assert [env for _, env in session.commands] == [offline, offline]
    monkeypatch.setenv("PYNOX_WHEELHOUSE", str(tmp_path / "nothing"))
    with pytest.raises(RuntimeError) as caught:
        noxfile.bundle(_Session(), target="x86_64-linux-gnu", cpython="3.12")
    assert str(caught.value) == (
        f"PYNOX_WHEELHOUSE names {tmp_path / 'nothing'}, which is not a folder; give the"
        " folder of wheels"
    )
