"""Helpers for the Spark end-to-end tests: topics, producing and reading back with
confluent-kafka, always with bounded waits."""

from __future__ import annotations

import time
import uuid

# Short client timeouts so a query that cannot reach its data fails in seconds, not minutes.
FAST_FAIL_OPTIONS = {
    "kafka.request.timeout.ms": "5000",
    "kafka.default.api.timeout.ms": "10000",
    "fetchOffset.numRetries": "2",
    "fetchOffset.retryIntervalMs": "200",
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=15, request_timeout=15)
    futures[name].result(timeout=30)
    # Metadata is served by the same node, but wait until it lists every partition.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10).topics.get(name)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            return name
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not visible with {partitions} partitions")


def producer(bootstrap: str, **conf):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5,
                     **conf})


def flush_all(p, timeout: float = 30.0) -> None:
    remaining = p.flush(timeout)
    assert remaining == 0, f"{remaining} records not acknowledged within {timeout}s"


def consume(bootstrap: str, topic: str, *, until, timeout: float = 90.0):
    """Read every partition of ``topic`` from the beginning until ``until(records)`` is true
    (bounded). Partitions are assigned, not subscribed: like Spark's executors, no group."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("check"),
                  "enable.auto.commit": False})
    records = []
    try:
        deadline = time.monotonic() + timeout
        partitions = []
        while not partitions and time.monotonic() < deadline:
            md = c.list_topics(topic, timeout=10).topics.get(topic)
            if md is not None and md.error is None:
                partitions = sorted(md.partitions)
            else:
                time.sleep(0.1)  # the topic is created by the first write to it
        assert partitions, f"topic {topic} not found"
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
        while time.monotonic() < deadline and not until(records):
            msg = c.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            records.append(msg)
    finally:
        c.close()
    return records
