"""Sampling profiles of a running ``rockafka serve`` with py-spy (an external sampler: the
broker runs unmodified and unpaused, ``--nonblocking``).

Only the thread holding the GIL is sampled (``--gil``): in a Python broker that is the CPU the
interpreter spends, i.e. where throughput is lost; threads blocked in waits or in system calls
that release the GIL (fdatasync, socket I/O) do not dilute the picture.

``Recorder`` starts ``py-spy record`` on a pid for a bounded time and returns py-spy's raw
collapsed stacks; ``stats.render_profile`` turns them into the top-15 table.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def py_spy() -> str | None:
    exe = Path(sys.executable).with_name("py-spy")
    return str(exe) if exe.exists() else shutil.which("py-spy")


class Recorder:
    def __init__(self, pid: int, seconds: float) -> None:
        exe = py_spy()
        if exe is None:
            raise RuntimeError("py-spy not installed (pip install py-spy)")
        self._dir = tempfile.TemporaryDirectory(prefix="bench-profile-")
        self.out = Path(self._dir.name) / "stacks.txt"
        self.proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                                      "--rate", "100", "--nonblocking", "--gil", "--format", "raw",
                                      "--output", str(self.out)],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # py-spy needs a moment to attach; a workload started earlier would be partly unsampled
        time.sleep(1.0)
        if self.proc.poll() is not None:
            out = self.proc.stdout.read().decode("utf-8", "replace") if self.proc.stdout else ""
            raise RuntimeError(f"py-spy could not attach to pid {pid}: {out[-500:]}")

    def finish(self, timeout: float = 60.0) -> str:
        """Stop sampling (SIGINT makes py-spy write what it has) and return the collapsed stacks."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(2)
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        try:
            if not self.out.exists():
                raise RuntimeError(f"py-spy wrote no profile: {out.decode('utf-8', 'replace')[-500:]}")
            return self.out.read_text("utf-8", "replace")
        finally:
            self._dir.cleanup()
