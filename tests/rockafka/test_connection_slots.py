"""No connection slot outlives its socket, on any listener: 1,000 client sessions of each protocol
(Kafka, RocketMQ remoting on the NameServer and broker ports, RocketMQ 5 gRPC) are opened and
closed in every way a client closes -- at once, after a real request, half-closed after a
request (FIN first, as the official gRPC clients' ``shutdown()`` does after GOAWAY), reset --
and afterwards every connection gauge is back where it started and a node limited to
``maxConnectionsPerIp=40`` still admits 30 new connections from the same address.
"""

from __future__ import annotations

import asyncio
import re
import socket
import struct
import time
import urllib.request

import grpc
import pytest

from gateway_grpc.proto import definition_pb2, service_pb2, service_pb2_grpc
from gateway_native.remoting.command import RemotingCommand, encode
from tests.support.node import RunningNode

SESSIONS = 1000
PER_IP = 40
CONCURRENCY = 16
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + empty SETTINGS


def kafka_api_versions(correlation: int) -> bytes:
    client = b"slots-test"
    body = struct.pack(">hhih", 18, 0, correlation, len(client)) + client
    return struct.pack(">i", len(body)) + body


def remoting_request(code: int, fields: dict[str, object]) -> bytes:
    return encode(RemotingCommand.request(code, fields))


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))
    return await asyncio.wait_for(reader.readexactly(size), 10)


async def session(port: int, i: int, request: bytes | None, framed: bool) -> None:
    """One client session; ``i % 4`` picks how it ends. Kafka and remoting requests must be
    answered; a bare HTTP/2 preface may be cut short by grpcio, which is one more way to end."""
    try:
        await _session(port, i, request, framed)
    except (ConnectionError, OSError):
        if framed:
            raise


async def _session(port: int, i: int, request: bytes | None, framed: bool) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    style = i % 4
    try:
        if style == 0 or request is None and style != 3:  # connect, then close at once
            return
        if style == 3:  # reset: SO_LINGER 0 makes close() send RST
            writer.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            if request is not None:
                writer.write(request)
            return
        writer.write(request)
        await writer.drain()
        if framed:
            await _read_frame(reader)
        else:  # HTTP/2: the server's SETTINGS arrive
            await asyncio.wait_for(reader.read(9), 10)
        if style == 2:  # half close, then wait for the server to finish
            writer.write_eof()
            while await asyncio.wait_for(reader.read(65536), 10):
                pass
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass


async def many(port: int, make_request, framed: bool, count: int) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(i: int) -> None:
        async with sem:
            await session(port, i, make_request(i), framed)

    await asyncio.gather(*(one(i) for i in range(count)))


def connection_gauges(node: RunningNode) -> dict[str, float]:
    text = urllib.request.urlopen(node.admin_url + "/metrics", timeout=10).read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(r'^rockafka_connections\{listener="(\w+)"\} (\S+)$', text, re.M)}


def wait_gauges(node: RunningNode, expected: dict[str, float], timeout: float = 30.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while True:
        got = connection_gauges(node)
        if all(got.get(k) == v for k, v in expected.items()) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def grpc_channel_sessions(node: RunningNode, count: int) -> None:
    """Real gRPC clients: HTTP/2 handshake, a QueryRoute call, then a graceful close."""
    request = service_pb2.QueryRouteRequest(topic=definition_pb2.Resource(name="slots"),
                                            endpoints=definition_pb2.Endpoints(addresses=[
                                                definition_pb2.Address(host="127.0.0.1", port=node.grpc_port)]))
    for _ in range(count):
        with grpc.insecure_channel(node.grpc_endpoint) as channel:
            response = service_pb2_grpc.MessagingServiceStub(channel).QueryRoute(request, timeout=10)
            assert response.status.code in (definition_pb2.Code.OK, definition_pb2.Code.TOPIC_NOT_FOUND)


def official_client_runs(node: RunningNode, runs: int) -> None:
    """The official RocketMQ 5 Python client: start a producer, send, shut down (the leak's origin)."""
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    for n in range(runs):
        producer = Producer(ClientConfiguration(node.grpc_endpoint, Credentials()), ("slots",))
        producer.startup()
        m = Message()
        m.topic, m.body = "slots", f"run {n}".encode()
        assert producer.send(m).message_id
        producer.shutdown()


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = RunningNode(tmp_path_factory.mktemp("slots") / "data",
                    settings={"maxConnectionsPerIp": PER_IP, "autoCreateTopicEnable": "true"})
    with n:
        yield n


def test_every_listener_returns_its_slots(node):
    baseline = wait_gauges(node, {"kafka": 0, "broker": 0, "grpc": 0})
    assert baseline["kafka"] == baseline["broker"] == baseline["grpc"] == 0, baseline

    async def run_all() -> None:
        await many(node.kafka_port, lambda i: kafka_api_versions(i), True, SESSIONS)
        await many(node.broker_port, lambda i: remoting_request(30, {"topic": "slots", "queueId": 0}), True, SESSIONS)
        await many(node.namesrv_port, lambda i: remoting_request(105, {"topic": "slots"}), True, SESSIONS)
        await many(node.grpc_port, lambda i: H2_PREFACE, False, SESSIONS - 100)

    asyncio.run(run_all())
    grpc_channel_sessions(node, 97)
    official_client_runs(node, 3)

    after = wait_gauges(node, {k: baseline[k] for k in ("kafka", "broker", "namesrv", "grpc", "admin")})
    assert {k: after[k] for k in ("kafka", "broker", "namesrv", "grpc")} == \
        {k: baseline[k] for k in ("kafka", "broker", "namesrv", "grpc")}, (baseline, after)

    # nothing counted against 127.0.0.1 is left: 30 new connections at once are all admitted
    async def hold_many() -> int:
        held = []
        try:
            for i in range(30):
                reader, writer = await asyncio.open_connection("127.0.0.1", node.kafka_port)
                writer.write(kafka_api_versions(i))
                held.append((reader, writer))
            answered = 0
            for reader, _ in held:
                try:
                    await _read_frame(reader)
                    answered += 1
                except (asyncio.IncompleteReadError, ConnectionError):
                    pass
            return answered
        finally:
            for _, writer in held:
                writer.close()

    assert asyncio.run(hold_many()) == 30
    text = urllib.request.urlopen(node.admin_url + "/metrics", timeout=10).read().decode()
    assert 'rockafka_connections_refused_total{reason="max_connections_per_ip"} 0.0' in text
