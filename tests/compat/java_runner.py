"""Build and run the stock-Java-client runners under ``compat/`` and parse what they report.

The runners (``compat/java`` for kafka-clients, ``compat/rocketmq-java`` for rocketmq-client
4.9.x and 5.x) print one JSON object per line: ``check`` lines (scenario, check, ok, detail),
``info`` lines and one closing ``summary`` line. ``run`` starts one JVM for a whole group of
scenarios — JVM start-up dominates a scenario's cost — and returns a ``RunResult`` that tests
query per scenario. Builds go through each directory's ``build.sh`` (idempotent, quick when up
to date, no network once Maven has filled ~/.m2). After a build, this process runs a snapshot
of the built runner (jar copied, lib/ hard-linked into a private temp dir): a rebuild started
meanwhile by another process (``make test-deps``, a developer extending the runner) then cannot
pull jars from under a running JVM, which opens its class path lazily.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KAFKA_DIR = ROOT / "compat" / "java"
KAFKA_JAR = KAFKA_DIR / "target" / "kafka-runner.jar"
ROCKETMQ_DIR = ROOT / "compat" / "rocketmq-java"
# client line -> jar built against it (Maven profiles rmq4 / rmq5)
ROCKETMQ_JARS = {
    "4.9": ROCKETMQ_DIR / "target" / "rmq4" / "rocketmq-runner.jar",
    "5.x": ROCKETMQ_DIR / "target" / "rmq5" / "rocketmq-runner.jar",
}
GRPC_JAR = ROOT / "compat" / "rocketmq-grpc-java" / "target" / "grpc-runner.jar"


class RunnerBuildError(RuntimeError):
    pass


# built jar -> this process's snapshot of it (see the module docstring)
_snapshots: dict[Path, Path] = {}
_snapshot_root: Path | None = None


def build(directory: Path) -> None:
    """Run ``build.sh`` of a runner directory (raise with Maven's output when it fails), then
    snapshot every runner jar it built."""
    if shutil.which("java") is None or shutil.which("mvn") is None:
        raise RunnerBuildError("java and mvn are required: run `make test-deps` (deploy/dev/install-test-deps.sh)")
    proc = subprocess.run(["bash", str(directory / "build.sh")], capture_output=True, text=True, timeout=1200)
    if proc.returncode != 0:
        raise RunnerBuildError(f"{directory}/build.sh failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-4000:]}")
    for jar in [KAFKA_JAR, *ROCKETMQ_JARS.values(), GRPC_JAR]:
        if jar.is_relative_to(directory) and jar.exists():
            _snapshots[jar] = _snapshot(jar)


def _snapshot(jar: Path) -> Path:
    global _snapshot_root
    if _snapshot_root is None:
        _snapshot_root = Path(tempfile.mkdtemp(prefix="java-runners-"))
        atexit.register(shutil.rmtree, _snapshot_root, True)
    dest = _snapshot_root / jar.parent.relative_to(ROOT).as_posix().replace("/", "_")
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "lib").mkdir(parents=True)
    shutil.copy2(jar, dest / jar.name)  # Maven rewrites the jar in place: copy it
    for lib in (jar.parent / "lib").iterdir():  # build.sh replaces lib/ wholesale: links suffice
        try:
            os.link(lib, dest / "lib" / lib.name)
        except OSError:
            shutil.copy2(lib, dest / "lib" / lib.name)
    return dest / jar.name


def runnable(jar: Path) -> Path:
    """The jar to start: this process's snapshot when ``build`` made one."""
    return _snapshots.get(jar, jar)


@dataclass
class RunResult:
    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    checks: list[dict] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)
    summary: dict | None = None

    def of(self, scenario: str) -> list[dict]:
        return [c for c in self.checks if c["scenario"] == scenario]

    def failures(self, scenario: str) -> list[dict]:
        return [c for c in self.of(scenario) if not c["ok"]]

    def explain(self, scenario: str) -> str:
        """What a failing test prints: the failed checks in full, then the runner's stderr tail."""
        lines = [f"runner: {' '.join(self.command)} -> exit {self.returncode}"]
        for c in self.failures(scenario) or self.of(scenario):
            lines.append(f"[{'ok' if c['ok'] else 'FAILED'}] {c['scenario']}/{c['check']}: {c['detail']}")
        if not self.of(scenario):
            lines.append(f"no checks reported for {scenario}; stdout tail:\n{self.stdout[-3000:]}")
        lines.append(f"stderr tail:\n{self.stderr[-3000:]}")
        return "\n".join(lines)

    def assert_passed(self, scenario: str, min_checks: int = 1) -> None:
        checks = self.of(scenario)
        assert len(checks) >= min_checks and not self.failures(scenario), self.explain(scenario)


def run(command: list[str], timeout: float) -> RunResult:
    """Run a runner JVM to completion (bounded) and parse its JSON lines."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        out, err, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:  # report what was printed before the hang
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")) + f"\n[timed out after {timeout}s]"
        code = -1
    return parse(command, code, out, err)


def run_side_by_side(commands: list[list[str]], timeout: float) -> RunResult:
    """Several runner JVMs at once, their results merged into one: for scenarios that mostly
    wait (poll intervals, rebalances, delays) and use distinct topics and groups."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(commands)) as pool:
        results = list(pool.map(lambda cmd: run(cmd, timeout), commands))
    merged = RunResult(command=[], returncode=max(r.returncode for r in results), stdout="", stderr="")
    for r in results:
        merged.command += r.command + [";"]
        merged.stdout += r.stdout
        merged.stderr += r.stderr
        merged.checks += r.checks
        merged.info.update(r.info)
    return merged


def parse(command: list[str], code: int, out: str, err: str) -> RunResult:
    """A finished runner's output as a ``RunResult`` (for runners started with ``Popen``)."""
    result = RunResult(command, code, out, err)
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        kind = obj.get("type")
        if kind == "check":
            result.checks.append(obj)
        elif kind == "info":
            result.info[obj["key"]] = obj["value"]
        elif kind == "summary":
            result.summary = obj
    return result


def kafka_command(bootstrap: str, scenarios: list[str], work_dir: Path | None = None) -> list[str]:
    return ["java", "-Xmx256m", "-jar", str(runnable(KAFKA_JAR)), "--bootstrap", bootstrap,
            "--scenarios", ",".join(scenarios)] + (["--work-dir", str(work_dir)] if work_dir else [])


def rocketmq_command(client: str, namesrv: str, serialize: str, scenarios: list[str], work_dir: Path) -> list[str]:
    return ["java", "-Xmx256m", "-jar", str(runnable(ROCKETMQ_JARS[client])), "--namesrv", namesrv,
            "--serialize", serialize, "--work-dir", str(work_dir), "--scenarios", ",".join(scenarios)]


class JavaMembers:
    """Long-lived Java group members in one JVM (``compat/java`` ``Members``), commanded over
    stdin: ``consumer``/``share`` NAME GROUP TOPICS [key=value ...], ``stop`` NAME. Events (one JSON
    object per line) are collected by a reader thread; ``wait_for`` polls them with a deadline."""

    def __init__(self, bootstrap: str):
        import threading

        self.command = ["java", "-Xmx384m", "-cp", str(runnable(KAFKA_JAR)), "rockafka.compat.kafka.Members",
                        "--bootstrap", bootstrap]
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.events: list[dict] = []
        self.stderr: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_err, daemon=True).start()
        self.wait_for(lambda e: e.get("event") == "ready", 60, "the Members JVM did not start")

    def _read(self) -> None:
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                with self._lock:
                    self.events.append(obj)

    def _read_err(self) -> None:
        for line in self.proc.stderr:
            with self._lock:
                self.stderr.append(line)
                del self.stderr[:-400]

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self.events)

    def wait_for(self, pred, timeout: float, what: str) -> list[dict]:
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [e for e in self.snapshot() if pred(e)]
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{what} (after {timeout}s); last events: {self.snapshot()[-15:]}\n"
                             f"stderr: {''.join(self.stderr[-40:])}")

    def records(self, member: str | None = None) -> list[list]:
        """Every reported record [topic, partition, offset, value, delivery count, ack]."""
        return [r for e in self.snapshot() if e.get("event") == "records" and member in (None, e["member"])
                for r in e["records"]]

    def errors(self) -> list[dict]:
        return [e for e in self.snapshot() if e.get("event") == "error"]

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(90)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)
