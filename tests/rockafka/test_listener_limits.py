"""What one client can take from a node, on every listener (Kafka, NameServer, broker, admin
HTTP, gRPC): connections past the limits are refused, slow senders and idle connections are closed
by their timeouts, big requests wait for memory instead of piling up, and running close to the
descriptor limit refuses new connections -- while healthy clients (real Kafka and RocketMQ
clients, from another loopback address) keep producing and consuming throughout.

Misbehaving clients connect from 127.0.0.2 (all of 127/8 is loopback), so per-IP limits hit
them and not the healthy clients on 127.0.0.1.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import time
import urllib.request
import uuid

import pytest

from gateway_native.client import LitePullConsumer, Message, MQClientError, Producer
from tests.gateway_kafka.kafka_helpers import create_topic
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)

BAD_IP = "127.0.0.2"


def connect(addr: tuple[str, int], source: str = BAD_IP) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(addr)
    return s


def closed_by_peer(s: socket.socket, within: float) -> bool:
    """EOF (or reset) from the server within ``within`` seconds."""
    s.settimeout(within)
    try:
        while True:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def metric(node: RunningNode, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(node.admin_url + "/metrics", timeout=10).read().decode()
    m = re.search(rf"^{re.escape(name)}{re.escape(labels)} (\S+)$", text, re.M)
    assert m, f"{name}{labels} not in /metrics"
    return float(m.group(1))


def addrs(node: RunningNode) -> dict[str, tuple[str, int]]:
    return {"kafka": ("127.0.0.1", node.kafka_port), "broker": ("127.0.0.1", node.broker_port),
            "namesrv": ("127.0.0.1", node.namesrv_port), "admin": ("127.0.0.1", node.admin_port),
            "grpc": ("127.0.0.1", node.grpc_port)}


class Healthy:
    """A Kafka producer + consumer and a RocketMQ producer + pull consumer, on their own
    connections from 127.0.0.1, each round trip checked: produced, then read back."""

    def __init__(self, node: RunningNode):
        self.node = node
        self.ktopic = f"healthy-{uuid.uuid4().hex[:6]}"
        self.ntopic = f"Healthy_{uuid.uuid4().hex[:6]}"
        self.rounds = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "Healthy":
        from confluent_kafka import Consumer, Producer as KProducer, TopicPartition

        create_topic(self.node.kafka_bootstrap, self.ktopic, 1)
        self.kp = KProducer({"bootstrap.servers": self.node.kafka_bootstrap, "linger.ms": 0})
        self.kc = Consumer({"bootstrap.servers": self.node.kafka_bootstrap, "group.id": "healthy",
                            "fetch.wait.max.ms": 100, "enable.auto.commit": False})
        self.kc.assign([TopicPartition(self.ktopic, 0, 0)])
        self.np = Producer("healthy", self.node.namesrv_addr, send_latency_fault_enable=False).start()
        self.np.send(Message(self.ntopic, b"first"))
        self.nc = LitePullConsumer(f"healthy_{uuid.uuid4().hex[:6]}", self.node.namesrv_addr,
                                   consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False).start()
        deadline = time.monotonic() + 15
        while True:  # the broker tells the NameServer about a new topic within a second
            try:
                self.nc.assign(self.nc.fetch_message_queues(self.ntopic))
                break
            except MQClientError:
                assert time.monotonic() < deadline, "the new topic never got a route"
                time.sleep(0.1)
        self._read_native(b"first")
        self._thread.start()
        return self

    def _read_native(self, body: bytes) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if any(m.body == body for m in self.nc.poll(200)):
                return
        raise AssertionError(f"native message {body!r} not read back")

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            try:
                value = b"h-%d" % i
                self.kp.produce(self.ktopic, value)
                assert self.kp.flush(15) == 0, "Kafka produce not delivered"
                deadline = time.monotonic() + 15
                while True:
                    m = self.kc.poll(0.2)
                    if m is not None and not m.error() and m.value() == value:
                        break
                    assert time.monotonic() < deadline, "Kafka record not consumed"
                self.np.send(Message(self.ntopic, value))
                self._read_native(value)
                self.rounds += 1
            except Exception as exc:  # kept and asserted on by the test
                self.errors.append(f"round {i}: {type(exc).__name__}: {exc}")
                return

    def progress(self, rounds: int = 3, timeout: float = 60) -> None:
        """Wait until ``rounds`` more round trips completed (fails on any error)."""
        target = self.rounds + rounds
        deadline = time.monotonic() + timeout
        while self.rounds < target and not self.errors and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not self.errors, self.errors
        assert self.rounds >= target, "healthy clients stopped making progress"

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.kc.close()
        self.np.shutdown()
        self.nc.shutdown()


def test_connections_past_the_limits_are_refused_healthy_clients_unaffected(make_node):
    node = make_node({"max_connections_per_ip": 20, "max_connections": 120})
    with Healthy(node) as healthy:
        healthy.progress()
        # per IP: 20 from 127.0.0.2 stay, the rest are closed at once, on every listener
        for name, addr in addrs(node).items():
            open_before = metric(node, "rockafka_connections", f'{{listener="{name}"}}')
            held = [connect(addr) for _ in range(20)]
            extra = [connect(addr) for _ in range(5)]
            assert all(closed_by_peer(s, 10) for s in extra), f"{name}: connections past the per-IP limit stayed"
            assert not any(closed_by_peer(s, 0.2) for s in held[-3:]), f"{name}: connections within the limit closed"
            healthy.progress(1)
            for s in held + extra:
                s.close()
            # the node frees the slots once it reads the closes (the NameServer on its own
            # thread): the next listener's 20 must find the per-IP count back where it was
            deadline = time.monotonic() + 10
            while metric(node, "rockafka_connections", f'{{listener="{name}"}}') > open_before:
                assert time.monotonic() < deadline, f"{name}: closed connections still counted"
                time.sleep(0.05)
        assert metric(node, "rockafka_connections_refused_total", '{reason="max_connections_per_ip"}') >= 20
        # overall: fill the node from several addresses; past max_connections everyone new is
        # refused, the healthy clients' open connections keep working
        held = []
        for i in range(3, 20):
            for _ in range(10):
                s = connect(("127.0.0.1", node.kafka_port), f"127.0.0.{i}")
                held.append(s)
        assert sum(closed_by_peer(s, 0.5) for s in held[-30:]) >= 20, "max_connections not enforced"
        healthy.progress(2)
        for s in held:
            s.close()
        assert metric(node, "rockafka_connections_refused_total", '{reason="max_connections"}') > 0
        # once they are gone, new connections are welcome again
        deadline = time.monotonic() + 10
        while True:
            s = connect(("127.0.0.1", node.kafka_port), "127.0.0.5")
            ok = not closed_by_peer(s, 0.3)
            s.close()
            if ok or time.monotonic() > deadline:
                break
        assert ok, "new connections still refused after the others left"
        healthy.progress(1)


def slow_frame(listener: str) -> tuple[bytes, bytes]:
    """A length prefix (plus the start of a request) and the rest, to be sent a byte at a time."""
    if listener == "admin":
        head = b"POST /api/dlq/g/resend HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n"
        return head, b"X-Slow: " + b"a" * 200
    body = b"\x00" * 200
    return struct.pack(">i", len(body)), body


def test_slow_senders_are_closed_by_the_timeout_while_healthy_clients_go_on(make_node):
    node = make_node({"request_receive_timeout_ms": 1500})
    with Healthy(node) as healthy:
        healthy.progress()
        slow = []
        # (not the gRPC port: grpcio reads its own HTTP/2 frames, no request timeout applies there)
        for name, addr in addrs(node).items():
            if name == "grpc":
                continue
            for _ in range(10):
                s = connect(addr)
                head, _rest = slow_frame(name)
                s.sendall(head)
                slow.append((name, s))
        stop = threading.Event()

        def trickle():  # one byte a second per connection, as the slow clients seen did
            i = 0
            while not stop.is_set() and i < 60:
                for name, s in slow:
                    try:
                        s.send(slow_frame(name)[1][i:i + 1])
                    except OSError:
                        pass
                i += 1
                stop.wait(1.0)
        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            healthy.progress(2)
            deadline = time.monotonic() + 30
            open_ = list(slow)
            while open_ and time.monotonic() < deadline:
                open_ = [(n, s) for n, s in open_ if not closed_by_peer(s, 0.1)]
            assert not open_, f"slow senders still connected: {sorted({n for n, _ in open_})}"
            healthy.progress(2)
        finally:
            stop.set()
            t.join(10)
            for _, s in slow:
                s.close()
        assert metric(node, "rockafka_connections_closed_total", '{reason="request_receive_timeout"}') >= 30


def test_idle_connections_are_closed_on_every_listener(make_node):
    node = make_node({"connections_max_idle_ms": 1000, "server_channel_max_idle_time_seconds": 1,
                      "grpc_client_idle_time_mills": 1000})
    conns = [(name, connect(addr)) for name, addr in addrs(node).items()]
    # the gRPC client's HTTP/2 preface and SETTINGS (the connection reaches grpcio, then stays silent)
    dict(conns)["grpc"].sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    for name, s in conns:
        assert closed_by_peer(s, 20), f"{name}: idle connection not closed"
        s.close()
    assert metric(node, "rockafka_connections_closed_total", '{reason="idle"}') >= 4


def vm_hwm_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_big_requests_wait_for_memory_instead_of_piling_up(make_node):
    """Four 48 MiB requests at once with a 32 MiB request budget: they are read one after
    another (the others' sockets are not read meanwhile), so the node's memory peak grows by
    about one request, not four; healthy clients go on."""
    node = make_node({"queued_max_request_bytes": 32 << 20})
    size = 48 << 20
    with Healthy(node) as healthy:
        healthy.progress()
        before = vm_hwm_kb(node.proc.pid)
        payload = struct.pack(">i", size) + b"\x00" * size  # a Kafka frame that decodes to nothing valid

        def send(s: socket.socket) -> None:
            try:
                s.sendall(payload)
            except OSError:
                pass
        socks = [connect(("127.0.0.1", node.kafka_port), f"127.0.0.{10 + i}") for i in range(4)]
        senders = [threading.Thread(target=send, args=(s,), daemon=True) for s in socks]
        for t in senders:
            t.start()
        for s in socks:
            assert closed_by_peer(s, 60), "a big malformed request was not answered by closing"
        for t in senders:
            t.join(30)
        healthy.progress(2)
        grown_mib = (vm_hwm_kb(node.proc.pid) - before) / 1024
        assert grown_mib < 2.5 * size / (1 << 20), f"memory grew {grown_mib:.0f} MiB for 4 x 48 MiB requests"
        assert metric(node, "rockafka_request_budget_waits_total") >= 1
        assert metric(node, "rockafka_request_bytes_in_flight") < size
        # a real large request still goes through whole (read in chunks past 1 MiB)
        from tests.gateway_kafka.kafka_helpers import consume, produce

        big = bytes(range(256)) * (3 * 4096)  # 3 MiB
        [offset] = produce("confluent-kafka", node.kafka_bootstrap, healthy.ktopic, [(b"big", big, [])])
        got = [r for r in consume("confluent-kafka", node.kafka_bootstrap, healthy.ktopic, offset + 1, timeout=60)
               if r[1] == offset]
        assert got and got[0][3] == big


class LowFdNode(RunningNode):
    """A node started with a small descriptor limit (soft = hard), as on a crowded host."""

    limit = 600

    def args(self) -> list[str]:
        return ["prlimit", f"--nofile={self.limit}:{self.limit}", "--"] + super().args()


def test_near_the_descriptor_limit_new_connections_are_refused_and_the_store_keeps_working(tmp_path):
    import shutil

    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is needed to start a node with a small descriptor limit")
    node = LowFdNode(tmp_path / "data")
    with node:
        with Healthy(node) as healthy:
            healthy.progress()
            flood = []
            for i in range(900):  # more than the node's whole descriptor table
                try:
                    flood.append(connect(("127.0.0.1", node.kafka_port), f"127.0.1.{1 + i % 200}"))
                except OSError:
                    break
            refused = sum(closed_by_peer(s, 0.05) for s in flood[-200:])
            assert refused >= 100, "connections were not refused near the descriptor limit"
            healthy.progress(2)
            # the store still opens files: new topics (new consume-queue files) still work, sent by
            # a client that was connected before (new connections are refused now)
            for t in range(20):
                sent = healthy.np.send(Message(f"FdTopic{t}_{uuid.uuid4().hex[:4]}", b"x"))
                assert sent.status.name == "SEND_OK"
            for s in flood:
                s.close()
            healthy.progress(1)
            assert metric(node, "rockafka_connections_refused_total", '{reason="open_files"}') > 0
        log = node.log_tail(10**8)
        assert "Too many open files" not in log and "Traceback" not in log


def test_a_flood_of_idle_and_half_open_connections_from_one_address_starves_no_one(make_node):
    """One address (127.0.0.2) opens more connections than the node takes in all, on the Kafka,
    broker and NameServer listeners; a third of them send half a length prefix and stop. New
    clients from 127.0.0.1 (a Kafka producer and consumer, a RocketMQ producer) are still
    served: the node sheds the flood's oldest idle connections for them; the half-open ones are
    closed by the request receive timeout, not only after the idle one."""
    from confluent_kafka import Consumer, Producer as KProducer, TopicPartition

    node = make_node({"max_connections": 150, "request_receive_timeout_ms": 1500})
    topic = f"flood-{uuid.uuid4().hex[:6]}"
    create_topic(node.kafka_bootstrap, topic, 1)
    targets = [("127.0.0.1", node.kafka_port), ("127.0.0.1", node.broker_port), ("127.0.0.1", node.namesrv_port)]
    flood, half_open = [], []
    for i in range(240):
        try:
            s = connect(targets[i % 3])
        except OSError:
            continue
        if i % 3 == 0 and len(half_open) < 40:
            s.sendall(b"\x00\x00")  # half of a length prefix, then nothing
            half_open.append(s)
        else:
            flood.append(s)
    try:
        p = KProducer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 0, "message.timeout.ms": 30_000})
        p.produce(topic, b"through the flood")
        assert p.flush(30) == 0, "a new Kafka producer was not served during the flood"
        c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}",
                      "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        got = None
        while got is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got = m.value()
        c.close()
        assert got == b"through the flood", "a new Kafka consumer was not served during the flood"
        np = Producer(f"flood_{uuid.uuid4().hex[:6]}", node.namesrv_addr, send_latency_fault_enable=False).start()
        try:
            assert np.send(Message(f"Flood_{uuid.uuid4().hex[:6]}", b"x")).status.name == "SEND_OK"
        finally:
            np.shutdown()
        deadline = time.monotonic() + 30
        open_ = list(half_open)
        while open_ and time.monotonic() < deadline:
            open_ = [s for s in open_ if not closed_by_peer(s, 0.1)]
        assert not open_, f"{len(open_)} connections with half a length prefix still open"
        assert metric(node, "rockafka_connections_closed_total", '{reason="shed"}') > 0
        assert metric(node, "rockafka_connections_closed_total", '{reason="request_receive_timeout"}') >= len(half_open)
    finally:
        for s in flood + half_open:
            s.close()
    assert "Traceback" not in node.log_tail(10**8)


def test_one_address_is_limited_by_default(make_node):
    """max_connections_per_ip is on by default (1000): past it one address's new connections are
    refused, while another address is still welcome."""
    import selectors

    node = make_node({})
    held = []
    try:
        for _ in range(1010):
            held.append(connect(("127.0.0.1", node.kafka_port), "127.0.0.4"))
        deadline = time.monotonic() + 30
        while metric(node, "rockafka_connections_refused_total", '{reason="max_connections_per_ip"}') < 10:
            assert time.monotonic() < deadline, "no connection refused past the default per-address limit"
            time.sleep(0.1)
        sel = selectors.DefaultSelector()
        for s in held:
            sel.register(s, selectors.EVENT_READ)
        closed = {key.fileobj for key, _ in sel.select(timeout=1.0)}  # EOF: readable
        sel.close()
        assert len(held) - len(closed) == 1000, f"{len(held) - len(closed)} connections of one address stay"
        other = connect(("127.0.0.1", node.kafka_port), "127.0.0.3")
        assert not closed_by_peer(other, 0.3)
        other.close()
    finally:
        for s in held:
            s.close()
