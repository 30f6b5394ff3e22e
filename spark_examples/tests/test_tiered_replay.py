"""Spark's ``kafka`` source replays a tiered topic whose old segments left the broker's disk.

A real node with a remote tier (s3proxy) holds only the recent commitlog segments; Spark's
``kafka`` source reads the topic from ``earliest`` and from a point in time
(``startingTimestamp``, Kafka's ListOffsets by time over the remote range), and the native
``rockafka`` source (pull by queue offset, a key lookup) reads it too: every record, byte for
byte (docs/design/tiered-storage.md).
"""

from __future__ import annotations

import time

import pytest

from spark_examples.batch_replay import read_slice
from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for
from tests.rockafka.test_tiered_node import commitlog_files, list_offset, produce, tiered_settings
from tests.support.node import RunningNode
from tests.support.s3_server import S3Server

pytestmark = pytest.mark.timeout(300)


def test_spark_replays_a_tiered_topic_from_the_remote_tier(spark, tmp_path):
    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, RunningNode(tmp_path / "data", settings=tiered_settings(server, bucket)) as node:
        topic = unique("replay")
        create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                      "local.retention.bytes": str(64 * 1024)})
        sent = [(b"s-%05d" % i, (b"%05d#" % i) + bytes((11 * i + j) % 233 for j in range(400)))
                for i in range(3000)]
        produce(node.kafka_bootstrap, topic, sent[:1500])
        middle = int(time.time() * 1000) + 1
        wait_for(lambda: time.time() * 1000 > middle + 1, timeout=5, what="the clock to pass the middle")
        produce(node.kafka_bootstrap, topic, sent[1500:])
        wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 1500, timeout=60,
                 what="the local start to move past the second half's first record")
        wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60, what="old commitlog segments to go")

        rows = read_slice(spark, node.kafka_bootstrap, topic, starting_offsets="earliest") \
            .select("offset", "key", "value").orderBy("offset").collect()
        assert [r.offset for r in rows] == list(range(len(sent)))
        assert [(bytes(r.key), bytes(r.value)) for r in rows] == sent
        later = read_slice(spark, node.kafka_bootstrap, topic, starting_timestamp=middle) \
            .select("offset").orderBy("offset").collect()
        assert [r.offset for r in later] == list(range(1500, len(sent)))

        import rockafka_spark

        rockafka_spark.register(spark)
        native = (spark.read.format("rockafka").option("namesrv", node.namesrv_addr).option("topic", topic)
                  .option("group", unique("g")).load())
        rows = native.select("offset", "kafka_key", "body").orderBy("offset").collect()
        assert [(r.offset, bytes(r.kafka_key), bytes(r.body)) for r in rows] == \
            [(i, k, v) for i, (k, v) in enumerate(sent)]
        one = native.where(native.key == "s-00042").select("body").collect()
        assert [bytes(r.body) for r in one] == [sent[42][1]]
