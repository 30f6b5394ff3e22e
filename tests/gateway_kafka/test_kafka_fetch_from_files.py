"""Fetch served from the commitlog segment files (sendfile on plain TCP).

Stored Kafka batches go from the segment files to the socket without passing through the
interpreter. A fetch may span several segments (one open file per segment per response), and
must keep working when retention has deleted older segments: the records still stored come
back intact and in order, from the new log start on.
"""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import consume, create_topic, produce, unique, wait_for
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)

SEGMENT = 128 * 1024  # small commitlog segments: a few hundred KiB of records span several


def _records(n: int) -> list[tuple]:
    # 1 KiB values, each unique and checkable
    return [(f"k{i}".encode(), (f"v{i:06d}-".encode() * 120)[:1024], None) for i in range(n)]


def _log_start(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("wm")})
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        return low
    finally:
        c.close()


def test_fetch_across_segments_and_after_retention_deleted_older_ones(tmp_path):
    with RunningNode(tmp_path / "data", settings={"mappedFileSizeCommitLog": SEGMENT}) as node:
        topic = unique("segments")
        create_topic(node.kafka_bootstrap, topic)
        records = _records(600)  # ~600 KiB: about five segments
        for start in range(0, len(records), 100):  # several produce requests, several batches
            produce("confluent-kafka", node.kafka_bootstrap, topic, records[start:start + 100], acks=-1)
        segments = sorted((node.data_dir / "commitlog").iterdir())
        assert len(segments) >= 3, [p.name for p in segments]

        got = consume("confluent-kafka", node.kafka_bootstrap, topic, len(records))
        assert [g[1] for g in got] == list(range(len(records)))
        assert [(g[2], g[3]) for g in got] == [(k, v) for k, v, _h in records]

        # retention: every segment but the one being written is expired, and deleted now
        node.stop()
        node.settings.update({"fileReservedTime": 0, "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
                              "cleanResourceInterval": 300})
        node.start()
        low = wait_for(lambda: _log_start(node.kafka_bootstrap, topic) or None, timeout=60, interval=0.3,
                       what="retention to delete the older segments")
        assert 0 < low < len(records)
        assert len(list((node.data_dir / "commitlog").iterdir())) < len(segments)

        got = consume("confluent-kafka", node.kafka_bootstrap, topic, len(records) - low)
        assert [g[1] for g in got] == list(range(low, len(records)))
        assert [(g[2], g[3]) for g in got] == [(k, v) for k, v, _h in records[low:]]
