"""Golden requests from real clients: kafka-python, confluent-kafka (librdkafka) and aiokafka.

A small capture broker (below) listens on a free loopback port and answers ApiVersions,
Metadata and Produce with this codec. Each client produces a few records to it; the test
decodes the raw request frames the client really sent and checks every field the client was
asked to send (acks, topic, partition, keys, values, headers, timestamps, compression), and
that the client accepted our responses (its delivery callback / future reports the offset).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
import uuid

import pytest

from engine import record_batch as rb
from gateway_kafka.protocol import (
    ApiKey,
    ErrorCode,
    UnsupportedVersionError,
    api_schema,
    declared_api_keys,
    decode_request,
    encode_response,
)

TOPIC = "golden"
TOPIC_ID = uuid.UUID("0f0e0d0c-0b0a-0908-0706-050403020100")


class CaptureBroker:
    """Answers just enough of the protocol for a producer; keeps every raw frame it got."""

    def __init__(self, advertise: dict[int, tuple[int, int]] | None = None) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.frames: list[bytes] = []
        self.requests = []
        self.errors: list[str] = []
        # advertise every declared API: librdkafka only writes RecordBatch v2 when the
        # broker also advertises Fetch v4+ (its MsgVer2 feature check)
        self.advertise = advertise or {k: api_schema(k)[:2] for k in declared_api_keys()}
        self.offsets = 0
        self.log: list[bytes] = []  # batches served by Fetch, base offsets already set
        self.fetch_versions: list[int] = []
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._stopped = False
        self._stop_event = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_exact(self, conn, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _serve(self, conn) -> None:
        try:
            while True:
                head = self._read_exact(conn, 4)
                if head is None:
                    return
                frame = self._read_exact(conn, struct.unpack(">i", head)[0])
                if frame is None:
                    return
                with self._lock:
                    self.frames.append(frame)
                try:
                    req = decode_request(frame)
                    lo, hi = self.advertise.get(req.header.api_key, (0, -1))
                    if not lo <= req.header.api_version <= hi:  # narrower than the codec
                        raise UnsupportedVersionError(req.header.api_key, req.header.api_version,
                                                      req.header.correlation_id)
                except UnsupportedVersionError as exc:
                    # KIP-511: answer ApiVersions in a v0 body so the client can downgrade
                    if exc.api_key != ApiKey.API_VERSIONS:
                        self.errors.append(str(exc))
                        return
                    conn.sendall(encode_response(ApiKey.API_VERSIONS, 0, exc.correlation_id, {
                        "error_code": ErrorCode.UNSUPPORTED_VERSION, "api_keys": self._api_keys()}))
                    continue
                with self._lock:
                    self.requests.append(req)
                body = self._answer(req)
                if body is None:
                    self.errors.append(f"unexpected api {req.header.api_key}")
                    return
                if req.header.api_key == ApiKey.PRODUCE and req.body["acks"] == 0:
                    continue
                conn.sendall(encode_response(req.header.api_key, req.header.api_version,
                                             req.header.correlation_id, body))
        except OSError:
            return
        except Exception as exc:  # recorded, so the test fails with the reason
            self.errors.append(repr(exc))

    def _api_keys(self):
        return [{"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.advertise.items())]

    def _answer(self, req):
        key = req.header.api_key
        if key == ApiKey.API_VERSIONS:
            return {"error_code": 0, "api_keys": self._api_keys()}
        if key == ApiKey.METADATA:
            names = [t["name"] for t in (req.body.get("topics") or [])] or [TOPIC]
            return {
                "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": self.port}],
                "cluster_id": "capture-cluster", "controller_id": 0,
                "topics": [{"error_code": 0, "name": n, "topic_id": TOPIC_ID, "partitions": [
                    {"error_code": 0, "partition_index": 0, "leader_id": 0, "leader_epoch": 0,
                     "replica_nodes": [0], "isr_nodes": [0]}]} for n in names],
            }
        if key == ApiKey.PRODUCE:
            responses = []
            for topic in req.body["topic_data"]:
                parts = []
                for part in topic["partition_data"]:
                    with self._lock:
                        base = self.offsets
                        self.offsets += sum(rb.record_count(b) for b in rb.iter_batches(part["records"]))
                    parts.append({"index": part["index"], "error_code": 0, "base_offset": base})
                responses.append({"name": topic["name"], "partition_responses": parts})
            return {"responses": responses}
        if key == ApiKey.FIND_COORDINATOR:
            # consumers with a group id look one up even when they only assign partitions;
            # this broker has none, which clients treat as retriable
            no = {"error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE, "node_id": -1, "port": -1,
                  "error_message": ErrorCode.COORDINATOR_NOT_AVAILABLE.message}
            keys = req.body.get("coordinator_keys") or [req.body.get("key", "")]
            return {**no, "coordinators": [{**no, "key": k} for k in keys]}
        if key == ApiKey.LIST_OFFSETS:
            end = self._log_end()
            return {"topics": [{"name": t["name"], "partitions": [
                {"partition_index": p["partition_index"], "error_code": 0,
                 "offset": 0 if p["timestamp"] == -2 else end,
                 "old_style_offsets": [0 if p["timestamp"] == -2 else end]}
                for p in t["partitions"]]} for t in req.body["topics"]]}
        if key == ApiKey.OFFSET_FOR_LEADER_EPOCH:
            return {"topics": [{"topic": t["topic"], "partitions": [
                {"partition": p["partition"], "error_code": 0, "leader_epoch": 0,
                 "end_offset": self._log_end()} for p in t["partitions"]]} for t in req.body["topics"]]}
        if key == ApiKey.FETCH:
            self.fetch_versions.append(req.header.api_version)
            end = self._log_end()
            responses = []
            for t in req.body["topics"]:
                parts = []
                for p in t["partitions"]:
                    # records as a list of buffers: the codec writes them back to back
                    chunks = [b for b in self.log if rb.parse_header(b).last_offset >= p["fetch_offset"]]
                    parts.append({"partition_index": p["partition"], "error_code": 0,
                                  "high_watermark": end, "last_stable_offset": end,
                                  "log_start_offset": 0, "records": chunks})
                responses.append({"topic": t.get("topic") or TOPIC, "topic_id": TOPIC_ID,
                                  "partitions": parts})
            if not any(p["records"] for r in responses for p in r["partitions"]):
                # nothing new: hold the fetch briefly as a broker's max_wait_ms does
                self._stop_event.wait(min(req.body["max_wait_ms"], 100) / 1000)
            return {"responses": responses}
        return None

    def _log_end(self) -> int:
        return rb.parse_header(self.log[-1]).last_offset + 1 if self.log else 0

    def produce_requests(self):
        with self._lock:
            return [r for r in self.requests if r.header.api_key == ApiKey.PRODUCE]

    def close(self) -> None:
        self._stopped = True
        self._stop_event.set()
        self.sock.close()
        for c in self._conns:
            try:
                c.close()
            except OSError:
                pass


@pytest.fixture
def broker():
    b = CaptureBroker()
    yield b
    b.close()


def wait_for(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def records_of(requests):
    out = []
    for req in requests:
        for topic in req.body["topic_data"]:
            assert topic["name"] == TOPIC
            for part in topic["partition_data"]:
                assert part["index"] == 0
                for batch in rb.iter_batches(part["records"]):
                    header = rb.validate_batch(batch)
                    out.extend((header, r) for r in rb.decode_records(batch))
    return out


SENT = [(b"k%d" % i if i % 2 == 0 else None, b"value-%d-" % i * (i + 1), [("h%d" % i, b"x" * i)])
        for i in range(6)]
NOW_MS = 1_700_000_123_000


def check_records(got, codec_id):
    assert [(r.key, r.value, r.headers) for _h, r in got] == [(k, v, h) for k, v, h in SENT]
    assert all(h.compression == codec_id for h, _r in got)
    assert [r.absolute_timestamp(h) for h, r in got] == [NOW_MS + i for i in range(len(SENT))]


def test_api_versions_request_golden_bytes_from_librdkafka(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                                  "client.id": "golden-rdkafka", "socket.timeout.ms": 5000})
    try:
        wait_for(lambda: any(r.header.api_key == ApiKey.METADATA for r in broker.requests) or
                 (p.poll(0.05) or False), "librdkafka metadata request")
    finally:
        p.flush(5)
    first = broker.frames[0]
    api_key, version = struct.unpack_from(">hh", first)
    assert api_key == ApiKey.API_VERSIONS
    req = decode_request(first)
    assert req.header.client_id == "golden-rdkafka"
    if version >= 3:
        assert req.body["client_software_name"] == "confluent-kafka-python"
        assert req.body["client_software_version"]
    assert not broker.errors


def test_librdkafka_all_topics_metadata_request(broker):
    # librdkafka 2.x writes three bytes after an all-topics Metadata v12 body; the codec must
    # read the request as Kafka brokers do (ignoring them) and the client must accept the answer
    confluent_kafka = pytest.importorskip("confluent_kafka")
    p = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    md = p.list_topics(timeout=10)
    assert list(md.topics) == [TOPIC]
    assert md.cluster_id == "capture-cluster" and list(md.brokers) == [0]
    assert not broker.errors
    metadata = [r for r in broker.requests if r.header.api_key == ApiKey.METADATA]
    assert any(r.body["topics"] is None for r in metadata), "an all-topics request was sent"


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_produce_request(broker, codec):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    delivered = []
    p = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.port}", "client.id": "golden-rdkafka",
        "acks": "all", "compression.codec": codec, "linger.ms": 50,
        "enable.idempotence": False, "message.timeout.ms": 20000,
    })
    for i, (k, v, h) in enumerate(SENT):
        p.produce(TOPIC, value=v, key=k, headers=h, partition=0, timestamp=NOW_MS + i,
                  on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert p.flush(20) == 0
    assert not broker.errors
    assert [err for err, _ in delivered] == [None] * len(SENT)
    assert sorted(off for _, off in delivered) == list(range(len(SENT)))
    reqs = broker.produce_requests()
    assert reqs and all(r.body["acks"] == -1 for r in reqs)
    codec_ids = {name: cid for cid, name in rb.COMPRESSION_NAMES.items()}
    check_records(records_of(reqs), codec_ids[codec])


def test_kafka_python_produce_request(broker):
    kafka = pytest.importorskip("kafka")
    producer = kafka.KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}", acks=1,
                                   client_id="golden-kafka-python", linger_ms=50,
                                   enable_idempotence=False, compression_type="gzip",
                                   request_timeout_ms=20000)
    try:
        futures = [producer.send(TOPIC, value=v, key=k, headers=h, partition=0,
                                 timestamp_ms=NOW_MS + i) for i, (k, v, h) in enumerate(SENT)]
        producer.flush(20)
        offsets = [f.get(timeout=20).offset for f in futures]
    finally:
        producer.close(5)
    assert not broker.errors
    assert offsets == list(range(len(SENT)))
    reqs = broker.produce_requests()
    assert all(r.body["acks"] == 1 and r.header.client_id == "golden-kafka-python" for r in reqs)
    check_records(records_of(reqs), rb.COMPRESSION_GZIP)


def test_aiokafka_produce_request(broker):
    aiokafka = pytest.importorskip("aiokafka")

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port}",
                                             client_id="golden-aiokafka", acks=1, linger_ms=50,
                                             request_timeout_ms=20000)
        await producer.start()
        try:
            futs = [await producer.send(TOPIC, value=v, key=k, headers=h, partition=0,
                                        timestamp_ms=NOW_MS + i) for i, (k, v, h) in enumerate(SENT)]
            return [(await f).offset for f in futs]
        finally:
            await producer.stop()

    offsets = asyncio.run(asyncio.wait_for(run(), 30))
    assert not broker.errors
    assert offsets == list(range(len(SENT)))
    check_records(records_of(broker.produce_requests()), rb.COMPRESSION_NONE)


def test_kip511_too_new_api_versions_request_is_downgraded():
    # The broker supports ApiVersions 0-2 only: librdkafka's first ApiVersions (v3+) gets
    # UNSUPPORTED_VERSION in a v0 body (header v0) encoded by this codec, and the client
    # retries with a version from that body.
    advertise = {k: api_schema(k)[:2] for k in declared_api_keys()}
    advertise[ApiKey.API_VERSIONS] = (0, 2)
    b = CaptureBroker(advertise=advertise)
    try:
        confluent_kafka = pytest.importorskip("confluent_kafka")
        p = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{b.port}",
                                      "enable.idempotence": False})
        p.produce(TOPIC, value=b"after-downgrade", partition=0)
        assert p.flush(20) == 0
        versions = [struct.unpack_from(">hh", f) for f in b.frames]
        api_versions = [v for k, v in versions if k == ApiKey.API_VERSIONS]
        assert api_versions[0] >= 3 and api_versions[-1] <= 2
        assert [r.value for _h, r in records_of(b.produce_requests())] == [b"after-downgrade"]
        assert not b.errors
    finally:
        b.close()


def test_every_declared_api_has_a_key_name():
    assert sorted(int(k) for k in ApiKey) == declared_api_keys()


# --- consuming: our Fetch responses and our batches, read by real clients ---------------------

def served_log(codec: int) -> tuple[list[bytes], list[tuple]]:
    """Three batches (offsets 0-1, 2-4, 5) built by engine.record_batch with ``codec``."""
    expected = []
    batches = []
    offset = 0
    for size in (2, 3, 1):
        records = []
        for i in range(size):
            n = offset + i
            key = None if n == 3 else b"key-%d" % n
            value = None if n == 4 else (b"value-%d " % n) * 30
            headers = [("n", str(n).encode()), ("empty", None)] if n % 2 else []
            records.append(rb.Record(i, i, key, value, headers))
            expected.append((n, NOW_MS + n, key, value, headers))
        batches.append(rb.build_batch(records, base_offset=offset, compression=codec,
                                      base_timestamp=NOW_MS + offset))
        offset += size
    return batches, expected


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_confluent_kafka_consumes_our_fetch_responses(broker, codec):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    codec_id = {name: cid for cid, name in rb.COMPRESSION_NAMES.items()}[codec]
    broker.log, expected = served_log(codec_id)
    c = confluent_kafka.Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}",
                                  "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([confluent_kafka.TopicPartition(TOPIC, 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(expected) and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.offset(), msg.timestamp()[1], msg.key(), msg.value(),
                        [(k, v) for k, v in (msg.headers() or [])]))
    finally:
        c.close()
    assert not broker.errors
    assert got == expected
    assert broker.fetch_versions and max(broker.fetch_versions) >= 11


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_consumes_our_fetch_responses(broker, codec):
    kafka = pytest.importorskip("kafka")
    codec_id = {name: cid for cid, name in rb.COMPRESSION_NAMES.items()}[codec]
    broker.log, expected = served_log(codec_id)
    consumer = kafka.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}",
                                   enable_auto_commit=False, consumer_timeout_ms=200,
                                   request_timeout_ms=20000)
    try:
        tp = kafka.TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = []
        deadline = time.monotonic() + 20
        while len(got) < len(expected) and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=200).values():
                got.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs)
    finally:
        consumer.close()
    assert not broker.errors
    assert got == expected


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_aiokafka_consumes_our_fetch_responses(broker, codec):
    aiokafka = pytest.importorskip("aiokafka")
    codec_id = {name: cid for cid, name in rb.COMPRESSION_NAMES.items()}[codec]
    broker.log, expected = served_log(codec_id)

    async def run():
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=f"127.0.0.1:{broker.port}",
                                             enable_auto_commit=False, request_timeout_ms=20000)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = []
            while len(got) < len(expected):
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    got.extend((r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs)
            return got
        finally:
            await consumer.stop()

    got = asyncio.run(asyncio.wait_for(run(), 30))
    assert not broker.errors
    assert got == expected
