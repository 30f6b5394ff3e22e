"""What a Kafka consumer of a compacted topic sees once the cleaner has run (librdkafka's
0077-compaction, in this project's words): only the latest record of each key -- tombstones until
``delete.retention.ms`` -- at their original offsets, on Kafka's triggers: the active segment
(``segment.bytes`` / ``segment.ms``) is never cleaned, ``min.cleanable.dirty.ratio`` decides when a
queue is worth cleaning, ``min.compaction.lag.ms`` keeps recent records. The removals survive a
restart (they are in the commitlog)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway_kafka.kafka_helpers import unique
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(180)

SETTINGS = {"log_cleaner_backoff_ms": 300}


def create(bs: str, topic: str, **config: str) -> None:
    conf = {"cleanup.policy": "compact", "segment.bytes": "10000", "segment.ms": "10000",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400"}
    conf.update(config)
    admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
    admin.create_topics([NewTopic(topic, 1, 1, config=conf)])[topic].result(30)


def produce(bs: str, topic: str, records: list[tuple[bytes, bytes | None, str | None]]) -> None:
    """(key, value, message id header) records, one batch each (batch.num.messages=1, as 0077)."""
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.num.messages": 1})
    for key, value, msgid in records:
        p.produce(topic, value, key=key, partition=0, headers=[("msgid", msgid.encode())] if msgid else None)
        p.poll(0)
    assert p.flush(30) == 0


def filler(n: int, size: int) -> list:
    key = unique("fill").encode()
    return [(key, b"f" * size, None)] * (n - 1) + [(key, None, None)]


def read_ids(bs: str, topic: str) -> list[tuple[int, str]]:
    """(offset, msgid) of every record carrying a msgid header, read to the partition's end."""
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("cln"), "enable.auto.commit": False,
                  "enable.partition.eof": True})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        while True:
            m = c.poll(10)
            assert m is not None, "no answer from the broker"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                break
            ids = [v.decode() for k, v in (m.headers() or []) if k == "msgid"]
            if ids:
                got.append((m.offset(), ids[0]))
    finally:
        c.close()
    return got


def workload(per_key: int = 10) -> tuple[list, list[tuple[int, str]]]:
    """0077's records: keys k1, k2, k3 and a unique key in turn, k1 a tombstone every 7th time and
    last; after the cleaner: each of k1 (its tombstone), k2, k3 once, every unique-key record."""
    keys = [b"k1", b"k2", b"k3", None]
    records, expected = [], []
    total = per_key * len(keys)
    fill = 20
    for cnt in range(total):
        k = keys[cnt % 4]
        last = cnt + 4 >= total
        tomb = k == b"k1" and (last or cnt % 7 == 0)
        key = k if k is not None else str(cnt).encode()
        records.append((key, None if tomb else b"v%d" % cnt, f"m{cnt}"))
        if k is None or last:
            expected.append((fill + cnt, f"m{cnt}"))
    return records, expected


def wait_for_ids(bs: str, topic: str, want: list, timeout: float = 60) -> list:
    deadline = time.monotonic() + timeout
    while True:
        got = read_ids(bs, topic)
        if got == want or time.monotonic() > deadline:
            return got
        time.sleep(0.3)


def test_a_consumer_sees_only_each_keys_latest_record_after_the_cleaner(tmp_path):
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        bs = node.kafka_bootstrap
        topic = unique("cleaned")
        create(bs, topic)
        records, expected = workload()
        produce(bs, topic, filler(20, 1000))
        produce(bs, topic, records)
        # nothing is cleaned while the records are in the active segment
        before = read_ids(bs, topic)
        assert len(before) == len(records)
        produce(bs, topic, filler(20, 1024))  # rolls the segments holding them
        assert wait_for_ids(bs, topic, expected) == expected
        # a key's tombstone stays (delete.retention.ms is 86 s here); the removals survive a restart
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        assert read_ids(node.kafka_bootstrap, topic) == expected


def test_old_tombstones_go_and_recent_records_wait_for_min_compaction_lag(tmp_path):
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        bs = node.kafka_bootstrap
        gone, lagged = unique("tomb"), unique("lag")
        create(bs, gone, **{"delete.retention.ms": "0"})
        create(bs, lagged, **{"min.compaction.lag.ms": "3600000"})
        for topic in (gone, lagged):
            produce(bs, topic, [(b"a", b"1", "a1"), (b"b", b"1", "b1"), (b"a", None, "a2"), (b"b", b"2", "b2")])
            produce(bs, topic, filler(20, 1024))
        # the tombstone of a is older than delete.retention.ms=0: a is gone altogether
        assert wait_for_ids(bs, gone, [(3, "b2")]) == [(3, "b2")]
        # everything is younger than min.compaction.lag.ms: the cleaner leaves it all
        assert read_ids(bs, lagged) == [(0, "a1"), (1, "b1"), (2, "a2"), (3, "b2")]
