"""Jobs pointed at bad input fail with Spark's readable errors, within the configured timeouts.

A missing topic, a stopped broker and offsets past the end of a partition: each makes the
query raise (never hang), and the error names the problem.
"""

from __future__ import annotations

import pytest

from spark_examples import batch_replay
from spark_examples.tests.helpers import (FAST_FAIL_OPTIONS, create_topic, flush_all, producer,
                                           unique)
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)


def fill(bootstrap: str, topic: str, n: int) -> None:
    p = producer(bootstrap)
    for i in range(n):
        p.produce(topic, value=b"%d" % i, partition=0)
    flush_all(p)


def test_missing_topic_fails_readably(node, spark):
    missing = unique("no-such-topic")
    with pytest.raises(Exception) as failed:
        batch_replay.read_slice(spark, node.kafka_bootstrap, missing, starting_offsets="earliest",
                                options=FAST_FAIL_OPTIONS).count()
    assert "UnknownTopicOrPartitionException" in str(failed.value)
    assert "does not host this topic-partition" in str(failed.value)


def test_offsets_past_the_end_fail_readably(node, spark):
    topic = create_topic(node.kafka_bootstrap, unique("short"))
    fill(node.kafka_bootstrap, topic, 10)
    with pytest.raises(Exception) as failed:
        batch_replay.read_slice(spark, node.kafka_bootstrap, topic,
                                starting_offsets={topic: {"0": 1000}},
                                options=FAST_FAIL_OPTIONS).count()
    # Spark 4.2's wording (4.0 said "Beginning offset 1000 is after the ending offset 10 ...")
    assert f"The resolved start offset 1000 is greater than the resolved end offset 10 for topic {topic} " \
        "partition 0" in str(failed.value)


def test_stopped_broker_fails_within_timeouts(spark, tmp_path):
    stopped = RunningNode(tmp_path / "data").start()
    try:
        topic = create_topic(stopped.kafka_bootstrap, unique("gone"))
        fill(stopped.kafka_bootstrap, topic, 5)
    finally:
        stopped.stop()
    with pytest.raises(Exception) as failed:
        batch_replay.read_slice(spark, stopped.kafka_bootstrap, topic, starting_offsets="earliest",
                                options=FAST_FAIL_OPTIONS).count()
    # The admin client gives up after kafka.default.api.timeout.ms instead of waiting forever.
    assert "TimeoutException" in str(failed.value)
    assert "timed out" in str(failed.value).lower()


def test_streaming_from_offsets_past_the_end_fails_readably(node, spark, tmp_path):
    from pyspark.errors import StreamingQueryException

    topic = create_topic(node.kafka_bootstrap, unique("short"))
    fill(node.kafka_bootstrap, topic, 10)
    q = (spark.readStream.format("kafka")
         .option("kafka.bootstrap.servers", node.kafka_bootstrap)
         .option("subscribe", topic)
         .option("startingOffsets", '{"%s": {"0": 1000}}' % topic)
         .options(**FAST_FAIL_OPTIONS).load()
         .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ckpt"))
         .trigger(availableNow=True).start())
    try:
        with pytest.raises(StreamingQueryException) as failed:
            q.awaitTermination(120)
    finally:
        q.stop()
    # Spark treats it like records that vanished: a data-loss error naming the partition.
    assert f"Partition {topic}-0 offset was changed from 1000 to 10" in str(failed.value)
    assert "failOnDataLoss" in str(failed.value)
