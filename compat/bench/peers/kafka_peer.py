"""A real Apache Kafka 4.x broker on loopback, for side-by-side runs and Spark development.

What this module owns:
- the broker jars: ``org.apache.kafka:kafka_2.13`` and its run-time dependencies, resolved by
  Maven from ``compat/bench/peers/kafka/pom.xml`` into ``compat/bench/peers/kafka/lib/``
  (gitignored; done once, then reused without network);
- one single-node KRaft cluster (``process.roles=broker,controller``) per ``KafkaPeer``: its
  ``server.properties`` (Kafka's shipped defaults, with listeners and the controller bound to
  127.0.0.1 on free ports), storage formatted with a freshly generated cluster id, the JVM
  process and its log.

Invariants:
- nothing listens on anything but 127.0.0.1;
- ``start()`` returns only once the broker answers an ApiVersions request on its PLAINTEXT
  listener, and raises (after killing the JVM) when that does not happen within the timeout;
- ``stop()`` always ends the JVM (SIGTERM, then SIGKILL of its process group) and returns
  only when neither port accepts connections any more; the context manager calls it even when
  the body raised.

It is a development and benchmark tool; the test suite (``make test``) never starts it.

CLI::

    python compat/bench/peers/kafka_peer.py [--port N] [--data-dir DIR] [--set key=value ...]
    python compat/bench/peers/kafka_peer.py --fetch-only     # resolve the jars and exit
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from maven_jars import resolve_runtime_jars  # sibling module: this folder is on sys.path
from net import free_port, listening, port_free, recv_exactly  # sibling module

HERE = Path(__file__).resolve().parent
POM_DIR = HERE / "kafka"
LIB_DIR = POM_DIR / "lib"
DEFAULT_KAFKA_VERSION = "4.4.0"


class KafkaPeerError(RuntimeError):
    """The peer could not be fetched, formatted or started; the message says which and why."""




def ensure_jars(version: str = DEFAULT_KAFKA_VERSION, *, quiet: bool = True) -> Path:
    """Resolve the broker jars with Maven once; later calls only check the stamp file."""
    return resolve_runtime_jars(POM_DIR, version_property="kafka.version", version=version,
                                stamp_name=f".kafka-{version}", what="Kafka broker (kafka_2.13)",
                                error=KafkaPeerError, quiet=quiet)


def new_cluster_id() -> str:
    """Kafka's Uuid text form: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


def server_properties(*, port: int, controller_port: int, log_dir: Path,
                      overrides: dict[str, object] | None = None, node_id: int = 1,
                      voter_port: int | None = None) -> dict[str, str]:
    """Kafka's shipped KRaft ``config/server.properties``, bound to loopback on our ports.

    ``node_id`` 1 is a combined broker+controller (the quorum's one voter); another node id is a
    broker only, whose controller is node 1 at ``voter_port`` (a second broker of one cluster)."""
    controller = node_id == 1
    props: dict[str, object] = {
        "process.roles": "broker,controller" if controller else "broker",
        "node.id": node_id,
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port if controller else voter_port}",
        "listeners": (f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}" if controller
                      else f"PLAINTEXT://127.0.0.1:{port}"),
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.network.threads": 3,
        "num.io.threads": 8,
        "socket.send.buffer.bytes": 102400,
        "socket.receive.buffer.bytes": 102400,
        "socket.request.max.bytes": 104857600,
        "log.dirs": str(log_dir),
        "num.partitions": 1,
        "num.recovery.threads.per.data.dir": 1,
        "offsets.topic.replication.factor": 1,
        "share.coordinator.state.topic.replication.factor": 1,
        "share.coordinator.state.topic.min.isr": 1,
        "transaction.state.log.replication.factor": 1,
        "transaction.state.log.min.isr": 1,
        "log.retention.hours": 168,
        "log.segment.bytes": 1073741824,
        "log.retention.check.interval.ms": 300000,
        # The shipped file sets this to 0 for development clusters: no 3 s wait on first join.
        "group.initial.rebalance.delay.ms": 0,
    }
    props.update(overrides or {})
    return {k: str(v) for k, v in props.items()}


LOG4J2_CONFIG = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
"""


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the broker answers ApiVersions v0 with error code 0 (NONE)."""
    client_id = b"kafka-peer"
    body = struct.pack(">hhih", 18, 0, 7, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.sendall(struct.pack(">i", len(body)) + body)
            head = recv_exactly(s, 4)
            size = struct.unpack(">i", head)[0]
            reply = recv_exactly(s, min(size, 1 << 20))
    except OSError:
        return False
    if len(reply) < 6:
        return False
    correlation_id, error_code = struct.unpack(">ih", reply[:6])
    return correlation_id == 7 and error_code == 0








class KafkaPeer:
    """One single-node KRaft Apache Kafka broker; use as a context manager."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *, port: int | None = None,
                 controller_port: int | None = None, overrides: dict[str, object] | None = None,
                 version: str = DEFAULT_KAFKA_VERSION, heap: str = "1g",
                 start_timeout: float = 120.0, node_id: int = 1, voter_port: int | None = None,
                 cluster_id: str | None = None):
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="kafka-peer-"))
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.overrides = dict(overrides or {})
        self.version = version
        self.heap = heap
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.data_dir / "server.log"
        self.cluster_id: str | None = cluster_id
        self.node_id = node_id
        self.voter_port = voter_port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise KafkaPeerError("java not found: the Kafka peer needs a JDK 17+")
        return [java, f"-Xms{self.heap}", f"-Xmx{self.heap}", "-XX:+UseG1GC",
                "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={self.data_dir}",
                "-cp", str(LIB_DIR / "*"), main, *args]

    def _write_config(self) -> Path:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "log4j2.properties").write_text(LOG4J2_CONFIG)
        props = server_properties(port=self.port, controller_port=self.controller_port,
                                  log_dir=self.data_dir / "kraft-combined-logs",
                                  overrides=self.overrides, node_id=self.node_id, voter_port=self.voter_port)
        path = self.data_dir / "server.properties"
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _format(self, config: Path) -> None:
        meta = self.data_dir / "kraft-combined-logs" / "meta.properties"
        if meta.exists():
            return  # formatted by an earlier start on this data dir: keep its cluster id
        self.cluster_id = self.cluster_id or new_cluster_id()
        proc = subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                                         "-c", str(config)),
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise KafkaPeerError(f"kafka storage format failed ({proc.returncode}):\n"
                                 f"{(proc.stdout + proc.stderr)[-3000:]}")

    def start(self) -> "KafkaPeer":
        assert self.proc is None or self.proc.poll() is not None, "peer already running"
        ensure_jars(self.version)
        # Readiness is judged by an ApiVersions answer on the port, so a port someone else
        # already serves would look like success: refuse it up front.
        busy = [p for p in (self.port, self.controller_port if self.node_id == 1 else self.port) if not port_free(p)]
        if busy:
            raise KafkaPeerError(f"port(s) {busy} on 127.0.0.1 already in use")
        config = self._write_config()
        self._format(config)
        log = open(self.log_path, "ab")
        try:
            self.proc = subprocess.Popen(self._java("kafka.Kafka", str(config)), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            log.close()  # the child holds its own descriptor
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise KafkaPeerError(f"kafka exited with {code} during start-up:\n{self.log_errors()}")
            if api_versions_ok("127.0.0.1", self.port):
                return self
            time.sleep(0.2)
        self.stop()
        raise KafkaPeerError(f"kafka not serving after {self.start_timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
            except ProcessLookupError:
                pass
        self.proc = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (listening(self.port) or listening(self.controller_port)):
            time.sleep(0.1)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text("utf-8", "replace")[-chars:]
        except OSError:
            return ""

    def log_errors(self, max_lines: int = 20) -> str:
        """The log's ERROR/FATAL lines (the reason a start failed), else its tail."""
        try:
            lines = self.log_path.read_text("utf-8", "replace").splitlines()
        except OSError:
            return ""
        errors = [ln for ln in lines if " ERROR " in ln or " FATAL " in ln]
        return "\n".join(errors[:max_lines]) if errors else "\n".join(lines[-max_lines:])

    def cleanup(self) -> None:
        """Remove the data directory when this peer created it."""
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaPeer":
        try:
            return self.start()
        except BaseException:
            self.stop()
            self.cleanup()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.cleanup()


class KafkaCluster:
    """``brokers`` Apache Kafka brokers of one KRaft cluster: node 1 is broker and the quorum's
    controller, the others brokers only (what a replication factor > 1 needs); use as a
    context manager. ``bootstrap`` lists every broker."""

    def __init__(self, data_dir: str | os.PathLike[str], *, brokers: int = 2,
                 overrides: dict[str, object] | None = None, version: str = DEFAULT_KAFKA_VERSION,
                 heap: str = "1g", start_timeout: float = 120.0):
        cluster_id = new_cluster_id()
        first = KafkaPeer(Path(data_dir) / "node1", overrides=overrides, version=version, heap=heap,
                          start_timeout=start_timeout, cluster_id=cluster_id)
        self.peers = [first] + [
            KafkaPeer(Path(data_dir) / f"node{i}", overrides=overrides, version=version, heap=heap,
                      start_timeout=start_timeout, node_id=i, voter_port=first.controller_port,
                      cluster_id=cluster_id)
            for i in range(2, brokers + 1)]

    @property
    def bootstrap(self) -> str:
        return ",".join(p.bootstrap for p in self.peers)

    def start(self) -> "KafkaCluster":
        try:
            for p in self.peers:
                p.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> None:
        for p in reversed(self.peers):
            p.stop(timeout)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run a single-node Apache Kafka (KRaft) on 127.0.0.1")
    ap.add_argument("--port", type=int, default=None, help="PLAINTEXT port (default: a free one)")
    ap.add_argument("--controller-port", type=int, default=None)
    ap.add_argument("--data-dir", default=None, help="keep data here (default: a temp dir, removed)")
    ap.add_argument("--version", default=DEFAULT_KAFKA_VERSION)
    ap.add_argument("--heap", default="1g")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a server.properties key")
    ap.add_argument("--fetch-only", action="store_true", help="resolve the jars and exit")
    args = ap.parse_args(argv)
    try:
        if args.fetch_only:
            print(ensure_jars(args.version))
            return 0
        overrides = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                ap.error(f"--set wants KEY=VALUE, got {item!r}")
            overrides[key] = value
        peer = KafkaPeer(args.data_dir, port=args.port, controller_port=args.controller_port,
                         overrides=overrides, version=args.version, heap=args.heap)
        stop_requested = False

        def on_signal(signum, frame):
            nonlocal stop_requested
            stop_requested = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        with peer:
            print(f"kafka {args.version} serving bootstrap={peer.bootstrap} data_dir={peer.data_dir}",
                  flush=True)
            while not stop_requested and peer.running():
                time.sleep(0.5)
            if not peer.running() and not stop_requested:
                print(f"kafka exited:\n{peer.log_tail()}", file=sys.stderr)
                return 1
        return 0
    except KafkaPeerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
