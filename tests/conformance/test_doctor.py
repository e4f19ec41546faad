"""`pynox doctor`: whether this machine can sandbox, and if not, exactly why."""

from __future__ import annotations

import json
import platform

from .support import Install


def test_doctor_json_matches_the_machine(install: Install) -> None:
    done = install.run_pynox("doctor", "--json")
    report = json.loads(done.stdout)
    version = install.run_python("-c", "import platform; print(platform.python_version())")
    assert report["python"] == version.stdout.strip()
    assert report["architecture"] == platform.machine()
    assert report["kernel"] == platform.release()
    assert report["sandbox_supported"] is (done.returncode == 0)
    assert report["sandbox_supported"] == (report["sandbox_unavailable_reasons"] == [])


def test_doctor_says_whether_and_why(install: Install) -> None:
    done = install.run_pynox("doctor")
    report = json.loads(install.run_pynox("doctor", "--json").stdout)
    if install.expect_sandbox:
        assert done.returncode == 0, done.stdout
        assert "sandbox_supported: yes\n" in done.stdout
        assert report["landlock_abi"] >= 3 and report["seccomp"] is True
        return
    assert done.returncode == 1
    assert "sandbox_supported: no (pynox --no-sandbox still runs programs)\n" in done.stdout
    reasons = report["sandbox_unavailable_reasons"]
    assert reasons, "doctor must name the reason"
    assert any(install.expect_reason in reason for reason in reasons), reasons
    for reason in reasons:
        assert f"  reason: {reason}\n" in done.stdout


def test_doctor_rejects_unknown_arguments(install: Install) -> None:
    done = install.run_pynox("doctor", "--verbose")
    refused = "pynox: pynox doctor does not take --verbose; it takes only --json\n"
    assert (done.returncode, done.stderr) == (2, refused)
