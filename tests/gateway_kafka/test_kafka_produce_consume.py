"""Produce and consume through the gateway with kafka-python, confluent-kafka and aiokafka.

One node for the module. Each scenario runs with each client: acks 0/1/all and idempotence,
every compression codec, headers and null keys/values, consuming from earliest, latest and a
committed position, and offsets_for_times.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.gateway_kafka.kafka_helpers import CLIENTS, consume, create_topic, produce, unique

pytestmark = pytest.mark.timeout(120)


def sample(n: int, tag: str) -> list[tuple]:
    out = []
    for i in range(n):
        key = None if i % 5 == 0 else f"key-{i}".encode()
        value = None if i % 7 == 3 and key is not None else f"{tag}-value-{i}".encode() * (1 + i % 3)
        # (kafka-python cannot send a null header value, so every header has bytes)
        headers = [] if i % 2 else [("h1", f"v{i}".encode()), ("empty", b""), ("h1", b"repeated")]
        out.append((key, value, headers))
    return out


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("acks", [0, 1, "all"])
def test_produce_with_acks_then_consume_everything_in_order(node, client, acks):
    topic = unique(f"acks{acks}")
    create_topic(node.kafka_bootstrap, topic)
    records = sample(40, "a")
    if client == "kafka-python" and acks == "all":
        acks_arg = "all"
    else:
        acks_arg = -1 if acks == "all" else acks
    offsets = produce(client, node.kafka_bootstrap, topic, records, acks=acks_arg, idempotent=acks == "all")
    if acks != 0:  # acks=0 gets no offsets back from the broker
        assert offsets == list(range(40))
    got = consume(client, node.kafka_bootstrap, topic, 40)
    assert [g[1] for g in got] == list(range(40))
    assert [(g[2], g[3], g[4]) for g in got] == [(k, v, [(hk, hv) for hk, hv in h]) for k, v, h in records]


@pytest.mark.parametrize("client", CLIENTS)
@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_round_trip(node, client, codec):
    topic = unique(codec)
    create_topic(node.kafka_bootstrap, topic)
    records = [(f"k{i}".encode(), (f"payload {i} " * 50).encode(), [("codec", codec.encode())]) for i in range(30)]
    offsets = produce(client, node.kafka_bootstrap, topic, records, acks=1, compression=codec)
    assert offsets == list(range(30))
    # read back with a different client than the producer, so the batch bytes are what travel
    reader = CLIENTS[(CLIENTS.index(client) + 1) % len(CLIENTS)]
    got = consume(reader, node.kafka_bootstrap, topic, 30)
    assert [(g[2], g[3], g[4]) for g in got] == [(k, v, [(hk, hv) for hk, hv in h]) for k, v, h in records]


@pytest.mark.parametrize("client", CLIENTS)
def test_latest_sees_only_new_records(node, client):
    topic = unique("latest")
    create_topic(node.kafka_bootstrap, topic)
    produce("confluent-kafka", node.kafka_bootstrap, topic, [(None, b"old-%d" % i, []) for i in range(5)])
    stop = threading.Event()

    def keep_producing():
        # Not every client tells when its "latest" position is resolved, so new records keep
        # coming (bounded) until the consumer has seen some; none of the old ones may appear.
        for i in range(100):
            if stop.is_set():
                return
            produce("confluent-kafka", node.kafka_bootstrap, topic, [(None, b"new-%d" % i, [])])
            stop.wait(0.2)

    producer = threading.Thread(target=keep_producing, daemon=True)
    try:
        got = consume(client, node.kafka_bootstrap, topic, 3, offset_reset="latest", on_ready=producer.start)
    finally:
        stop.set()
        if producer.is_alive():
            producer.join(30)
    assert len(got) >= 3
    assert all(g[3].startswith(b"new-") for g in got), [g[3] for g in got]
    offsets = [g[1] for g in got]
    assert offsets == sorted(offsets) and offsets[0] >= 5


@pytest.mark.parametrize("client", CLIENTS)
def test_group_resumes_from_committed_offset(node, client):
    topic = unique("committed")
    group = unique("g")
    create_topic(node.kafka_bootstrap, topic)
    produce(client, node.kafka_bootstrap, topic, [(None, b"r%d" % i, []) for i in range(10)])
    first = consume(client, node.kafka_bootstrap, topic, 10, group=group, commit=True)
    assert len(first) == 10
    produce(client, node.kafka_bootstrap, topic, [(None, b"r%d" % i, []) for i in range(10, 15)])
    second = consume(client, node.kafka_bootstrap, topic, 5, group=group)
    assert [g[3] for g in second] == [b"r%d" % i for i in range(10, 15)]


@pytest.mark.parametrize("client", CLIENTS)
def test_offsets_for_times_uses_record_timestamps(node, client):
    topic = unique("times")
    create_topic(node.kafka_bootstrap, topic)
    base = int(time.time() * 1000) - 3_600_000  # an hour ago: record time, not store time, counts
    stamps = [base + i * 1000 for i in range(10)]
    produce("confluent-kafka", node.kafka_bootstrap, topic, [(None, b"t%d" % i, []) for i in range(10)],
            timestamps=stamps)
    queries = {stamps[4]: (4, stamps[4]), stamps[4] + 1: (5, stamps[5]), base - 10: (0, stamps[0]),
               stamps[-1] + 1: None}
    for ts, expected in queries.items():
        assert offsets_for_time(client, node.kafka_bootstrap, topic, ts) == expected, ts


def offsets_for_time(client: str, bootstrap: str, topic: str, ts: int):
    if client == "kafka-python":
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(bootstrap_servers=bootstrap)
        try:
            r = c.offsets_for_times({TopicPartition(topic, 0): ts})[TopicPartition(topic, 0)]
            return None if r is None else (r.offset, r.timestamp)
        finally:
            c.close()
    if client == "confluent-kafka":
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("t")})
        try:
            r = c.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=15)[0]
            # librdkafka reports "none" as the end offset (-1); it does not expose the timestamp
            return None if r.offset < 0 else (r.offset, stamp_at(bootstrap, topic, r.offset))
        finally:
            c.close()
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATP

    async def run():
        c = AIOKafkaConsumer(bootstrap_servers=bootstrap)
        await c.start()
        try:
            r = (await c.offsets_for_times({ATP(topic, 0): ts}))[ATP(topic, 0)]
            return None if r is None else (r.offset, r.timestamp)
        finally:
            await c.stop()

    return asyncio.run(asyncio.wait_for(run(), 30))


def stamp_at(bootstrap: str, topic: str, offset: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("s"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                return m.timestamp()[1]
        raise AssertionError("record not fetched")
    finally:
        c.close()


def test_thousands_of_partitions_within_a_tight_descriptor_limit(tmp_path):
    """Every partition is a consume queue with its own mapped file, and each open mapped file
    holds one descriptor: 2,000 partitions written and read back by a node allowed 3,000 open
    files (descriptors for the commitlog, index, sockets and Python itself included). The node
    keeps a quarter of its limit (750 here) free for the store and refuses connections that
    would eat into it, so clients connecting after ~2,050 descriptors are in use still get in."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.support.node import RunningNode

    partitions = 2000
    node = RunningNode(tmp_path / "data")
    base_args = node.args
    node.args = lambda: ["sh", "-c", 'ulimit -n 3000 && exec "$@"', "sh"] + base_args()  # type: ignore[method-assign]
    with node:
        admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
        admin.create_topics([NewTopic("wide", partitions, 1)])["wide"].result(30)
        producer = Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 20})
        failures: list[str] = []
        for p in range(partitions):
            producer.produce("wide", f"v{p}".encode(), partition=p,
                             on_delivery=lambda err, msg: err and failures.append(str(err)))
            producer.poll(0)
        assert producer.flush(60) == 0
        assert failures == []
        consumer = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": "wide-reader",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("wide", p, 0) for p in range(partitions)])
            seen: dict[int, bytes] = {}
            deadline = time.monotonic() + 60
            while len(seen) < partitions and time.monotonic() < deadline:
                for m in consumer.consume(500, 1.0):
                    if m.error() is None:
                        seen[m.partition()] = m.value()
        finally:
            consumer.close()
        assert seen == {p: f"v{p}".encode() for p in range(partitions)}
        assert "Too many open files" not in node.log_tail(10**6)


def test_multi_megabyte_fetches_arrive_whole_through_a_small_receive_buffer(node):
    """Fetch responses of many batches and megabytes, read by a client whose socket buffer is
    tiny: the broker's socket takes each response in pieces (writev, then the transport), and
    every record must still arrive once, in order, byte for byte."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = unique("bigfetch")
    create_topic(node.kafka_bootstrap, topic)
    n = 8_000  # about 8 MiB: more than a loopback socket's largest send buffer (4 MiB)
    values = [(f"{i:06d}-" + "x" * (1000 + i % 97)).encode() for i in range(n)]
    p = Producer({"bootstrap.servers": node.kafka_bootstrap, "linger.ms": 20, "batch.size": 64 * 1024})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": unique("g"), "enable.auto.commit": False,
                  "socket.receive.buffer.bytes": 4096, "fetch.max.bytes": 16 * 1024 * 1024,
                  "max.partition.fetch.bytes": 16 * 1024 * 1024, "receive.message.max.bytes": 32 * 1024 * 1024})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < n and time.monotonic() < deadline:
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append(m.value())
    finally:
        c.close()
    assert len(got) == n
    assert got == values
