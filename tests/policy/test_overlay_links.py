"""Hard links to what runs load, on file systems whose listings and stat disagree."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from support.commands import PYNOX

import pynox as pynox_package

PACKAGE = Path(pynox_package.__file__).parent
ENVIRONMENT_HOLDER = PACKAGE.parents[4]  # what holds .../lib/python3.X/site-packages/pynox

# Run as root in a mount namespace of its own: the folder that holds pynox's environment
# is shown again through an overlay whose upper layer is on a tmpfs (another file system
# than its lower one, xino off, as on a live system or a container on a read-only
# image), and a hard link to pynox's errors.py made through it ($4, else a file of its
# own), in a folder then granted. What it writes stays in that tmpfs.
IN_AN_OVERLAY = """\
set -e
mount -t tmpfs none "$1"
mkdir "$1/upper" "$1/work"
mount -t overlay overlay -o "lowerdir=$2,upperdir=$1/upper,workdir=$1/work,xino=off" "$2"
mkdir "$3"
if [ -n "$4" ]; then ln "$4" "$3/innocent"; else echo > "$3/innocent"; fi
shift 4
exec "$@"
"""


def in_an_overlay(tmp_path: Path, granted: Path, linked_to: str) -> list[str]:
    """The command that runs the rest of its command line in IN_AN_OVERLAY."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    layers = tmp_path / "layers"
    layers.mkdir()
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c", IN_AN_OVERLAY]
    script += ["sh", str(layers), str(ENVIRONMENT_HOLDER), str(granted), linked_to]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.decode().strip()}")
    return script


def test_a_hard_link_to_pynox_on_an_overlay_is_refused(tmp_path: Path) -> None:
    """On an overlay whose layers are on different file systems, a file of a lower layer
    has that layer's device, not its folder's, and a folder listing gives a file copied
    up its inode number in the upper layer: a grant holding another name of pynox's code
    was passed over, and the program rewrote pynox through it."""
    granted = ENVIRONMENT_HOLDER / f"pynox-test-granted-{tmp_path.name}"
    target = PACKAGE / "errors.py"
    plant = f"open({str(granted / 'innocent')!r}, 'a').write('PLANTED = 1')"
    script = in_an_overlay(tmp_path, granted, str(target))
    command = [PYNOX, f"--allow-write={granted}", "-c", plant]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    # Which one depends on what the overlay already knows of errors.py (another of its
    # names elsewhere, left by another test, makes it say the two are one file).
    assert proc.stderr.decode() in (
        f"pynox: cannot grant writing {granted}: {granted}/innocent has another name, on an"
        " overlay of layers on different file systems, where pynox cannot tell whether it"
        " is a file that runs load before their sandbox exists (such as pynox's own code); grant"
        " a directory that holds no such link, or remove that link\n",
        f"pynox: cannot grant writing {granted}: {granted}/innocent is another name of"
        f" {target}, which runs load before their sandbox exists; grant a directory that"
        " holds no such link, or remove that link\n",
    )
    assert b"PLANTED" not in target.read_bytes()


def test_a_folder_on_an_overlay_without_such_links_is_granted(tmp_path: Path) -> None:
    """Searched entry by entry, a folder on that overlay that holds no second name of a
    file is granted as on any file system."""
    granted = ENVIRONMENT_HOLDER / f"pynox-test-granted-{tmp_path.name}"
    script = in_an_overlay(tmp_path, granted, "")
    write = f"print(open({str(granted / 'innocent')!r}, 'a').write('mine'))"
    command = [PYNOX, f"--allow-write={granted}", "-c", write]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"4\n", b"")


def test_a_write_grant_over_a_layer_of_an_overlay_showing_pynox_is_refused(
    tmp_path: Path,
) -> None:
    """What is written in an overlay's upper layer shows through the overlay: a program
    granted that folder (a live system's /run/live/overlay, overlayroot's
    /media/root-rw) rewrote pynox's code there as the next run found it, a path no
    comparison of paths, and no bind mount, relates to pynox's."""
    granted = ENVIRONMENT_HOLDER / f"pynox-test-granted-{tmp_path.name}"
    script = in_an_overlay(tmp_path, granted, "")
    upper = tmp_path / "layers" / "upper"
    # errors.py copied up, as any change through the overlay does, then written in the layer.
    target = PACKAGE / "errors.py"
    in_upper = upper / target.relative_to(ENVIRONMENT_HOLDER)
    plant = f"open({str(in_upper)!r}, 'a').write('PLANTED = 1')"
    command = [PYNOX, f"--allow-write={upper}", "-c", plant]
    copy_up = ["sh", "-c", f'touch "{target}" && exec "$@"', "sh", *command]
    proc = subprocess.run([*script, *copy_up], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    line = proc.stderr.decode()
    assert line.startswith(
        f"pynox: cannot grant writing {upper}: through the mount at {ENVIRONMENT_HOLDER} it"
        f" reaches {ENVIRONMENT_HOLDER}, which holds "
    ), line
    assert line.endswith("; grant a directory that holds nothing that mount shows instead\n")


# As IN_AN_OVERLAY, but the upper layer's name holds a colon, which the mount's options
# escape with a backslash (upperdir=.../up\:per) and mountinfo shows as the text given.
IN_AN_OVERLAY_OF_A_COLON = """\
set -e
mount -t tmpfs none "$1"
mkdir "$1/up:per" "$1/work"
upper=$(printf '%s' "$1/up:per" | sed 's/:/\\\\:/g')
mount -t overlay overlay -o "lowerdir=$2,upperdir=$upper,workdir=$1/work,xino=off" "$2"
touch "$3"
shift 3
exec "$@"
"""


def test_a_write_grant_over_a_layer_named_with_a_colon_is_refused(tmp_path: Path) -> None:
    """mountinfo shows an overlay's upperdir and lowerdir as the mount was given them, a
    colon of a name escaped with a backslash: the layer was taken for a folder of
    another name, and a program granted it rewrote pynox's code there as the next run
    found it."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    layers = tmp_path / "layers"
    layers.mkdir()
    target = PACKAGE / "errors.py"
    upper = layers / "up:per"
    in_upper = upper / target.relative_to(ENVIRONMENT_HOLDER)
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    script += [IN_AN_OVERLAY_OF_A_COLON, "sh", str(layers), str(ENVIRONMENT_HOLDER), str(target)]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.decode().strip()}")
    plant = f"open({str(in_upper)!r}, 'a').write('PLANTED = 1')"
    command = [PYNOX, f"--allow-write={upper}", "-c", plant]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    assert proc.stderr.decode().startswith(
        f"pynox: cannot grant writing {upper}: through the mount at {ENVIRONMENT_HOLDER} it"
        f" reaches {ENVIRONMENT_HOLDER}, which holds "
    ), proc.stderr


# Run as root in a mount namespace of its own: a tmpfs at $1, then an overlay at $2 of
# the lower layer $3 and the upper layer $4 (with its work folder $5; either layer's
# name may start with $1, to be on that tmpfs, which the script makes it). What is
# written to the tmpfs goes with it.
AN_OVERLAY_OF = """\
set -e
mount -t tmpfs none "$1"
mkdir -p "$3" "$4" "$5"
mount -t overlay overlay -o "lowerdir=$3,upperdir=$4,workdir=$5,xino=off" "$2"
shift 5
exec "$@"
"""


@pytest.fixture
def beside_pynox() -> object:
    """A folder on pynox's file system, where a hard link to its code can be made."""
    # A name of its own: tmp_path's name is the same in two workers' base folders.
    folder = Path(tempfile.mkdtemp(prefix="pynox-test-layer-", dir=ENVIRONMENT_HOLDER))
    folder.chmod(0o755)  # as mkdir makes it
    yield folder
    shutil.rmtree(folder)


def an_overlay_of(tmp_path: Path, lower: Path, upper: Path, work: Path) -> list[str]:
    """The command that runs the rest of its command line in AN_OVERLAY_OF, with the
    overlay at tmp_path/merged and the tmpfs at tmp_path/tmpfs."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    (tmp_path / "merged").mkdir()
    (tmp_path / "tmpfs").mkdir()
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c", AN_OVERLAY_OF, "sh"]
    script += [str(tmp_path / "tmpfs"), str(tmp_path / "merged"), str(lower), str(upper)]
    script.append(str(work))
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.decode().strip()}")
    return script


def linked_to_pynox(folder: Path) -> Path:
    """folder/innocent, made another name of pynox's errors.py."""
    link = folder / "innocent"
    try:
        os.link(PACKAGE / "errors.py", link)
    except OSError as error:  # not allowed here (protected_hardlinks, another owner)
        pytest.skip(f"cannot link {PACKAGE / 'errors.py'}: {error}")
    return link


def test_an_overlay_apart_from_what_runs_load_is_granted_unsearched(
    tmp_path: Path, beside_pynox: Path
) -> None:
    """A name on an overlay writes its upper layer only, a lower layer's file copied up
    first: with the upper layer on a file system that holds nothing runs load, and
    nothing they load seen through an overlay, no name there writes such a file, and the
    grant is not searched (a lower layer's other name of pynox's code included, which the
    search refused)."""
    lower = beside_pynox / "lower"
    lower.mkdir()
    linked_to_pynox(lower)
    tmpfs = tmp_path / "tmpfs"
    script = an_overlay_of(tmp_path, lower, tmpfs / "upper", tmpfs / "work")
    merged = tmp_path / "merged"
    plant = f"open({str(merged / 'innocent')!r}, 'a').write('PLANTED = 1')"
    command = [PYNOX, f"--allow-write={merged}", "-c", plant]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, b"", b"")
    assert b"PLANTED" not in (PACKAGE / "errors.py").read_bytes()  # the copy was written


def test_an_overlay_whose_upper_layer_shares_pynoxs_file_system_is_searched(
    tmp_path: Path, beside_pynox: Path
) -> None:
    """A name of the upper layer is written as it is: where that layer is on the file
    system of a file runs load, the overlay is searched, and another name of pynox's
    code there refused."""
    upper = beside_pynox / "upper"
    upper.mkdir()
    linked_to_pynox(upper)
    tmpfs = tmp_path / "tmpfs"
    script = an_overlay_of(tmp_path, tmpfs / "lower", upper, beside_pynox / "work")
    merged = tmp_path / "merged"
    plant = f"open({str(merged / 'innocent')!r}, 'a').write('PLANTED = 1')"
    command = [PYNOX, f"--allow-write={merged}", "-c", plant]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    # Which one depends on the device the kernel gives the upper layer's files: its
    # own, or one of the overlay's that no mount lists (see the first test).
    assert proc.stderr.decode() in (
        f"pynox: cannot grant writing {merged}: {merged}/innocent has another name, on an"
        " overlay of layers on different file systems, where pynox cannot tell whether it"
        " is a file that runs load before their sandbox exists (such as pynox's own code); grant"
        " a directory that holds no such link, or remove that link\n",
        f"pynox: cannot grant writing {merged}: {merged}/innocent is another name of"
        f" {PACKAGE}/errors.py, which runs load before their sandbox exists; grant a"
        " directory that holds no such link, or remove that link\n",
    )
    assert b"PLANTED" not in (PACKAGE / "errors.py").read_bytes()


def test_an_overlays_upper_layer_is_read_from_its_options() -> None:
    from pynox.policy import bind_mounts

    line = (
        b"69 46 0:41 / /m rw,relatime - overlay overlay"
        b" rw,lowerdir=/lo\\:w:/l2,upperdir=/up\\:per,workdir=/work,uuid=on\n"
        b"70 46 0:42 / /r ro,relatime - overlay overlay ro,lowerdir=/a:/b\n"
    )
    writable, read_only = bind_mounts._parsed(line)
    assert (writable.upper, writable.layers) == ("/up:per", ("/lo:w", "/l2", "/up:per"))
    assert (read_only.upper, read_only.layers) == ("", ("/a", "/b"))


# Run as root in a mount namespace of its own: an overlay at $1 of the lower layer $2
# and the upper layer $3 (with its work folder $4), with the options $5.
AN_OVERLAY_WITH = """\
set -e
mount -t overlay overlay -o "lowerdir=$2,upperdir=$3,workdir=$4$5" "$1"
shift 5
exec "$@"
"""


@pytest.mark.parametrize(
    ("lower_on_a_tmpfs", "options"), [(False, ""), (True, ",xino=on")], ids=["one-fs", "xino"]
)
def test_a_hard_link_to_pynox_in_an_upper_layer_of_its_own_file_system_is_refused(
    tmp_path: Path, beside_pynox: Path, lower_on_a_tmpfs: bool, options: str
) -> None:
    """An overlay of layers on one file system, or with xino, gives its files its own
    device: a file of its upper layer that is another name of pynox's errors.py, loaded
    from that file system without the overlay, was not taken for it, and the program
    granted the overlay opened pynox's code for writing."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    for name in ("lower", "upper", "work"):
        (beside_pynox / name).mkdir()
    linked_to_pynox(beside_pynox / "upper")
    merged = tmp_path / "merged"
    merged.mkdir()
    lower = beside_pynox / "lower"
    script = ["unshare", "--mount", "--propagation", "private"]
    if lower_on_a_tmpfs:  # layers on two file systems, xino making one device of them
        script += ["sh", "-c", 'mount -t tmpfs none "$1" && shift && exec "$@"', "sh", str(lower)]
    script += ["sh", "-c", AN_OVERLAY_WITH, "sh", str(merged), str(lower)]
    script += [str(beside_pynox / "upper"), str(beside_pynox / "work"), options]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.decode().strip()}")
    write = f"open({str(merged / 'innocent')!r}, 'ab')"  # nothing written: pynox's own file
    command = [PYNOX, f"--allow-write={merged}", "-c", write]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    assert proc.stderr.decode() == (
        f"pynox: cannot grant writing {merged}: {merged}/innocent is another name of"
        f" {PACKAGE}/errors.py, which runs load before their sandbox exists; grant a"
        " directory that holds no such link, or remove that link\n"
    )


def test_a_file_of_an_overlay_whose_upper_layer_is_not_known_is_taken_by_its_number() -> None:
    """Where the overlay's upper layer cannot be looked at (named in another mount
    namespace), a file of more than one name there is taken for each file pynox loaded
    with its inode number, whatever its device."""
    from pynox.policy import trusted

    linked = {(8, 1234): "/venv/lib/libpython.so"}

    def file(device: int, inode: int, nlink: int = 2) -> os.stat_result:
        return os.stat_result((0o100644, inode, device, nlink, 0, 0, 0, 0, 0, 0))

    known, unknown = {50: 8}, {50: None}
    assert trusted._linked_name(file(8, 1234), linked, None) == "/venv/lib/libpython.so"
    assert trusted._linked_name(file(50, 1234), linked, None) is None  # no overlay reached
    assert trusted._linked_name(file(50, 1234), linked, known) == "/venv/lib/libpython.so"
    assert trusted._linked_name(file(50, 1234), {(9, 1234): "x"}, known) is None
    assert trusted._linked_name(file(50, 1234), {(9, 1234): "x"}, unknown) == "x"
    assert trusted._linked_name(file(50, 1234, nlink=1), linked, unknown) is None
    assert trusted._linked_name(file(51, 1234), linked, unknown) is None  # not that overlay


# Run as root in a mount namespace of its own: a tmpfs at $1, then from the folder $2 an
# overlay at $4 of the lower layer $3 and the upper layer named relative to $2 (upper,
# with its work folder work), as mountinfo then shows it: "upperdir=upper"; the rest of
# the command line runs in the folder that holds $1.
AN_OVERLAY_NAMED_RELATIVE = """\
set -e
mount -t tmpfs none "$1"
cd "$2"
mount -t overlay overlay -o "lowerdir=$3,upperdir=upper,workdir=work,xino=off" "$4"
cd "$1/.."
shift 4
exec "$@"
"""


def test_an_overlay_whose_upper_layer_is_named_relative_is_searched(
    tmp_path: Path, beside_pynox: Path
) -> None:
    """mountinfo shows an upper layer named relative to where the overlay was mounted as
    it was given: read from where pynox runs, the name found another folder, on another
    file system, and the grant holding another name of pynox's code was not searched."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    for name in ("upper", "work"):
        (beside_pynox / name).mkdir()
    linked_to_pynox(beside_pynox / "upper")
    here = tmp_path / "here"  # where pynox runs: its "upper" is on a tmpfs
    (here / "upper").mkdir(parents=True)
    lower, merged = tmp_path / "lower", tmp_path / "merged"
    lower.mkdir()
    merged.mkdir()
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    script += [AN_OVERLAY_NAMED_RELATIVE, "sh", str(here / "upper"), str(beside_pynox)]
    script += [str(lower), str(merged)]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay here: {probe.stderr.decode().strip()}")
    write = f"open({str(merged / 'innocent')!r}, 'ab')"  # nothing written: pynox's own file
    command = [PYNOX, f"--allow-write={merged}", "-c", write]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=here)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    assert proc.stderr.decode().startswith(f"pynox: cannot grant writing {merged}: "), proc.stderr
