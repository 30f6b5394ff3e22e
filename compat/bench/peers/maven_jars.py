"""Fetch a peer broker's runtime jars from Maven Central once, for both peer launchers.

Each peer has a small pom (``<peer>/pom.xml``) whose version is a property; its runtime
dependencies are copied into ``<peer>/lib`` and a stamp file named after the version marks a
complete copy, so later calls only check the stamp. Two runs may want the jars at once
(benchmark and compat matrix): a file lock lets one resolve while the other waits and then
finds the stamp.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from pathlib import Path


def resolve_runtime_jars(pom_dir: Path, *, version_property: str, version: str, stamp_name: str,
                         what: str, error: type[Exception], quiet: bool = True) -> Path:
    """The lib folder holding ``what``'s jars at ``version``; raises ``error`` saying why not."""
    lib_dir = pom_dir / "lib"
    stamp = lib_dir / stamp_name
    if stamp.exists():
        return lib_dir
    lock_path = pom_dir / "target" / "resolve.lock"  # target/ is gitignored
    lock_path.parent.mkdir(exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return lib_dir
        if shutil.which("mvn") is None:
            raise error(f"mvn not found: Maven is needed once to fetch the {what} jars")
        if lib_dir.exists():
            shutil.rmtree(lib_dir)  # another version or an interrupted copy: start clean
        cmd = ["mvn", "-B", "dependency:copy-dependencies", f"-D{version_property}={version}",
               "-DincludeScope=runtime", f"-DoutputDirectory={lib_dir}"]
        if quiet:
            cmd.insert(1, "-q")
        proc = subprocess.run(cmd, cwd=pom_dir, capture_output=True, text=True)
        if proc.returncode != 0:
            raise error(f"maven could not resolve the {what} {version}:\n{(proc.stdout + proc.stderr)[-3000:]}")
        stamp.touch()
        return lib_dir
