"""The store inside a real `rockafka serve`: SIGTERM is a clean stop, SIGKILL a crash it recovers.

Messages go in through the Kafka protocol (kafka-python), so this is what a user sees: data
written before a kill is there after the restart, and the log tells which recovery ran.
"""

from __future__ import annotations

import re

import pytest

kafka = pytest.importorskip("kafka")


def produce(node, topic, values):
    producer = kafka.KafkaProducer(bootstrap_servers=node.kafka_bootstrap, acks="all", linger_ms=0)
    try:
        for v in values:
            producer.send(topic, v, partition=0).get(timeout=30)
    finally:
        producer.close(timeout=10)


def consume_all(node, topic, expected):
    consumer = kafka.KafkaConsumer(bootstrap_servers=node.kafka_bootstrap, auto_offset_reset="earliest",
                                   enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        tp = kafka.TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out = []
        for record in consumer:
            out.append(record.value)
            if len(out) >= expected:
                break
        return out
    finally:
        consumer.close()


def recoveries(node) -> list[str]:
    return re.findall(r"store_recovered.*?abnormal=(True|False)", node.log_tail(10**7))


def test_sigterm_is_clean_and_sigkill_is_recovered(make_node):
    node = make_node({"flushDiskType": "SYNC_FLUSH"})
    produce(node, "nodecrash", [b"before-%d" % i for i in range(20)])
    node.stop()
    assert not (node.data_dir / "abort").exists()
    node.start()
    assert recoveries(node)[-1] == "False"
    produce(node, "nodecrash", [b"more-%d" % i for i in range(10)])
    node.kill()
    assert (node.data_dir / "abort").exists()
    node.start()
    assert recoveries(node)[-1] == "True"
    values = consume_all(node, "nodecrash", 30)
    assert values == [b"before-%d" % i for i in range(20)] + [b"more-%d" % i for i in range(10)]
