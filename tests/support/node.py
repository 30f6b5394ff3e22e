"""Run a real ``rockafka serve`` in a child process on loopback, on free ports.

Tests talk to it with real clients. ``RunningNode`` starts the node, waits for its
``node_ready`` log event (bounded), and can stop it (SIGTERM), kill it (SIGKILL) and start it
again on the same ports and data directory, so restart and crash behaviour is tested through
the real entry point.
"""

from __future__ import annotations

import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


_ISSUED_PORTS: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _worker_share(start: int, stop: int) -> tuple[int, int]:
    """This process's part of [start, stop) when the suite runs in several pytest worker
    processes (pytest-xdist sets PYTEST_XDIST_WORKER=gwN and PYTEST_XDIST_WORKER_COUNT): each
    worker picks from its own part, so two workers never hand out the same port."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    try:
        index = int(worker.removeprefix("gw"))
        count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    except ValueError:
        return start, stop
    if count <= 1 or not 0 <= index < count:
        return start, stop
    width = (stop - start) // count
    return start + index * width, start + (index + 1) * width


def free_port() -> int:
    """A loopback port no other caller in this test run has been given.

    Ports come from below the kernel's ephemeral range, so neither a later ``bind(0)`` nor the
    local end of an outgoing client connection can take a port between the moment it is picked
    and the moment the node binds it; and no port is handed out twice in one run, so the five
    listeners of one node never collide with each other.
    """
    low, _ = _ephemeral_range()
    if low > 11000:
        rng = random.Random()
        start, stop = _worker_share(10000, low)
        for _ in range(2000):
            port = rng.randrange(start, stop)
            if port not in _ISSUED_PORTS and _bindable(port):
                _ISSUED_PORTS.add(port)
                return port
    for _ in range(2000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ISSUED_PORTS:
            _ISSUED_PORTS.add(port)
            return port
    raise RuntimeError("no free loopback port found")


def rockafka_command() -> list[str]:
    exe = Path(sys.executable).with_name("rockafka")
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "rockafka.cli"]


class NodeStartError(RuntimeError):
    pass


class _PortInUse(NodeStartError):
    """The node could not bind one of its listener ports."""


class RunningNode:
    def __init__(self, data_dir: str | os.PathLike[str], *, settings: dict[str, object] | None = None,
                 ready_timeout: float = 60.0):
        self.data_dir = Path(data_dir)
        self.settings = dict(settings or {})
        self.ready_timeout = ready_timeout
        self.host = "127.0.0.1"
        self.command_prefix: list[str] = []  # e.g. ["ip", "netns", "exec", NAME]: run it in a namespace
        self._pick_ports()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir.parent / f"{self.data_dir.name}.log"
        self._log_file = None
        self.starts = 0

    # -- addresses ------------------------------------------------------------------------
    @property
    def kafka_bootstrap(self) -> str:
        return f"{self.host}:{self.kafka_port}"

    @property
    def namesrv_addr(self) -> str:
        return f"{self.host}:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"{self.host}:{self.broker_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.host}:{self.admin_port}"

    # -- lifecycle ------------------------------------------------------------------------
    def args(self) -> list[str]:
        cmd = self.command_prefix + rockafka_command() + [
            "serve", "--host", self.host, "--data-dir", str(self.data_dir),
            "--kafka-port", str(self.kafka_port), "--namesrv-port", str(self.namesrv_port),
            "--broker-port", str(self.broker_port), "--ha-port", str(self.ha_port),
            "--admin-port", str(self.admin_port), "--grpc-port", str(self.grpc_port),
        ]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        return cmd

    def _pick_ports(self) -> None:
        self.kafka_port = free_port()
        self.namesrv_port = free_port()
        self.broker_port = free_port()
        self.ha_port = free_port()
        self.admin_port = free_port()
        self.grpc_port = free_port()

    def start(self) -> "RunningNode":
        """Start the node and wait for ``node_ready``.

        A listener port taken by someone else is not the node's fault: on a first start the node
        moves to fresh ports, on a restart (same ports, by design) it waits for the port and
        tries again, a bounded number of times either way.
        """
        for attempt in range(6):
            try:
                return self._start_once()
            except _PortInUse as exc:
                if attempt == 5:
                    raise NodeStartError(str(exc)) from None
                if self.starts == 1:
                    self._pick_ports()
                else:
                    time.sleep(0.5 * (attempt + 1))
                self.starts -= 1
        raise AssertionError("unreachable")

    def _start_once(self) -> "RunningNode":
        assert self.proc is None or self.proc.poll() is not None, "node already running"
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._log_file = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(self.args(), stdout=self._log_file, stderr=subprocess.STDOUT,
                                     cwd=str(ROOT), env=env, start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode("utf-8", "replace")
            if "node_ready" in text:
                return self
            if self.proc.poll() is not None:
                self._wait(5)
                message = f"rockafka exited with {self.proc.returncode}:\n{text[-4000:]}"
                if "address already in use" in text:
                    raise _PortInUse(message)
                raise NodeStartError(message)
            time.sleep(0.05)
        self.kill()
        raise NodeStartError(f"rockafka not ready after {self.ready_timeout}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")[-chars:]
        except OSError:
            return ""

    def _wait(self, timeout: float) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        finally:
            if self._log_file:
                self._log_file.close()
                self._log_file = None

    def stop(self, timeout: float = 30.0) -> int:
        """Graceful shutdown (SIGTERM); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self._wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise NodeStartError(f"rockafka did not stop within {timeout}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """Crash it: SIGKILL the whole process group."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self._wait(30)

    def restart(self) -> "RunningNode":
        self.stop()
        return self.start()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_events(self) -> list[str]:
        return re.findall(r"event='?([a-z_]+)", self.log_tail(10**7))

    def __enter__(self) -> "RunningNode":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        except Exception:
            self.kill()


class StandaloneNamesrv:
    """``rockafka namesrv`` in a child process on a free loopback port (a NameServer that outlives
    the brokers registered with it, as in a RocketMQ deployment). ``settings`` are ``--set``
    keys (the failover controller's); ``kill``/``start`` crash and restart it on the same port
    and data directory."""

    def __init__(self, tmp_path: Path, expired_ms: int = 120_000, ready_timeout: float = 30.0, *,
                 settings: dict[str, object] | None = None, port: int | None = None, name: str | None = None,
                 start: bool = True, host: str = "127.0.0.1", command_prefix: list[str] | None = None,
                 metrics_port: int | None = None, extra_args: list[str] | None = None):
        self.port = port or free_port()
        self.extra_args = list(extra_args or [])
        self.metrics_port = metrics_port
        self.host = host
        self.command_prefix = list(command_prefix or [])
        self.tmp_path = Path(tmp_path)
        self.tmp_path.mkdir(parents=True, exist_ok=True)
        self.name = name or f"namesrv-{self.port}"
        self.path = self.tmp_path / f"{self.name}.log"
        self.data_dir = self.tmp_path / self.name
        self.expired_ms = expired_ms
        self.ready_timeout = ready_timeout
        self.settings = dict(settings or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = None
        if start:
            self.start()

    def start(self) -> "StandaloneNamesrv":
        offset = self.path.stat().st_size if self.path.exists() else 0
        self.log = open(self.path, "ab")
        cmd = self.command_prefix + rockafka_command() + ["namesrv", "--host", self.host, "--port", str(self.port),
                                    "--broker-expired-ms", str(self.expired_ms), "--data-dir", str(self.data_dir)]
        if self.settings:  # its KV config (and any generated certificate) in its data directory
            cmd += ["--kv-config", str(self.data_dir / "kvConfig.json")]
        for key, value in self.settings.items():
            cmd += ["--set", f"{key}={value}"]
        if self.metrics_port is not None:
            cmd += ["--metrics-port", str(self.metrics_port)]
        cmd += self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=str(ROOT),
                                     start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while b"namesrv_ready" not in self.path.read_bytes()[offset:]:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise NodeStartError(f"namesrv did not start:\n{self.path.read_text('utf-8', 'replace')[-3000:]}")
            time.sleep(0.05)
        return self

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """Crash it: SIGKILL of its process group."""
        if self.running():
            assert self.proc is not None
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        if self.log is not None:
            self.log.close()
            self.log = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self.log is not None:
            self.log.close()
            self.log = None
