"""The dynamic loader's configuration where an include names its files by a pattern."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support.commands import PYNOX

# Run as root in a mount namespace of its own, over an /etc (an overlay: the machine's
# own is left as it is) whose ld.so.conf includes $1/*/ld.so.conf.
IN_AN_ETC_OF_ITS_OWN = """\
set -e
mount -t overlay overlay -o lowerdir=/etc,upperdir="$1/upper",workdir="$1/work" /etc
echo "include $1/opt/*/ld.so.conf" > /etc/ld.so.conf
shift
exec "$@"
"""


def test_a_write_grant_where_an_include_pattern_may_match_is_refused(tmp_path: Path) -> None:
    """`include /opt/*/ld.so.conf` reads the ld.so.conf of any folder of /opt: a program
    granted /opt/app left one there listing a folder of its own, whose libraries ldconfig
    then indexed, and every later process took them by name before any sandbox."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare (util-linux)")
    for folder in ("upper", "work", "opt/app"):
        (tmp_path / folder).mkdir(parents=True)
    script = ["unshare", "--mount", "--propagation", "private", "sh", "-c"]
    script += [IN_AN_ETC_OF_ITS_OWN, "sh", str(tmp_path)]
    probe = subprocess.run([*script, "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount an overlay over /etc here: {probe.stderr.decode().strip()}")
    granted = tmp_path / "opt" / "app"
    plant = f"open({str(granted / 'ld.so.conf')!r}, 'w').write({str(granted)!r})"
    command = [PYNOX, f"--allow-write={granted}", "-c", plant]
    proc = subprocess.run([*script, *command], capture_output=True, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (125, b""), proc.stderr
    assert proc.stderr.decode() == (
        f"pynox: cannot grant writing {granted}: it lies inside {tmp_path}/opt, the dynamic"
        " loader's configuration, which lists the folders it takes libraries from; grant a"
        " directory outside it instead\n"
    )
    assert not (granted / "ld.so.conf").exists()
