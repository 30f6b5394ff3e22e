"""Kafka-protocol workloads with confluent-kafka (librdkafka), the same client for every broker.

Each function takes a bootstrap address and returns plain numbers; each raises with a message
when the broker does not do what was asked (undelivered records, short reads), so the caller
can put the reason in the table. Every loop is bounded by a count and a deadline.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid

PRODUCE_TIMEOUT = 180.0
CREATE_STEP = 5000  # partitions per CreateTopics / CreatePartitions request


def create_topic(bs: str, topic: str, partitions: int, timeout: float = 180.0, replication_factor: int = 1) -> float:
    """Create a topic and wait until its metadata lists every partition with a leader; seconds."""
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

    t0 = time.perf_counter()
    admin = AdminClient({"bootstrap.servers": bs})
    # A KRaft controller refuses a CreateTopics that needs more than 10,000 metadata records in
    # one batch (POLICY_VIOLATION "excessively large batch"): big topics are created in steps.
    first = min(partitions, CREATE_STEP)
    fut = admin.create_topics([NewTopic(topic, first, replication_factor)], request_timeout=timeout,
                              operation_timeout=timeout)[topic]
    fut.result(timeout)
    for count in range(first + CREATE_STEP, partitions + CREATE_STEP, CREATE_STEP):
        count = min(count, partitions)
        admin.create_partitions([NewPartitions(topic, count)], request_timeout=timeout,
                                operation_timeout=timeout)[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=30).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions and \
                all(p.leader >= 0 for p in md.partitions.values()):
            return time.perf_counter() - t0
        time.sleep(0.2)  # metadata propagation has no notification to wait on
    raise RuntimeError(f"topic {topic} not ready with {partitions} partitions after {timeout}s")


def producer_config(bs: str, acks: str, compression: str, timeout: float = PRODUCE_TIMEOUT) -> dict:
    return {"bootstrap.servers": bs, "acks": acks, "compression.type": compression,
            "linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 1_000_000,
            "queue.buffering.max.kbytes": 1 << 20, "enable.idempotence": False,
            "message.timeout.ms": int(timeout * 1000)}


def produce(bs: str, topic: str, records: int, size: int, *, acks: str = "1",
            compression: str = "none", partitions: int = 1, timeout: float = PRODUCE_TIMEOUT,
            seconds: float | None = None, max_queued: int = 1_000_000, idempotent: bool = False) -> dict:
    """Send ``records`` records of ``size`` bytes as fast as the client allows; records/s, MiB/s.

    Records go round robin over ``partitions`` explicit partitions (so every partition of a
    many-partition topic gets traffic). Payloads are random-looking but compressible like text
    (lz4 has something to do, as with real data). With ``seconds``, sending also stops at that
    deadline (what was sent is then waited for and counted); ``max_queued`` bounds the client's
    queue so that tail stays short when the broker is slow. ``idempotent`` turns on
    enable.idempotence (acks=all, sequence numbers checked by the broker).
    """
    from confluent_kafka import Producer

    conf = producer_config(bs, acks, compression, timeout)
    conf["queue.buffering.max.messages"] = max_queued
    if idempotent:
        conf.update({"enable.idempotence": True, "acks": "all"})
    p = Producer(conf)
    send_until = time.monotonic() + seconds if seconds else None
    base = (uuid.uuid4().hex * (size // 32 + 1)).encode()
    payloads = [base[i:i + size] for i in range(16)]
    errors: list = []
    delivered = [0]

    def cb(err, _msg):
        if err is not None:
            errors.append(err)
        else:
            delivered[0] += 1

    deadline = time.monotonic() + timeout
    start = time.perf_counter()
    for i in range(records):
        if send_until is not None and time.monotonic() > send_until:
            records = i
            break
        while True:
            try:
                p.produce(topic, payloads[i & 15], partition=i % partitions, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.005)
                if time.monotonic() > deadline:
                    raise RuntimeError(f"producer queue stayed full; {delivered[0]} delivered")
        if i % 2000 == 0:
            p.poll(0)
    left = p.flush(max(1.0, deadline - time.monotonic()))
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"{left} undelivered, {len(errors)} errors (first: {errors[:1]})")
    return {"records": records, "seconds": elapsed, "records_per_s": records / elapsed,
            "mib_per_s": records * size / elapsed / 2**20}


def consume(bs: str, topic: str, records: int, partitions: int = 1, timeout: float = 180.0) -> dict:
    """Read ``records`` records from offset 0 of every partition with a fresh consumer."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.max.bytes": 50 * 2**20,
                  "max.partition.fetch.bytes": 10 * 2**20, "queued.max.messages.kbytes": 256 * 1024})
    try:
        start = time.perf_counter()
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got = 0
        nbytes = 0
        deadline = time.monotonic() + timeout
        while got < records and time.monotonic() < deadline:
            for m in c.consume(10_000, 1.0):
                if m.error() is None:
                    got += 1
                    nbytes += len(m.value())
        end = time.perf_counter()
    finally:
        c.close()
    if got < records:
        raise RuntimeError(f"consumed only {got} of {records} in {timeout}s")
    elapsed = max(end - start, 1e-6)  # from assign, so the first fetch (and its wait) counts
    return {"records": got, "seconds": elapsed, "records_per_s": got / elapsed,
            "mib_per_s": nbytes / elapsed / 2**20}


def latency(bs: str, topic: str, rate: int, seconds: float, size: int) -> dict:
    """End-to-end latency at a fixed send rate: each record carries its send time; p50/p99/p99.9 ms."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"lat-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    total = int(rate * seconds)
    samples: list[float] = []

    def receive() -> None:
        deadline = time.monotonic() + seconds + 30
        while len(samples) < total and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and m.error() is None:
                samples.append((time.time() - struct.unpack_from(">d", m.value())[0]) * 1000)

    t = threading.Thread(target=receive, daemon=True)
    t.start()
    p = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 0, "enable.idempotence": False})
    pad = b"x" * max(0, size - 8)
    start = time.perf_counter()
    for i in range(total):
        target = start + i / rate
        while (now := time.perf_counter()) < target:
            p.poll(min(0.001, target - now))  # paces the sender; not a synchronisation wait
        p.produce(topic, struct.pack(">d", time.time()) + pad)
    p.flush(30)
    t.join(seconds + 40)
    c.close()
    if len(samples) < total:
        raise RuntimeError(f"received {len(samples)} of {total} records")
    samples.sort()

    def pct(q: float) -> float:
        return samples[min(len(samples) - 1, int(q * len(samples)))]

    return {"records": len(samples), "p50_ms": pct(0.50), "p99_ms": pct(0.99), "p999_ms": pct(0.999),
            "max_ms": samples[-1]}


def watermark_ready(bs: str, topic: str, timeout: float) -> tuple[float, int]:
    """Poll until partition 0 of ``topic`` answers its high watermark; (seconds waited, watermark)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    t0 = time.perf_counter()
    deadline = time.monotonic() + timeout
    c = Consumer({"bootstrap.servers": bs, "group.id": f"wm-{uuid.uuid4().hex[:8]}",
                  "socket.connection.setup.timeout.ms": 1000, "reconnect.backoff.max.ms": 200})
    try:
        while time.monotonic() < deadline:
            try:
                _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=2.0)
                if high > 0:
                    return time.perf_counter() - t0, high
            except KafkaException:
                pass  # not serving yet
            time.sleep(0.05)  # retry pacing while the broker recovers
    finally:
        c.close()
    raise RuntimeError(f"{topic} not readable after {timeout}s")
