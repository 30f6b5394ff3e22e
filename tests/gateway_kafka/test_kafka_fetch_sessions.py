"""Fetch sessions (KIP-227) and topic ids in Fetch, with the Java consumer (Apache Kafka's
console consumer, kafka-clients 4.4), which opens a session and fetches incrementally by topic
id, and confluent-kafka (librdkafka: full fetches by name).

The node's cache holds one session and may evict it at once: two Java consumers evict each
other's session, each then gets FETCH_SESSION_ID_NOT_FOUND for its next incremental fetch and
opens a new session, and both still read every record; a consumer carries on across a restart
of the node (sessions are not kept)."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for
from tests.support.node import ROOT, RunningNode

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"
SESSION_REQUESTS = "rockafka_kafka_fetch_session_requests_total"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    with RunningNode(tmp_path_factory.mktemp("sessions") / "data",
                     settings={"max_incremental_fetch_session_cache_slots": 1,
                               "min_incremental_fetch_session_eviction_ms": 0}) as n:
        yield n


def metric(node, name: str, **labels: str) -> float:
    """The sum of the series of ``name`` carrying ``labels`` in the node's /metrics."""
    text = urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10).read().decode()
    total = 0.0
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        if series.split("{", 1)[0] == name and all(f'{k}="{v}"' in series for k, v in labels.items()):
            total += float(value)
    return total


def console_consumer(bs: str, topic: str, n: int) -> subprocess.Popen:
    """Reads ``n`` records from the beginning, one small fetch at a time (many incremental fetches)."""
    return subprocess.Popen(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"),
                             "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", bs,
                             "--topic", topic, "--from-beginning", "--max-messages", str(n), "--timeout-ms", "60000",
                             "--command-property", "max.partition.fetch.bytes=100",
                             "--command-property", "fetch.max.wait.ms=100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def produce(bs: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for v in values:   # one batch per record
        p.produce(topic, v, partition=0)
        p.flush(10)
    assert p.flush(30) == 0


def test_java_consumers_read_everything_through_incremental_sessions(node):
    bs = node.kafka_bootstrap
    topic = unique("sess")
    create_topic(bs, topic)
    values = [b"v%03d" % i for i in range(40)]
    opened, incremental, refused = (metric(node, SESSION_REQUESTS, kind=k)
                                    for k in ("session_opened", "incremental", "refused"))
    first, second = console_consumer(bs, topic, 40), console_consumer(bs, topic, 40)  # one cache slot for two
    # idle, both poll: each new session evicts the other's, whose next incremental fetch is refused
    wait_for(lambda: metric(node, SESSION_REQUESTS, kind="refused") > refused, timeout=60, interval=0.2,
             what="FETCH_SESSION_ID_NOT_FOUND for an evicted session")
    produce(bs, topic, values)
    for proc in (first, second):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err[-3000:]
        assert out.split() == [v.decode() for v in values], err[-2000:]
    assert metric(node, SESSION_REQUESTS, kind="session_opened") > opened
    assert metric(node, SESSION_REQUESTS, kind="incremental") >= incremental + 20
    assert metric(node, "rockafka_kafka_fetch_sessions") <= 1   # the cache's bound

    # librdkafka fetches by name without sessions: unaffected
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []

        def read_all():
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
            return len(got) == len(values)
        wait_for(read_all, timeout=30, interval=0, what="librdkafka reading the topic")
        assert got == values
    finally:
        c.close()


def test_a_java_consumer_carries_on_across_a_restart(node):
    """A running Java consumer's session is gone with the restarted process: it opens a new one
    and reads what came after."""
    bs = node.kafka_bootstrap
    topic = unique("restart")
    create_topic(bs, topic)
    produce(bs, topic, [b"before-%d" % i for i in range(5)])
    proc = console_consumer(bs, topic, 10)
    try:
        wait_for(lambda: metric(node, SESSION_REQUESTS, kind="incremental") > 0,
                 timeout=60, interval=0.2, what="the consumer's incremental fetches")
        node.restart()
        produce(bs, topic, [b"after-%d" % i for i in range(5)])
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, err[-3000:]
    assert out.split() == [f"before-{i}" for i in range(5)] + [f"after-{i}" for i in range(5)], err[-2000:]
    assert metric(node, SESSION_REQUESTS, kind="session_opened") >= 1   # a new session on the new process
