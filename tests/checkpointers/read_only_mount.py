"""Run a Python script where a folder or a file is mounted read-only (a user and mount namespace
made with `unshare`), for the tests of databases that can only be read."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def skip_without_namespaces() -> None:
    """Skip the test where `unshare` or user namespaces are not available."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare to mount a read-only filesystem")
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"user namespaces are not available: {probe.stderr.decode().strip()}")


def run_read_only(target: Path, script: Path, *args: str) -> list[str]:
    """The output lines of `script` run with `target` (a folder or a file) mounted read-only;
    the script must succeed."""
    command = (
        f"mount --bind {target} {target} && mount -o remount,bind,ro {target} && "
        f"{sys.executable} {script} {' '.join(args)}"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", command],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()
