"""Native-protocol workloads: the stock RocketMQ Java client (compat/bench/rocketmq-bench/) run
once per case against a NameServer address, for Rockafka and Apache RocketMQ alike.

The Java program prints one JSON object as its last stdout line; a non-zero exit or a missing
object raises with the program's error output, which the table then shows as the reason.

Each JVM is fresh, so a send case first runs its own load for ``SEND_WARMUP_S`` seconds, not
counted: the JIT compiles the client's send path then, not while the broker is measured (a
3-second case measured without it spent 6.8 s of client CPU on the 2-core machine, most of it
compiling, and the broker ran on what was left). The result's ``warmup_messages`` says how many
acknowledged messages that added to the topic.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Callable

BENCH_DIR = Path(__file__).resolve().parents[1] / "rocketmq-bench"
JAR = BENCH_DIR / "target" / "rocketmq-bench.jar"


class NativeBenchError(RuntimeError):
    pass


def build() -> Path:
    """Build the Java program with Maven (skipped when up to date); its jar path."""
    if shutil.which("mvn") is None or shutil.which("java") is None:
        raise NativeBenchError("java and mvn are needed for the native benchmark program")
    proc = subprocess.run(["bash", str(BENCH_DIR / "build.sh")], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not JAR.exists():
        raise NativeBenchError(f"building {BENCH_DIR} failed:\n{(proc.stdout + proc.stderr)[-2000:]}")
    return JAR


SEND_WARMUP_S = 3


def run(mode: str, namesrv: str, timeout: float = 300.0, on_measure: Callable[[], None] | None = None,
        **params: object) -> dict:
    """One case of the Java program; its JSON result. ``on_measure`` (send cases) is called when
    the counted part starts, after the warm-up (e.g. to sample the brokers' CPU there)."""
    if mode in ("send-sync", "send-async"):
        params.setdefault("warmup", SEND_WARMUP_S)
    with tempfile.TemporaryDirectory(prefix="rmq-bench-client-") as home:
        # user.home: the client writes its logs under ~/logs/rocketmqlogs
        cmd = ["java", "-Xms512m", "-Xmx512m", f"-Duser.home={home}", "-jar", str(JAR), mode,
               f"namesrv={namesrv}", *(f"{k}={v}" for k, v in params.items())]
        err_path = Path(home) / "stderr.txt"
        with open(err_path, "w") as err_file:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err_file, text=True)
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                proc.kill()
            watchdog = threading.Timer(timeout, expire)
            watchdog.start()
            try:
                lines = []
                for line in proc.stdout:  # type: ignore[union-attr]
                    line = line.rstrip("\n")
                    if line == "measuring":
                        if on_measure is not None:
                            on_measure()
                    elif line.startswith("{"):
                        lines.append(line)
                rc = proc.wait()
            finally:
                watchdog.cancel()
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        stderr = err_path.read_text(errors="replace")
    if expired.is_set():
        raise NativeBenchError(f"{mode} did not finish within {timeout}s")
    if rc != 0 or not lines:
        desc = [ln.split("DESC:", 1)[1].strip() for ln in stderr.splitlines() if "DESC:" in ln]
        if desc:  # the broker's own answer (response code and remark) is the reason worth showing
            raise NativeBenchError(f"{mode}: broker answered {desc[-1]}")
        err = [ln for ln in stderr.splitlines() if "Exception" in ln]
        raise NativeBenchError(f"{mode} exited {rc}: " + (" | ".join(err[-3:]) or stderr[-500:]))
    return json.loads(lines[-1])
