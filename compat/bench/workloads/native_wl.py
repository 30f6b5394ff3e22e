"""Native-protocol workloads: the stock RocketMQ Java client (compat/bench/rocketmq-bench/) run
once per case against a NameServer address, for Rockafka and Apache RocketMQ alike.

The Java program prints one JSON object as its last stdout line; a non-zero exit or a missing
object raises with the program's error output, which the table then shows as the reason.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

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


def run(mode: str, namesrv: str, timeout: float = 300.0, **params: object) -> dict:
    """One case of the Java program; its JSON result."""
    with tempfile.TemporaryDirectory(prefix="rmq-bench-client-") as home:
        # user.home: the client writes its logs under ~/logs/rocketmqlogs
        cmd = ["java", "-Xms512m", "-Xmx512m", f"-Duser.home={home}", "-jar", str(JAR), mode,
               f"namesrv={namesrv}", *(f"{k}={v}" for k, v in params.items())]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise NativeBenchError(f"{mode} did not finish within {timeout}s") from e
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        desc = [ln.split("DESC:", 1)[1].strip() for ln in proc.stderr.splitlines() if "DESC:" in ln]
        if desc:  # the broker's own answer (response code and remark) is the reason worth showing
            raise NativeBenchError(f"{mode}: broker answered {desc[-1]}")
        err = [ln for ln in proc.stderr.splitlines() if "Exception" in ln]
        raise NativeBenchError(f"{mode} exited {proc.returncode}: " + (" | ".join(err[-3:]) or proc.stderr[-500:]))
    return json.loads(lines[-1])
