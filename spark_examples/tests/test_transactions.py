"""Spark reading a topic written by a transactional producer, against a real Rockafka.

Transaction markers occupy offsets that hold no data, and aborted records stay in the log:
with ``kafka.isolation.level=read_committed`` Spark must return only committed records (and not
take the marker offsets for lost data); with the default read_uncommitted it returns every
data record, aborted ones included.
"""

from __future__ import annotations

import pytest

from spark_examples import batch_replay
from spark_examples.tests.helpers import create_topic, unique

pytestmark = pytest.mark.timeout(300)


def write_transactions(bootstrap: str, topic: str) -> tuple[list[bytes], list[bytes]]:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": unique("spark-txn")})
    p.init_transactions(30)
    committed, aborted = [], []
    for txn, outcome in enumerate(("commit", "abort", "commit", "abort", "commit")):
        p.begin_transaction()
        values = [b"txn%d-%s-%d" % (txn, outcome.encode(), i) for i in range(4)]
        for v in values:
            p.produce(topic, value=v, partition=0)
        # Send before deciding: an abort would otherwise just purge records never sent.
        assert p.flush(30) == 0
        if outcome == "commit":
            p.commit_transaction(30)
            committed += values
        else:
            p.abort_transaction(30)
            aborted += values
    return committed, aborted


@pytest.mark.parametrize("streaming", [False, True], ids=["batch", "streaming"])
def test_read_committed_skips_aborted_records_and_markers(node, spark, tmp_path, streaming):
    topic = create_topic(node.kafka_bootstrap, unique("txn"))
    committed, aborted = write_transactions(node.kafka_bootstrap, topic)
    options = {"kafka.isolation.level": "read_committed"}

    if streaming:
        out = str(tmp_path / "out")
        q = (spark.readStream.format("kafka")
             .option("kafka.bootstrap.servers", node.kafka_bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .options(**options).load().select("value")
             .writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
        try:
            finished = q.awaitTermination(180)
        finally:
            q.stop()
        assert finished, "availableNow query still running after 180 s"
        assert q.exception() is None
        got = [bytes(r.value) for r in spark.read.parquet(out).collect()]
    else:
        got = [bytes(r.value) for r in batch_replay.read_slice(
            spark, node.kafka_bootstrap, topic, starting_offsets="earliest",
            options=options).orderBy("offset").collect()]
    assert sorted(got) == sorted(committed)
    if not streaming:
        assert got == committed  # in log order


def test_read_uncommitted_returns_aborted_records_too(node, spark):
    topic = create_topic(node.kafka_bootstrap, unique("txn"))
    committed, aborted = write_transactions(node.kafka_bootstrap, topic)
    rows = batch_replay.read_slice(spark, node.kafka_bootstrap, topic,
                                   starting_offsets="earliest").orderBy("offset").collect()
    assert sorted(bytes(r.value) for r in rows) == sorted(committed + aborted)
    # Each transaction ends with a marker that takes an offset: four precede the last records.
    assert rows[-1].offset == len(committed) + len(aborted) + 4 - 1
