"""A real Kafka Streams 4.4 application with ``group.protocol=streams`` (KIP-1071) against
Rockafka: a word count re-keyed with ``groupBy`` (the broker creates its repartition and changelog
topics from the topology the heartbeat carries), two KafkaStreams instances share the tasks, one
closes, the other takes over every task, and the output topic's final count per word equals the
input's. Then StreamsGroupDescribe, ListGroups and DescribeGroups show the group as Kafka does.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.compat import java_runner

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]


def test_kafka_streams_app_shares_tasks_and_hands_over_with_exact_counts(node):
    java_runner.build(java_runner.KAFKA_DIR)
    bs = node.kafka_bootstrap
    cmd = ["java", "-Xmx384m", "-cp", str(java_runner.runnable(java_runner.KAFKA_JAR)),
           "rockafka.compat.kafka.StreamsApp", "--bootstrap", bs, "--records", "400", "--timeout-s", "90"]
    result = java_runner.run(cmd, timeout=180)
    result.assert_passed("streams-group", min_checks=6)
    app_id = result.info["application_id"]
    # the broker created the internal topics the topology named, with the tasks' partition count
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bs})
    topics = admin.list_topics(timeout=30).topics
    internal = {t: len(md.partitions) for t, md in topics.items() if t.startswith(app_id)}
    assert any(t.endswith("-repartition") for t in internal), internal
    assert any(t.endswith("-changelog") for t in internal), internal
    assert set(internal.values()) == {4}, internal
