"""Small file systems a test mounts for itself: a tmpfs (a memory-backed disk, as a Kubernetes
``emptyDir`` with ``medium: Memory``) or an ext4 image on a loop device (a real block file
system that can be frozen, as a stalled volume is).

Mounting needs root and a kernel that allows it; where it is impossible the test is skipped
with the reason the system gave (never counted as passing). Everything is unmounted at the
end, lazily, so a node killed with files open cannot keep the mount point busy.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=60)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        pytest.skip(f"mounting {what} needs root; this test runs on a file system it mounts itself")


@contextmanager
def tmpfs(path: Path, size_mb: int) -> Iterator[Path]:
    _need_root("a tmpfs")
    path.mkdir(parents=True, exist_ok=True)
    r = _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(path))
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip() or r.returncode}")
    try:
        yield path
    finally:
        _run("umount", "-l", str(path))


@contextmanager
def ext4_loop(path: Path, size_mb: int) -> Iterator[Path]:
    _need_root("a loop device")
    for tool in ("mkfs.ext4", "losetup", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    path.mkdir(parents=True, exist_ok=True)
    image = path.with_name(path.name + ".img")
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    r = _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))
    if r.returncode != 0:
        pytest.skip(f"cannot make an ext4 image: {r.stderr.strip()}")
    r = _run("mount", "-o", "loop", str(image), str(path))
    if r.returncode != 0:
        image.unlink(missing_ok=True)
        pytest.skip(f"cannot mount a loop device here: {r.stderr.strip() or r.returncode}")
    try:
        yield path
    finally:
        _run("fsfreeze", "-u", str(path))  # in case a test left it frozen
        _run("umount", "-l", str(path))
        image.unlink(missing_ok=True)


def used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def fill(path: Path, leave_bytes: int, name: str = "filler") -> Path:
    """Write a file that leaves about ``leave_bytes`` free on ``path``'s file system."""
    st = os.statvfs(path)
    free = st.f_bavail * st.f_frsize
    target = path / name
    chunk = b"\xa5" * (1 << 20)
    with open(target, "wb") as f:
        todo = max(0, free - leave_bytes)
        while todo > 0:
            n = min(len(chunk), todo)
            try:
                f.write(chunk[:n])
            except OSError:
                break
            todo -= n
    return target
