"""Mutated real-client traffic on every listener (Kafka, RocketMQ remoting, gRPC): seeded, bounded
in count and time. Frames are recorded from real clients (confluent-kafka through a recording
proxy, the project's RocketMQ SDK at its transport, the RocketMQ 5 protobuf requests the official
client sends), then mutated -- bytes flipped, set to edge values, cut, spliced, and header fields
replaced by numbers outside their Java type and names far past any limit -- and sent to the node.

Afterwards the node has logged no traceback, its background work never failed, it still serves
the same clients, and every consumer group's offsets -- the clients' and what fuzzed commits changed -- are saved
(what the node answered before a graceful restart, it answers after)."""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
import time
import uuid

import pytest

from tests.support.node import RunningNode, free_port

pytestmark = pytest.mark.timeout(240)

SEED = 31
FRAMES_PER_LISTENER = 1200
SECONDS_PER_LISTENER = 20.0
INTERESTING = [0, 1, 0x7F, 0x80, 0xFF]
HUGE_NUMBERS = [str(2**31), str(-2**31 - 1), str(2**63), "-1", "99999999999999999999999", "1e9", ""]


# -- recording real clients ------------------------------------------------------------------------
class RecordingProxy:
    """A TCP proxy on loopback that records what clients send (each connection's bytes)."""

    def __init__(self, port: int, upstream: tuple[str, int]):
        self.upstream = upstream
        self.sent: list[bytearray] = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                u = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                c.close()
                continue
            buf = bytearray()
            self.sent.append(buf)
            threading.Thread(target=self._pipe, args=(c, u, buf), daemon=True).start()
            threading.Thread(target=self._pipe, args=(u, c, None), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, record: bytearray | None) -> None:
        src.settimeout(1.0)
        try:
            while not self.stop.is_set():
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                if record is not None:
                    record.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(5)

    def frames(self) -> list[bytes]:
        """Every complete length-prefixed frame the clients sent (prefix included)."""
        out = []
        for buf in self.sent:
            pos = 0
            while pos + 4 <= len(buf):
                (n,) = struct.unpack_from(">i", buf, pos)
                if n <= 0 or pos + 4 + n > len(buf):
                    break
                out.append(bytes(buf[pos:pos + 4 + n]))
                pos += 4 + n
        return out


def record_remoting_frames(node: RunningNode, topic: str, group: str) -> list[bytes]:
    """What the project's RocketMQ SDK writes: a producer and a pull consumer committing."""
    from gateway_native import transport
    from gateway_native.client import LitePullConsumer, Message, Producer
    from gateway_native.remoting.command import encode

    frames: list[bytes] = []
    real_send = transport.Connection.send

    def recording(self, cmd):
        frames.append(bytes(encode(cmd)))
        return real_send(self, cmd)

    transport.Connection.send = recording
    try:
        with Producer(f"fz_{uuid.uuid4().hex[:6]}", node.namesrv_addr, send_latency_fault_enable=False) as p:
            for i in range(5):
                p.send(Message(topic, b"native-%d" % i, keys=f"k{i}", tags="TagA"))
        c = LitePullConsumer(group, node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                             auto_commit=False).start()
        try:
            c.assign(c.fetch_message_queues(topic))
            deadline = time.monotonic() + 20
            got = 0
            while got < 5 and time.monotonic() < deadline:
                got += len(c.poll(200))
            assert got >= 5, "the native consumer read nothing"
            c.commit_sync()
        finally:
            c.shutdown()
    finally:
        transport.Connection.send = real_send
    return frames


def kafka_clients(bootstrap: str, topic: str, group: str) -> None:
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(5):
        p.produce(topic, b"kafka-%d" % i, key=b"k%d" % i, headers=[("h", b"v")])
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + 30
        while got < 5 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got += 1
        assert got == 5, "the Kafka consumer read nothing"
        c.commit(asynchronous=False)
    finally:
        c.close()


# -- mutation ----------------------------------------------------------------------------------------
def mutate_bytes(rng: random.Random, frame: bytes) -> bytes:
    """Byte-level mutation; the length prefix is kept right most of the time so the frame
    reaches the decoder behind it."""
    body = bytearray(frame[4:])
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if not body:
            body.extend(rng.randbytes(rng.randint(1, 16)))
        pos = rng.randrange(len(body))
        if op < 0.35:
            body[pos] ^= 1 << rng.randrange(8)
        elif op < 0.6:
            body[pos] = rng.choice(INTERESTING)
        elif op < 0.75:
            del body[pos:pos + rng.randint(1, 8)]
        elif op < 0.9:
            body[pos:pos] = rng.randbytes(rng.randint(1, 8))
        else:  # a 4-byte length or count inside the frame set to an edge value
            body[pos:pos + 4] = struct.pack(">i", rng.choice([-1, 0, 2**31 - 1, 0x10000, 40_000]))
    prefix = len(body) if rng.random() < 0.9 else rng.choice([len(body) + 3, max(0, len(body) - 3)])
    return struct.pack(">i", prefix) + bytes(body)


def mutate_remoting_fields(rng: random.Random, frame: bytes) -> bytes | None:
    """Field-level: a JSON-header command with header values outside their Java type, names
    over 32 KiB, or fields dropped."""
    from gateway_native.remoting.command import RemotingCommandError, decode_frame, encode

    try:
        cmd = decode_frame(frame[4:])
    except RemotingCommandError:
        return None
    fields = dict(cmd.ext_fields or {})
    if not fields:
        return None
    for _ in range(rng.randint(1, 3)):
        if not fields:
            break
        name = rng.choice(sorted(fields))
        r = rng.random()
        if r < 0.5:
            fields[name] = rng.choice(HUGE_NUMBERS)
        elif r < 0.8:
            fields[name] = rng.choice(["g", "T", "%RETRY%", "\u0001"]) * rng.choice([40_000, 300, 2])
        else:
            fields.pop(name, None)
    cmd.ext_fields = fields
    cmd.serialize_type = 0
    return bytes(encode(cmd))


def run_frames(addr: tuple[str, int], frames: list[bytes], deadline: float) -> int:
    """Each frame on its own connection, then end of stream: the node handles what it can
    decode and closes; the next frame goes once it has (or after 2 s). Returns how many were
    handled that way."""
    handled = 0
    for frame in frames:
        if time.monotonic() > deadline:
            break
        with socket.create_connection(addr, timeout=5) as s:
            try:
                s.sendall(frame)
                s.shutdown(socket.SHUT_WR)
                s.settimeout(2.0)
                while s.recv(1 << 20):
                    pass
                handled += 1
            except socket.timeout:
                pass
            except OSError:  # reset: closed by the node
                handled += 1
    return handled


GRPC_METHODS = ["QueryRoute", "Heartbeat", "SendMessage", "ReceiveMessage", "AckMessage", "QueryAssignment",
                "ChangeInvisibleDuration", "EndTransaction", "NotifyClientTermination"]


def grpc_requests(topic: str, group: str) -> dict[str, bytes]:
    from gateway_grpc.proto import definition_pb2 as pb, service_pb2 as sv

    t, g = pb.Resource(name=topic), pb.Resource(name=group)
    mq = pb.MessageQueue(topic=t, id=0, permission=pb.Permission.READ_WRITE)
    msg = pb.Message(topic=t, body=b"grpc-body", system_properties=pb.SystemProperties(
        message_id=uuid.uuid4().hex, tag="TagA", keys=["k"], message_type=pb.MessageType.NORMAL,
        body_encoding=pb.Encoding.IDENTITY))
    reqs = {
        "QueryRoute": sv.QueryRouteRequest(topic=t),
        "Heartbeat": sv.HeartbeatRequest(group=g, client_type=pb.ClientType.SIMPLE_CONSUMER),
        "SendMessage": sv.SendMessageRequest(messages=[msg]),
        "ReceiveMessage": sv.ReceiveMessageRequest(group=g, message_queue=mq, batch_size=4, auto_renew=False),
        "AckMessage": sv.AckMessageRequest(group=g, topic=t, entries=[sv.AckMessageEntry(message_id="x",
                                                                                       receipt_handle="y")]),
        "QueryAssignment": sv.QueryAssignmentRequest(topic=t, group=g),
        "ChangeInvisibleDuration": sv.ChangeInvisibleDurationRequest(group=g, topic=t, receipt_handle="y",
                                                                     message_id="x"),
        "EndTransaction": sv.EndTransactionRequest(topic=t, message_id="x", transaction_id="y"),
        "NotifyClientTermination": sv.NotifyClientTerminationRequest(group=g),
    }
    return {k: v.SerializeToString() for k, v in reqs.items()}


def fuzz_grpc(endpoint: str, requests: dict[str, bytes], rng: random.Random, count: int, deadline: float) -> int:
    import grpc

    meta = (("x-mq-client-id", "fuzz-client"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))
    sent = 0
    with grpc.insecure_channel(endpoint) as ch:
        calls = {m: ch.unary_unary(f"/apache.rocketmq.v2.MessagingService/{m}",
                                   request_serializer=lambda b: b, response_deserializer=lambda b: b)
                 for m in requests if m != "ReceiveMessage"}
        calls["ReceiveMessage"] = ch.unary_stream("/apache.rocketmq.v2.MessagingService/ReceiveMessage",
                                                  request_serializer=lambda b: b, response_deserializer=lambda b: b)
        for _ in range(count):
            if time.monotonic() > deadline:
                break
            method = rng.choice(sorted(requests))
            body = mutate_bytes(rng, struct.pack(">i", len(requests[method])) + requests[method])[4:]
            try:
                out = calls[method](body, metadata=meta, timeout=2)
                if method == "ReceiveMessage":
                    for _x in out:
                        pass
            except grpc.RpcError:
                pass  # a refusal (INVALID_ARGUMENT for bytes protobuf cannot parse) is an answer
            sent += 1
    return sent


def query_offset(addr: str, group: str, topic: str, qid: int) -> int:
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
    from gateway_native.remoting.command import FrameDecoder, RemotingCommand, encode

    h, p = addr.rsplit(":", 1)
    with socket.create_connection((h, int(p)), timeout=10) as s:
        s.sendall(encode(RemotingCommand.request(RC.QUERY_CONSUMER_OFFSET,
                                                 {"consumerGroup": group, "topic": topic, "queueId": qid})))
        dec = FrameDecoder()
        while True:
            data = s.recv(1 << 16)
            assert data
            out = dec.feed(data)
            if out:
                resp = out[0]
                return int(resp.ext_fields["offset"]) if resp.code == R.SUCCESS else -1


def test_mutated_client_frames_on_every_listener(tmp_path):
    proxy_port = free_port()
    node = RunningNode(tmp_path / "data", settings={"advertised_port": proxy_port,
                                                    "flushConsumerOffsetInterval": 500})
    node.start()
    proxy = RecordingProxy(proxy_port, ("127.0.0.1", node.kafka_port))
    rng = random.Random(SEED)
    ktopic, kgroup = f"fuzz-k-{uuid.uuid4().hex[:6]}", f"fuzz-kg-{uuid.uuid4().hex[:6]}"
    ntopic, ngroup = f"FuzzN_{uuid.uuid4().hex[:6]}", f"fuzz_ng_{uuid.uuid4().hex[:6]}"
    try:
        from tests.gateway_kafka.kafka_helpers import create_topic

        create_topic(node.kafka_bootstrap, ktopic, 2)
        kafka_clients(f"127.0.0.1:{proxy_port}", ktopic, kgroup)
        kafka_frames = proxy.frames()
        assert len(kafka_frames) > 10, "too little Kafka traffic recorded"
        native_frames = record_remoting_frames(node, ntopic, ngroup)
        assert len(native_frames) > 10, "too little remoting traffic recorded"
        committed = {q: query_offset(node.broker_addr, ngroup, ntopic, q) for q in range(4)}
        assert max(committed.values()) > 0, committed

        started = time.monotonic()
        mutated = [mutate_bytes(rng, rng.choice(kafka_frames)) for _ in range(FRAMES_PER_LISTENER)]
        assert run_frames(("127.0.0.1", node.kafka_port), mutated, time.monotonic() + SECONDS_PER_LISTENER) > 200
        remoting = []
        for _ in range(FRAMES_PER_LISTENER):
            frame = rng.choice(native_frames)
            field_level = mutate_remoting_fields(rng, frame) if rng.random() < 0.5 else None
            remoting.append(field_level or mutate_bytes(rng, frame))
        assert run_frames(("127.0.0.1", node.broker_port), remoting, time.monotonic() + SECONDS_PER_LISTENER) > 200
        assert run_frames(("127.0.0.1", node.namesrv_port), remoting[: FRAMES_PER_LISTENER // 4],
                          time.monotonic() + SECONDS_PER_LISTENER / 4) > 50
        assert fuzz_grpc(node.grpc_endpoint, grpc_requests(ntopic, ngroup), rng, FRAMES_PER_LISTENER // 3,
                         time.monotonic() + SECONDS_PER_LISTENER) > 100
        elapsed = time.monotonic() - started

        # still serving the same clients; what they commit now is saved too
        kafka_clients(node.kafka_bootstrap, ktopic, kgroup + "-after")  # (the node advertises the proxy)
        # what the node holds now (fuzzed commits to the same group included) is what it must save
        committed = {q: query_offset(node.broker_addr, ngroup, ntopic, q) for q in range(4)}
    finally:
        proxy.close()
        node.stop()
    text = node.log_tail(10**9)
    assert text.count("Traceback") == 0, text[text.find("Traceback") - 2000:text.find("Traceback") + 3000]
    assert "store_background_failed" not in text
    # every group's offsets saved: from the log, after a restart
    node.start()
    proxy = RecordingProxy(proxy_port, ("127.0.0.1", node.kafka_port))
    try:
        from confluent_kafka import Consumer, TopicPartition

        for group in (kgroup, kgroup + "-after"):
            c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": group})
            try:
                got = c.committed([TopicPartition(ktopic, 0), TopicPartition(ktopic, 1)], timeout=30)
            finally:
                c.close()
            assert sum(tp.offset for tp in got if tp.offset > 0) == 5, (group, got)
        after = {q: query_offset(node.broker_addr, ngroup, ntopic, q) for q in range(4)}
        assert after == committed, (committed, after)
    finally:
        proxy.close()
        node.stop()
    print(json.dumps({"seed": SEED, "frames_per_listener": FRAMES_PER_LISTENER, "seconds": round(elapsed, 1)}))
