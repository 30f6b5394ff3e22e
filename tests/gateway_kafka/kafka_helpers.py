"""Shared helpers for the Kafka gateway tests: unique topic names, a raw protocol connection
(for bad input and exact protocol checks), bounded polling, and thin produce/consume adapters
over the three Python clients so one scenario runs against each of them unchanged.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import time
import uuid
from typing import Any, Callable

from gateway_kafka.protocol import decode_response, encode_request

CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float = 0.05, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class RawKafka:
    """A blocking Kafka connection speaking through the project's codec."""

    def __init__(self, bootstrap: str, timeout: float = 15.0):
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = itertools.count(1)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes | None:
        head = self._read_exact(4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def request(self, api_key: int, version: int, body: dict, expect_response: bool = True) -> dict | None:
        corr = next(self.correlation)
        self.sock.sendall(encode_request(api_key, version, corr, body, "raw-test"))
        if not expect_response:
            return None
        frame = self.read_frame()
        assert frame is not None, "server closed the connection"
        got_corr, resp = decode_response(api_key, version, frame)
        assert got_corr == corr
        return resp

    def closed_by_server(self, timeout: float = 10.0) -> bool:
        """True when the server closes the connection (EOF) within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                data = self.sock.recv(65536)
                if not data:
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "RawKafka":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})], request_timeout=15)
    futures[name].result(20)


# -- produce / consume adapters ---------------------------------------------------------------
# Each takes a list of (key, value, headers) and returns what the broker acknowledged, or
# consumes a fixed number of records and returns (partition, offset, key, value, headers).

def produce(client: str, bootstrap: str, topic: str, records: list[tuple], *, acks: Any = 1,
            idempotent: bool = False, compression: str | None = None, partition: int | None = None,
            timestamps: list[int] | None = None) -> list[int]:
    """Produce ``records`` in order; returns their offsets."""
    if client == "kafka-python":
        from kafka import KafkaProducer

        p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=idempotent,
                          compression_type=compression, linger_ms=5, request_timeout_ms=15000,
                          max_request_size=8 * 1024 * 1024)
        try:
            futs = [p.send(topic, key=k, value=v, headers=list(h or []), partition=partition,
                           timestamp_ms=timestamps[i] if timestamps else None)
                    for i, (k, v, h) in enumerate(records)]
            p.flush(30)
            return [f.get(30).offset for f in futs]
        finally:
            p.close(10)
    if client == "confluent-kafka":
        from confluent_kafka import Producer

        conf = {"bootstrap.servers": bootstrap, "acks": str(acks), "enable.idempotence": idempotent,
                "linger.ms": 5, "message.max.bytes": 8 * 1024 * 1024}
        if compression:
            conf["compression.type"] = compression
        p = Producer(conf)
        results: list[Any] = [None] * len(records)

        def done(i):
            def cb(err, msg):
                results[i] = err if err is not None else ("ok", msg.offset())
            return cb

        for i, (k, v, h) in enumerate(records):
            kw = {"key": k, "value": v, "headers": list(h or []), "on_delivery": done(i)}
            if partition is not None:
                kw["partition"] = partition
            if timestamps:
                kw["timestamp"] = timestamps[i]
            p.produce(topic, **kw)
            p.poll(0)
        assert p.flush(30) == 0, "confluent producer did not deliver everything"
        for r in results:
            if not isinstance(r, tuple):
                raise RuntimeError(f"delivery failed: {r}")
        return [r[1] for r in results]
    if client == "aiokafka":
        from aiokafka import AIOKafkaProducer

        async def run():
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, enable_idempotence=idempotent,
                                 compression_type=compression, linger_ms=5, max_request_size=8 * 1024 * 1024,
                                 request_timeout_ms=15000)
            await p.start()
            try:
                futs = [await p.send(topic, key=k, value=v, headers=list(h or []), partition=partition,
                                     timestamp_ms=timestamps[i] if timestamps else None)
                        for i, (k, v, h) in enumerate(records)]
                metas = [await f for f in futs]
                return [m.offset if m is not None else -1 for m in metas]
            finally:
                await p.stop()

        return asyncio.run(asyncio.wait_for(run(), 60))
    raise ValueError(client)


def _norm_headers(headers) -> list[tuple[str, bytes | None]]:
    return [(k, v) for k, v in (headers or [])]


def consume(client: str, bootstrap: str, topic: str, count: int, *, group: str | None = None,
            offset_reset: str = "earliest", commit: bool = False, timeout: float = 30.0,
            on_ready: Callable[[], None] | None = None) -> list[tuple]:
    """Subscribe (with ``group``) or read partition 0.. by assignment, until ``count`` records.

    ``on_ready`` runs once the consumer has its assignment (used to produce after a
    "latest" consumer positioned itself). With ``commit``, offsets are committed at the end.
    """
    group = group or unique("grp")
    out: list[tuple] = []
    deadline = time.monotonic() + timeout
    if client == "kafka-python":
        from kafka import KafkaConsumer

        c = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset=offset_reset,
                          enable_auto_commit=False, fetch_max_wait_ms=200, session_timeout_ms=10000,
                          heartbeat_interval_ms=1000,
                          max_partition_fetch_bytes=8 * 1024 * 1024)
        try:
            ready = False
            while len(out) < count and time.monotonic() < deadline:
                batch = c.poll(timeout_ms=200)
                if not ready and c.assignment():
                    # make sure positions are resolved before anything is produced
                    for tp in c.assignment():
                        c.position(tp)
                    ready = True
                    if on_ready:
                        on_ready()
                for msgs in batch.values():
                    out += [(m.partition, m.offset, m.key, m.value, _norm_headers(m.headers)) for m in msgs]
            if commit:
                c.commit()
        finally:
            c.close()
        return out
    if client == "confluent-kafka":
        from confluent_kafka import Consumer

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": offset_reset,
                      "enable.auto.commit": False, "fetch.wait.max.ms": 200, "session.timeout.ms": 10000,
                      "heartbeat.interval.ms": 1000, "fetch.message.max.bytes": 8 * 1024 * 1024})
        state = {"ready": False}

        def assigned(consumer, partitions):
            state["ready"] = True

        try:
            c.subscribe([topic], on_assign=assigned)
            fired = False
            while len(out) < count and time.monotonic() < deadline:
                m = c.poll(0.2)
                if state["ready"] and not fired:
                    fired = True
                    if on_ready:
                        on_ready()
                if m is None or m.error():
                    continue
                out.append((m.partition(), m.offset(), m.key(), m.value(), _norm_headers(m.headers())))
            if commit:
                c.commit(asynchronous=False)
        finally:
            c.close()
        return out
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer

        async def run():
            c = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset=offset_reset,
                                 enable_auto_commit=False, fetch_max_wait_ms=200, session_timeout_ms=10000,
                                 heartbeat_interval_ms=1000, max_partition_fetch_bytes=8 * 1024 * 1024)
            await c.start()
            try:
                ready = False
                while len(out) < count and time.monotonic() < deadline:
                    batch = await c.getmany(timeout_ms=200)
                    if not ready and c.assignment():
                        for tp in c.assignment():
                            await c.position(tp)
                        ready = True
                        if on_ready:
                            await asyncio.get_running_loop().run_in_executor(None, on_ready)
                    for msgs in batch.values():
                        out.extend((m.partition, m.offset, m.key, m.value, _norm_headers(m.headers)) for m in msgs)
                if commit:
                    await c.commit()
            finally:
                await c.stop()
            return out

        return asyncio.run(asyncio.wait_for(run(), timeout + 30))
    raise ValueError(client)
