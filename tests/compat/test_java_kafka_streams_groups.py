"""A real Kafka Streams 4.4 application with ``group.protocol=streams`` (KIP-1071) against
Rockafka: a word count re-keyed with ``groupBy`` (the broker creates its repartition and changelog
topics from the topology the heartbeat carries), two KafkaStreams instances share the tasks, one
closes, the other takes over every task, and the output topic's final count per word equals the
input's. Apache Kafka's ``kafka-streams-groups`` (tools 4.3.1) describes the group while the
survivor runs; after a broker restart the group (topology, epochs, committed offsets) is still
there.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading

import pytest

from tests.compat import java_runner
from tests.support.node import ROOT

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"


def streams_groups_tool(bs: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"),
                           "org.apache.kafka.tools.streams.StreamsGroupCommand", "--bootstrap-server", bs, *args],
                          capture_output=True, text=True, timeout=120)


def test_kafka_streams_app_shares_tasks_and_hands_over_with_exact_counts(node):
    java_runner.build(java_runner.KAFKA_DIR)
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    bs = node.kafka_bootstrap
    cmd = ["java", "-Xmx384m", "-cp", str(java_runner.runnable(java_runner.KAFKA_JAR)),
           "rockafka.compat.kafka.StreamsApp", "--bootstrap", bs, "--records", "400", "--timeout-s", "90",
           "--keep-running-s", "60"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()
    err: list[str] = []

    def read() -> None:
        for line in proc.stdout:
            lines.append(line)
            if '"ready_for_describe"' in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    try:
        ready.wait(150)
        info = {o["key"]: o["value"] for o in map(json.loads, (ln for ln in lines if ln.startswith("{")))
                if o.get("type") == "info"}
        described = None
        if "ready_for_describe" in info:
            described = streams_groups_tool(bs, "--describe", "--members", "--verbose", "--group",
                                            info["application_id"])
        proc.stdin.write("done\n")  # the survivor closes; the runner prints its summary
        proc.stdin.close()
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    result = java_runner.parse(cmd, code, "".join(lines), "".join(err))
    result.assert_passed("streams-group", min_checks=6)
    app_id = result.info["application_id"]

    # the survivor (epoch > 0) holds all 8 tasks of the 2 subtopologies, as the tool shows them
    assert described is not None and described.returncode == 0, (described and described.stderr[-3000:])
    out = described.stdout
    assert app_id in out and "streams" in out, out
    assert "ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3];" in out and "TARGET-ACTIVE: 0:[0,1,2,3]; 1:[0,1,2,3];" in out, out

    # the broker created the internal topics the topology named, with the tasks' partition count
    from confluent_kafka.admin import AdminClient
    topics = AdminClient({"bootstrap.servers": bs}).list_topics(timeout=30).topics
    internal = {t: len(md.partitions) for t, md in topics.items() if t.startswith(app_id)}
    assert any(t.endswith("-repartition") for t in internal), internal
    assert any(t.endswith("-changelog") for t in internal), internal
    assert set(internal.values()) == {4}, internal

    # state in __consumer_offsets: after a restart the group and its committed offsets are back
    node.restart()
    listed = streams_groups_tool(bs, "--list")
    assert listed.returncode == 0 and app_id in listed.stdout, listed.stdout + listed.stderr[-2000:]
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    input_topic = "streams-in-" + app_id.removeprefix("streams-app-")
    admin = AdminClient({"bootstrap.servers": bs})
    fut = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(app_id, [TopicPartition(input_topic, p) for p in range(4)])])[app_id]
    committed = {tp.partition: tp.offset for tp in fut.result(30).topic_partitions}
    assert sum(committed.values()) == 400, committed  # every input record processed and committed
