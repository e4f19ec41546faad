"""The archive's signature: `ssh-keygen -Y sign`, so that OpenSSH alone can check it.

A .sha256 travels beside the archive and proves only that the pair agrees; the
signature, checked against a public key that reached the installing host some other
way, proves who made the archive. install.sh checks it with `ssh-keygen -Y verify`
for the same namespace.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bundler.errors import BundlerError

# What the signature is for: a key trusted for bundles only (allowed_signers'
# namespaces="pynox-bundle") signs nothing else that passes. install.sh has the same.
NAMESPACE = "pynox-bundle"


def signature_path(archive: Path) -> Path:
    return archive.with_name(archive.name + ".sig")


def check_key(key: Path) -> None:
    """Refuses, before a build, a key the signing at its end would fail on."""
    if not key.is_file():
        raise BundlerError(f"the signing key {key} does not exist; give SIGN_KEY=PRIVATE_KEY")
    if shutil.which("ssh-keygen") is None:
        raise BundlerError("no ssh-keygen to sign the bundle with; install OpenSSH's client")
    # Any file that is no key would otherwise pass, and fail the signing after the build.
    listed = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    if listed.returncode != 0:
        raise BundlerError(
            f"the signing key {key} is not an OpenSSH key; give SIGN_KEY=PRIVATE_KEY, a key "
            "that `ssh-keygen -t ed25519` made"
        )
    details = key.stat()
    private = key.read_bytes()[:64].startswith(b"-----BEGIN")
    if private and details.st_uid == os.getuid() and details.st_mode & 0o077:
        # ssh-keygen ignores such a key, then says only that it found no private key.
        raise BundlerError(
            f"the signing key {key} can be read by other users, so ssh-keygen will not use "
            f"it; chmod 600 {key}"
        )


def sign(archive: Path, key: Path | None) -> Path | None:
    """Writes ARCHIVE.sig with the private key KEY; without a key, removes a stale one."""
    signature = signature_path(archive)
    signature.unlink(missing_ok=True)  # never leave an older build's signature beside it
    if key is None:
        return None
    check_key(key)
    done = subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(archive)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    if done.returncode != 0 or not signature.is_file():
        reason = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
        raise BundlerError(f"ssh-keygen could not sign {archive.name} with {key}: {reason}")
    return signature
