"""Reading and writing through Spark's Kafka connector against a real Rockafka.

Batch: startingTimestamp, offsets JSON per partition, per-partition order over 8 partitions,
headers byte for byte (through the example modules). Streaming: partitions added mid-stream,
and failOnDataLoss after DeleteRecords and after a partition is gone.
"""

from __future__ import annotations

import time

import pytest

from spark_examples import batch_replay, headers_roundtrip
from spark_examples.tests.helpers import (consume, create_topic, flush_all, producer, unique)

pytestmark = pytest.mark.timeout(300)


def produce_values(bootstrap: str, topic: str, values, partition: int | None = None, **kw) -> None:
    p = producer(bootstrap)
    for v in values:
        extra = {} if partition is None else {"partition": partition}
        p.produce(topic, value=v, **extra, **kw)
    flush_all(p)


def test_starting_timestamp_selects_records_at_or_after_it(node, spark, tmp_path):
    topic = create_topic(node.kafka_bootstrap, unique("ts"), partitions=2)
    p = producer(node.kafka_bootstrap)
    for i in range(20):
        p.produce(topic, value=b"before-%d" % i, partition=i % 2)
    flush_all(p)
    # The boundary: strictly after every record above was written, on the same clock.
    boundary = int(time.time() * 1000) + 1
    while int(time.time() * 1000) < boundary:
        time.sleep(0.001)
    # First record after the boundary carries exactly the boundary timestamp ("at").
    p.produce(topic, value=b"after-0", partition=0, timestamp=boundary)
    for i in range(1, 15):
        p.produce(topic, value=b"after-%d" % i, partition=i % 2)
    flush_all(p)

    out = str(tmp_path / "snapshot.parquet")
    rows = batch_replay.replay(spark, node.kafka_bootstrap, topic, out, starting_timestamp=boundary)
    values = sorted(r.value.decode() for r in spark.read.parquet(out).select("value").collect())
    assert rows == 15
    assert values == sorted(f"after-{i}" for i in range(15))

    # A timestamp after the last record matches no offset (ListOffsets answers -1): Spark's
    # default strategy refuses with a readable error, "latest" reads nothing.
    later = int(time.time() * 1000) + 60_000
    from pyspark.errors import IllegalArgumentException
    with pytest.raises(IllegalArgumentException, match="No offset matched"):
        batch_replay.read_slice(spark, node.kafka_bootstrap, topic,
                                starting_timestamp=later).count()
    assert batch_replay.read_slice(
        spark, node.kafka_bootstrap, topic, starting_timestamp=later,
        options={"startingOffsetsByTimestampStrategy": "latest"}).count() == 0


def test_offsets_json_per_partition_select_the_slice(node, spark, tmp_path):
    topic = create_topic(node.kafka_bootstrap, unique("slice"), partitions=2)
    for part in (0, 1):
        produce_values(node.kafka_bootstrap, topic, [b"p%d-%d" % (part, i) for i in range(10)],
                       partition=part)
    df = batch_replay.read_slice(spark, node.kafka_bootstrap, topic,
                                 starting_offsets={topic: {"0": 3, "1": -2}},
                                 ending_offsets={topic: {"0": 7, "1": -1}})
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    assert got == ([(0, i, b"p0-%d" % i) for i in range(3, 7)]
                   + [(1, i, b"p1-%d" % i) for i in range(10)])


def test_eight_partitions_read_fully_in_per_partition_order(node, spark):
    topic = create_topic(node.kafka_bootstrap, unique("eight"), partitions=8)
    per_partition = 150
    p = producer(node.kafka_bootstrap)
    for i in range(per_partition):
        for part in range(8):
            p.produce(topic, key=b"k%d" % part, value=b"%d:%06d" % (part, i), partition=part)
    flush_all(p)

    rows = batch_replay.read_slice(spark, node.kafka_bootstrap, topic,
                                   starting_offsets="earliest").collect()
    assert len(rows) == 8 * per_partition
    seen: dict[int, list] = {part: [] for part in range(8)}
    for r in rows:  # collect() keeps each Kafka partition's rows in the order Spark read them
        seen[r.partition].append((r.offset, r.value))
    for part, got in seen.items():
        assert [off for off, _ in got] == list(range(per_partition)), f"partition {part}"
        assert [v for _, v in got] == [b"%d:%06d" % (part, i) for i in range(per_partition)]

    # Split into more Spark tasks than Kafka partitions: executors seek into the middle of a
    # partition, and the pieces still add up to every record exactly once.
    split = batch_replay.read_slice(spark, node.kafka_bootstrap, topic, starting_offsets="earliest",
                                    options={"minPartitions": "20"})
    assert split.rdd.getNumPartitions() >= 20
    assert sorted((r.partition, r.offset) for r in split.select("partition", "offset").collect()) \
        == [(part, i) for part in range(8) for i in range(per_partition)]


HEADER_CASES = [
    [("trace-id", b"abc-123")],
    [("bin", bytes(range(256)))],
    [("empty", b""), ("dup", b"1"), ("dup", b"2"), ("utf8-\u00e9\u4e2d", "\u00e9\u4e2d".encode())],
    [("nul", b"\x00\x00\xff\xfe")],
    [],
]


def test_headers_round_trip_byte_for_byte(node, spark):
    source = create_topic(node.kafka_bootstrap, unique("hdr-src"), partitions=2)
    target = create_topic(node.kafka_bootstrap, unique("hdr-dst"), partitions=2)
    p = producer(node.kafka_bootstrap)
    sent = {}
    for i, headers in enumerate(HEADER_CASES * 4):
        key = b"key-%02d" % i
        value = None if i == 3 else b"value-%02d" % i
        sent[key] = (i % 2, value, headers)
        p.produce(source, key=key, value=value, headers=headers, partition=i % 2)
    flush_all(p)

    copied = headers_roundtrip.copy_with_headers(spark, node.kafka_bootstrap, source, target)
    assert copied == len(sent)
    records = consume(node.kafka_bootstrap, target, until=lambda recs: len(recs) >= len(sent))
    assert len(records) == len(sent)
    for r in records:
        partition, value, headers = sent[r.key()]
        assert r.partition() == partition
        assert r.value() == value
        assert [(k, bytes(v)) for k, v in (r.headers() or [])] == headers, r.key()
    # Order within each partition is kept too.
    for part in (0, 1):
        keys = [r.key() for r in records if r.partition() == part]
        assert keys == sorted(keys)


def test_fail_on_data_loss_after_delete_records(node, spark, tmp_path):
    """A streaming query that still needs deleted records fails by default; false skips them."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient
    from pyspark.errors import StreamingQueryException

    topic = create_topic(node.kafka_bootstrap, unique("loss"))
    produce_values(node.kafka_bootstrap, topic, [b"%d" % i for i in range(20)], partition=0)
    checkpoint, out = str(tmp_path / "ckpt"), str(tmp_path / "out")

    def run(fail_on_data_loss: bool):
        df = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", node.kafka_bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("failOnDataLoss", str(fail_on_data_loss).lower())
              .load().selectExpr("offset", "CAST(value AS STRING) AS value"))
        q = (df.writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            finished = q.awaitTermination(180)
        finally:
            q.stop()
        assert finished, "availableNow query still running after 180 s"
        return q

    def offsets_written():
        return sorted(r.offset for r in spark.read.parquet(out).select("offset").collect())

    assert run(True).exception() is None
    assert offsets_written() == list(range(20))

    produce_values(node.kafka_bootstrap, topic, [b"%d" % i for i in range(20, 40)], partition=0)
    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    futures = admin.delete_records([TopicPartition(topic, 0, 30)], request_timeout=30)
    low = list(futures.values())[0].result(timeout=30)
    assert low.low_watermark == 30

    with pytest.raises(StreamingQueryException) as failed:
        q = run(True)
        if q.exception() is not None:
            raise q.exception()
    assert "Some data may have been lost" in str(failed.value)
    assert "failOnDataLoss" in str(failed.value)
    assert offsets_written() == list(range(20))  # the failed batch wrote nothing

    assert run(False).exception() is None
    assert offsets_written() == list(range(20)) + list(range(30, 40))


def test_partitions_added_while_streaming_are_read_from_offset_zero(node, spark, tmp_path):
    """Spark picks up new partitions at the next batch and reads them from their start; with
    failOnDataLoss on, a new partition whose earliest offset is 0 is not taken for data loss."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = create_topic(node.kafka_bootstrap, unique("grow"), partitions=2)
    for part in (0, 1):
        produce_values(node.kafka_bootstrap, topic, [b"a%d-%d" % (part, i) for i in range(5)],
                       partition=part)
    checkpoint, out = str(tmp_path / "ckpt"), str(tmp_path / "out")

    def run():
        q = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", node.kafka_bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            finished = q.awaitTermination(180)
        finally:
            q.stop()
        assert finished, "availableNow query still running after 180 s"
        assert q.exception() is None
        return sorted((r.partition, r.offset, r.value) for r in spark.read.parquet(out).collect())

    assert len(run()) == 10
    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=30)
    for part in range(4):
        produce_values(node.kafka_bootstrap, topic, [b"b%d-%d" % (part, i) for i in range(3)],
                       partition=part)
    rows = run()
    expected = ([(p, i, "a%d-%d" % (p, i)) for p in (0, 1) for i in range(5)]
                + [(p, 5 + i, "b%d-%d" % (p, i)) for p in (0, 1) for i in range(3)]
                + [(p, i, "b%d-%d" % (p, i)) for p in (2, 3) for i in range(3)])
    assert rows == sorted(expected)


def test_fail_on_data_loss_when_partitions_are_gone(node, spark, tmp_path):
    """The topic is deleted and recreated with fewer partitions: the query that still tracks the
    vanished partition fails by default, and with failOnDataLoss=false goes on with what is
    there now."""
    from confluent_kafka.admin import AdminClient
    from pyspark.errors import StreamingQueryException

    topic = create_topic(node.kafka_bootstrap, unique("gone"), partitions=2)
    for part in (0, 1):
        produce_values(node.kafka_bootstrap, topic, [b"old%d-%d" % (part, i) for i in range(5)],
                       partition=part)
    checkpoint, out = str(tmp_path / "ckpt"), str(tmp_path / "out")

    def run(fail_on_data_loss: bool):
        q = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", node.kafka_bootstrap)
             .option("subscribe", topic)
             .option("startingOffsets", "earliest")
             .option("failOnDataLoss", str(fail_on_data_loss).lower())
             .load().selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        try:
            finished = q.awaitTermination(180)
        finally:
            q.stop()
        assert finished, "availableNow query still running after 180 s"
        if q.exception() is not None:
            raise q.exception()
        return sorted(r.value for r in spark.read.parquet(out).collect())

    assert len(run(True)) == 10

    admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
    admin.delete_topics([topic], operation_timeout=15)[topic].result(timeout=30)
    deadline = time.monotonic() + 60
    while True:  # deletion may finish asynchronously, as in Kafka: retry the re-creation
        try:
            create_topic(node.kafka_bootstrap, topic, partitions=1)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    produce_values(node.kafka_bootstrap, topic, [b"new0-%d" % i for i in range(8)], partition=0)

    with pytest.raises(StreamingQueryException) as failed:
        run(True)
    assert "failOnDataLoss" in str(failed.value)

    rows = run(False)
    old = sorted(b"old%d-%d" % (p, i) for p in (0, 1) for i in range(5))
    # Partition 0 was read up to offset 5 before; the new partition 0 continues from there.
    assert rows == sorted([v.decode() for v in old] + ["new0-%d" % i for i in range(5, 8)])
