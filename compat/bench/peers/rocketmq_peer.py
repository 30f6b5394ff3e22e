"""A real Apache RocketMQ 5.x NameServer + broker on loopback, for compatibility checks and
side-by-side benchmarks.

What this module owns:
- the server jars: ``org.apache.rocketmq:rocketmq-namesrv`` and ``rocketmq-broker`` with their
  run-time dependencies, resolved by Maven from ``compat/bench/peers/rocketmq/pom.xml`` into
  ``compat/bench/peers/rocketmq/lib/`` (gitignored; done once, then reused without network);
- one NameServer and one master broker per ``RocketMQPeer`` (optionally slaves of it, each its
  own JVM, store and ports): their config files (RocketMQ's
  shipped ``conf/broker.conf`` — DefaultCluster, broker-a, brokerId 0, ASYNC_MASTER,
  ASYNC_FLUSH, deleteWhen 04, fileReservedTime 48 — plus loopback addresses, free ports, a
  store under the peer's data directory and ``enablePropertyFilter=true`` so SQL92 consumers
  work), both JVMs and their logs. ``user.home`` of both JVMs is the data directory, so nothing
  RocketMQ writes by default (``~/store``, ``~/logs/rocketmqlogs``) lands outside it;
- ``rocketmq/src/rockafka/peer/LoopbackHAService.java``, compiled with javac next to the jars
  (``rocketmq/classes/``, gitignored) and registered through RocketMQ's own service hook
  (``META-INF/service/org.apache.rocketmq.store.ha.HAService``): the stock HA service, whose
  replication port RocketMQ always binds to the wildcard address, bound to 127.0.0.1 instead.

Invariants:
- every listener binds 127.0.0.1 (``bindAddress``; the HA port through LoopbackHAService); the
  broker advertises 127.0.0.1 (``brokerIP1``/``brokerIP2``); its HA port is ``listenPort + 1``
  as RocketMQ derives it, so the launcher picks a broker port whose neighbours are free too;
- ``start()`` returns only once the NameServer routes TBW102 to this broker (what a producer
  needs before it can send or create topics), and raises — after stopping both JVMs — when that
  does not happen within the timeout;
- ``stop()`` always ends both JVMs (broker first, SIGTERM then SIGKILL of each process group)
  and returns only when none of the peer's ports accepts connections; the context manager calls
  it even when the body raised.

CLI::

    python compat/bench/peers/rocketmq_peer.py [--data-dir DIR] [--set key=value ...]
    python compat/bench/peers/rocketmq_peer.py --fetch-only     # resolve the jars and exit
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from maven_jars import resolve_runtime_jars  # sibling module: this folder is on sys.path
from net import free_port, listening, port_free, recv_exactly  # sibling module

HERE = Path(__file__).resolve().parent
POM_DIR = HERE / "rocketmq"
LIB_DIR = POM_DIR / "lib"
CLASSES_DIR = POM_DIR / "classes"
HA_SERVICE_SOURCE = POM_DIR / "src" / "rockafka" / "peer" / "LoopbackHAService.java"
HA_SERVICE_CLASS = "rockafka.peer.LoopbackHAService"
DEFAULT_ROCKETMQ_VERSION = "5.5.0"

# RocketMQ request codes used by the readiness probe (RequestCode.java)
GET_ROUTEINFO_BY_TOPIC = 105
SUCCESS = 0


class RocketMQPeerError(RuntimeError):
    """The peer could not be fetched or started; the message says which and why."""


def ensure_jars(version: str = DEFAULT_ROCKETMQ_VERSION, *, quiet: bool = True) -> Path:
    """Resolve the server jars with Maven once; later calls only check the stamp file."""
    return resolve_runtime_jars(POM_DIR, version_property="rocketmq.version", version=version,
                                stamp_name=f".rocketmq-{version}-proxy", what="RocketMQ server (rocketmq-broker, rocketmq-proxy)",
                                error=RocketMQPeerError, quiet=quiet)


def ensure_ha_service() -> Path:
    """Compile LoopbackHAService against the broker jars (once per source change) and register
    it for RocketMQ's ServiceProvider; returns the classes directory for the classpath."""
    compiled = CLASSES_DIR / (HA_SERVICE_CLASS.replace(".", "/") + ".class")
    service = CLASSES_DIR / "META-INF" / "service" / "org.apache.rocketmq.store.ha.HAService"
    if compiled.exists() and service.exists() and compiled.stat().st_mtime >= HA_SERVICE_SOURCE.stat().st_mtime:
        return CLASSES_DIR
    javac = shutil.which("javac")
    if javac is None:
        raise RocketMQPeerError("javac not found: the RocketMQ peer needs a JDK 17+")
    proc = subprocess.run([javac, "-nowarn", "-d", str(CLASSES_DIR), "-cp", str(LIB_DIR / "*"), str(HA_SERVICE_SOURCE)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RocketMQPeerError(f"javac {HA_SERVICE_SOURCE.name} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    service.parent.mkdir(parents=True, exist_ok=True)
    service.write_text(HA_SERVICE_CLASS + "\n")
    return CLASSES_DIR






def free_broker_port(attempts: int = 200, avoid: tuple[int, ...] = ()) -> int:
    """A port p with p-2 .. p+1 free (and none of them in ``avoid``): the broker's listenPort,
    its fast (VIP) port listenPort-2 and its HA port listenPort+1."""
    for _ in range(attempts):
        p = free_port()
        block = (p - 2, p - 1, p, p + 1)
        if 1026 < p < 65534 and not set(block) & set(avoid) and all(port_free(q) for q in block):
            return p
    raise RocketMQPeerError("no block of four free loopback ports found for the broker")






def remoting_call(addr: str, code: int, ext_fields: dict[str, str], timeout: float = 3.0) -> tuple[int, bytes]:
    """One request with a JSON header over the RocketMQ remoting protocol; returns (code, body).

    Frame: int32 total length (excluding itself), int32 serialize type (0 = JSON) << 24 | header
    length, header, body.
    """
    host, port = addr.rsplit(":", 1)
    header = json.dumps({"code": code, "language": "JAVA", "version": 0, "opaque": 1, "flag": 0,
                         "extFields": ext_fields}).encode()
    frame = struct.pack(">ii", 4 + len(header), len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(frame)
        total = struct.unpack(">i", recv_exactly(s, 4))[0]
        if not 4 <= total <= 16 << 20:
            raise OSError(f"bad remoting frame length {total}")
        data = recv_exactly(s, total)
    header_len = struct.unpack(">i", data[:4])[0] & 0xFFFFFF
    reply = json.loads(data[4:4 + header_len])
    return int(reply.get("code", -1)), data[4 + header_len:]


def broker_properties(*, namesrv_addr: str, listen_port: int, store_dir: Path, home: Path,
                      overrides: dict[str, object] | None = None) -> dict[str, str]:
    """RocketMQ's shipped ``conf/broker.conf``, bound to loopback on our port and directory."""
    props: dict[str, object] = {
        # conf/broker.conf as distributed
        "brokerClusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerId": 0,
        "deleteWhen": "04",
        "fileReservedTime": 48,
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": "ASYNC_FLUSH",
        # where and how it listens
        "namesrvAddr": namesrv_addr,
        "listenPort": listen_port,
        "haListenPort": listen_port + 1,
        "bindAddress": "127.0.0.1",
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",
        "rocketmqHome": str(home),
        "storePathRootDir": str(store_dir),
        "storePathCommitLog": str(store_dir / "commitlog"),
        # SQL92 consumers (MessageSelector.bySql) need the property filter switched on
        "enablePropertyFilter": "true",
        # the default, spelt out: producers of new topics rely on TBW102
        "autoCreateTopicEnable": "true",
    }
    props.update(overrides or {})
    return {k: str(v) for k, v in props.items()}


def in_private_network_namespace() -> bool:
    """True when this process's network namespace has only the loopback interface (one that
    ``unshare -n`` made): nothing bound here is reachable from any other host."""
    try:
        lines = Path("/proc/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    return [ln.split(":", 1)[0].strip() for ln in lines] == ["lo"]


def proxy_config(*, namesrv_addr: str, grpc_port: int, remoting_port: int) -> dict[str, object]:
    """rmq-proxy.json for a cluster-mode proxy in front of the peer's broker (TLS test mode: a
    self-signed certificate, TLS and plaintext on the gRPC port, as RocketMQ ships it)."""
    return {"rocketMQClusterName": "DefaultCluster", "proxyMode": "cluster", "namesrvAddr": namesrv_addr,
            "grpcServerPort": grpc_port, "remotingListenPort": remoting_port, "tlsTestModeEnable": True,
            "enableProxyAutoRenew": True}


def namesrv_properties(*, port: int, home: Path) -> dict[str, str]:
    return {
        "listenPort": str(port),
        "bindAddress": "127.0.0.1",
        "rocketmqHome": str(home),
        "kvConfigPath": str(home / "namesrv" / "kvConfig.json"),
        "configStorePath": str(home / "namesrv" / "namesrv.properties"),
    }


class RocketMQPeer:
    """One Apache RocketMQ NameServer + master broker; use as a context manager."""

    def __init__(self, data_dir: str | os.PathLike[str] | None = None, *,
                 overrides: dict[str, object] | None = None, version: str = DEFAULT_ROCKETMQ_VERSION,
                 heap: str = "1g", start_timeout: float = 120.0, slaves: int = 0, proxy: bool = False,
                 proxy_overrides: dict[str, object] | None = None):
        """``slaves``: that many slave brokers (brokerId 1.., brokerRole SLAVE) of the same
        broker name, each with its own ports and store; they learn the master from the NameServer.
        ``proxy``: also start Apache's gRPC proxy (RocketMQ 5 clients), with ``proxy_overrides``
        added to its rmq-proxy.json."""
        self._own_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="rocketmq-peer-"))
        self.namesrv_port = free_port()
        self.broker_port = free_broker_port(avoid=(self.namesrv_port,))
        taken = [self.namesrv_port, self.broker_port - 2, self.broker_port - 1, self.broker_port, self.broker_port + 1]
        self.slave_ports: list[int] = []
        for _ in range(slaves):
            p = free_broker_port(avoid=tuple(taken))
            taken += [p - 2, p - 1, p, p + 1]
            self.slave_ports.append(p)
        self.slave_procs: list[subprocess.Popen[bytes]] = []
        self.overrides = dict(overrides or {})
        self.version = version
        self.heap = heap
        self.start_timeout = start_timeout
        self.namesrv_proc: subprocess.Popen[bytes] | None = None
        self.broker_proc: subprocess.Popen[bytes] | None = None
        # the gRPC proxy (RocketMQ 5 clients): binds every interface, so only in a private netns
        self.proxy = proxy
        self.proxy_overrides = dict(proxy_overrides or {})
        self.proxy_proc: subprocess.Popen[bytes] | None = None
        self.grpc_port = free_port() if proxy else 0
        self.proxy_remoting_port = free_port() if proxy else 0

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def ports(self) -> list[int]:
        extra = [self.grpc_port, self.proxy_remoting_port] if self.proxy else []
        return [self.namesrv_port, *extra] + [q for p in [self.broker_port, *self.slave_ports] for q in (p - 2, p, p + 1)]

    def _slave_routed(self, port: int) -> bool:
        try:
            code, body = remoting_call(self.namesrv_addr, GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        except (OSError, ValueError):
            return False
        return code == SUCCESS and f"127.0.0.1:{port}".encode() in body

    def _java(self, main: str, *args: str, heap: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise RocketMQPeerError("java not found: the RocketMQ peer needs a JDK 17+")
        logs = self.data_dir / "logs"
        return [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
                # everything RocketMQ writes under ~ stays in the data dir
                f"-Duser.home={self.data_dir}", f"-Drocketmq.home.dir={self.data_dir}",
                f"-Drocketmq.log.root={logs}",
                # the JDK 9+ module flags RocketMQ's own start scripts pass
                "--add-opens=java.base/java.nio=ALL-UNNAMED",
                "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
                "--add-opens=java.base/java.lang=ALL-UNNAMED",
                "--add-exports=java.base/sun.nio.ch=ALL-UNNAMED",
                "-cp", f"{CLASSES_DIR}{os.pathsep}{LIB_DIR / '*'}", main, *args]

    def _write(self, name: str, props: dict[str, str]) -> Path:
        path = self.data_dir / name
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        return path

    def _spawn(self, cmd: list[str], log_name: str) -> subprocess.Popen[bytes]:
        log = open(self.data_dir / log_name, "ab")
        try:
            return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.data_dir,
                                    start_new_session=True)
        finally:
            log.close()  # the child holds its own descriptor

    def _tbw102_routed(self) -> bool:
        try:
            code, body = remoting_call(self.namesrv_addr, GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})
        except (OSError, ValueError):
            return False
        return code == SUCCESS and self.broker_addr.encode() in body

    def start(self) -> "RocketMQPeer":
        assert not self.running(), "peer already running"
        ensure_jars(self.version)
        ensure_ha_service()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "namesrv").mkdir(exist_ok=True)
        nconf = self._write("namesrv.conf", namesrv_properties(port=self.namesrv_port, home=self.data_dir))
        bconf = self._write("broker.conf", broker_properties(
            namesrv_addr=self.namesrv_addr, listen_port=self.broker_port, store_dir=self.data_dir / "store",
            home=self.data_dir, overrides=self.overrides))
        try:
            self.namesrv_proc = self._spawn(
                self._java("org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(nconf), heap="256m"),
                "namesrv.out")
            self._wait_for(lambda: listening(self.namesrv_port), "NameServer listening", self.namesrv_proc)
            self.broker_proc = self._spawn(
                self._java("org.apache.rocketmq.broker.BrokerStartup", "-c", str(bconf), heap=self.heap),
                "broker.out")
            self._wait_for(self._tbw102_routed, "broker registered (TBW102 routed)", self.broker_proc)
            for i, port in enumerate(self.slave_ports, 1):
                overrides = {k: v for k, v in self.overrides.items() if k != "brokerRole"}
                overrides.update(brokerId=i, brokerRole="SLAVE")
                sconf = self._write(f"broker-slave{i}.conf", broker_properties(
                    namesrv_addr=self.namesrv_addr, listen_port=port, store_dir=self.data_dir / f"store-slave{i}",
                    home=self.data_dir, overrides=overrides))
                proc = self._spawn(self._java("org.apache.rocketmq.broker.BrokerStartup", "-c", str(sconf),
                                              heap=self.heap), f"broker-slave{i}.out")
                self.slave_procs.append(proc)
                self._wait_for(lambda port=port: self._slave_routed(port), f"slave {i} registered", proc)
            if self.proxy:
                self._start_proxy()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_proxy(self) -> None:
        if not in_private_network_namespace():
            raise RocketMQPeerError("RocketMQ's proxy binds its ports on every interface; start it only in a private "
                                    "network namespace (compat/bench/peers/proxy_compat.py makes one with unshare -n)")
        conf = self.data_dir / "rmq-proxy.json"
        conf.write_text(json.dumps({**proxy_config(namesrv_addr=self.namesrv_addr, grpc_port=self.grpc_port,
                                                   remoting_port=self.proxy_remoting_port), **self.proxy_overrides}))
        self.proxy_proc = self._spawn(
            self._java("org.apache.rocketmq.proxy.ProxyStartup", "-pc", str(conf), "-n", self.namesrv_addr, heap="512m"),
            "proxy.out")
        self._wait_for(lambda: listening(self.grpc_port), "proxy gRPC port listening", self.proxy_proc)

    def _wait_for(self, ready, what: str, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RocketMQPeerError(f"RocketMQ exited ({proc.returncode}) before {what}:\n{self.log_tail()}")
            if ready():
                return
            time.sleep(0.2)
        raise RocketMQPeerError(f"RocketMQ not ready ({what}) after {self.start_timeout}s:\n{self.log_tail()}")

    @staticmethod
    def _end(proc: subprocess.Popen[bytes] | None, timeout: float) -> None:
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
        except ProcessLookupError:
            pass

    def stop(self, timeout: float = 30.0) -> None:
        """Slaves, then the master (brokers unregister from the NameServer), then the NameServer."""
        try:
            self._end(self.proxy_proc, timeout)
            for proc in self.slave_procs:
                self._end(proc, timeout)
            self._end(self.broker_proc, timeout)
        finally:
            self._end(self.namesrv_proc, timeout)
        self.broker_proc = self.namesrv_proc = self.proxy_proc = None
        self.slave_procs = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(listening(p) for p in self.ports()):
            time.sleep(0.1)

    def running(self) -> bool:
        return any(p is not None and p.poll() is None
                   for p in (self.namesrv_proc, self.broker_proc, self.proxy_proc, *self.slave_procs))

    def log_tail(self, chars: int = 4000) -> str:
        parts = []
        for name in ("namesrv.out", "broker.out", "proxy.out", "logs/broker.log", "logs/namesrv.log", "logs/proxy.log"):
            try:
                text = (self.data_dir / name).read_text("utf-8", "replace")
            except OSError:
                continue
            if text.strip():
                parts.append(f"--- {name}\n{text[-chars:]}")
        return "\n".join(parts)

    def cleanup(self) -> None:
        """Remove the data directory when this peer created it."""
        if self._own_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> "RocketMQPeer":
        return self.start()  # start() stops what it started when it fails

    def __exit__(self, *exc: object) -> None:
        try:
            self.stop()
        finally:
            self.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run an Apache RocketMQ NameServer + broker on 127.0.0.1")
    ap.add_argument("--data-dir", default=None, help="keep data here (default: a temp dir, removed)")
    ap.add_argument("--version", default=DEFAULT_ROCKETMQ_VERSION)
    ap.add_argument("--heap", default="1g", help="broker heap (the NameServer gets 256m)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a broker.conf key")
    ap.add_argument("--fetch-only", action="store_true", help="resolve the jars and exit")
    args = ap.parse_args(argv)
    try:
        if args.fetch_only:
            print(ensure_jars(args.version))
            ensure_ha_service()
            return 0
        overrides = {}
        for item in args.set:
            key, sep, value = item.partition("=")
            if not sep:
                ap.error(f"--set wants KEY=VALUE, got {item!r}")
            overrides[key] = value
        peer = RocketMQPeer(args.data_dir, overrides=overrides, version=args.version, heap=args.heap)
        stop_requested = False

        def on_signal(signum, frame):
            nonlocal stop_requested
            stop_requested = True

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        with peer:
            print(f"rocketmq {args.version} serving namesrv={peer.namesrv_addr} broker={peer.broker_addr} "
                  f"data_dir={peer.data_dir}", flush=True)
            while not stop_requested and peer.running():
                time.sleep(0.5)
            if not stop_requested:
                print(f"rocketmq exited:\n{peer.log_tail()}", file=sys.stderr)
                return 1
        return 0
    except RocketMQPeerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
