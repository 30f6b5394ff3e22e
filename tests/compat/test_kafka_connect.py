"""A Kafka Connect distributed worker (Apache Kafka connect-runtime 4.4.0, ``ConnectDistributed``)
on a node whose commitlog segments expire at once (small segments, fileReservedTime=0, a retention
pass every 300 ms): the worker keeps its connector configs, source offsets and statuses in
compacted topics it creates itself; after it stops, enough other writes roll the log that the
retention pass deletes every segment those records were first written to. The compacted topics
still hold every key's latest value, and the restarted worker finds its connector and resumes
its task from the stored offset: each line of the source file lands in the topic exactly once.
The worker runs with exactly.once.source.support=enabled (transactional config and offset writes,
read_committed reads): a compacted partition whose last offset is a transaction marker must stay
readable to its end after the marker's segment goes, or the worker never finishes reading it.

Clients: connect-runtime 4.4.0 running compat/kafka-tools/src's LineFileSourceConnector (the
contract of connect-file's FileStreamSourceConnector, not published for 4.4), confluent-kafka."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from tests.gateway_kafka.kafka_helpers import unique, wait_for
from tests.support.node import ROOT, RunningNode, free_port

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"
SETTINGS = {"mappedFileSizeCommitLog": 64 * 1024, "fileReservedTime": 0, "cleanResourceInterval": 300,
            "deleteWhen": ";".join(f"{h:02d}" for h in range(24))}
# one short-lived JVM at a time: C1 only and the shared class archive cut its start-up
JVM_FLAGS = ["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-XX:+UseSerialGC", "-Xms64m", "-Xmx384m"]


@pytest.fixture(scope="module", autouse=True)
def tools():
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)


class Worker:
    """One ``ConnectDistributed`` JVM; its output goes to a file shown when a check fails."""

    def __init__(self, workdir: Path, props: Path, port: int):
        self.workdir, self.props, self.port = workdir, props, port
        self.proc: subprocess.Popen | None = None
        self.log = workdir / "worker.log"

    def start(self) -> "Worker":
        out = open(self.log, "ab")
        self.proc = subprocess.Popen(
            ["java", *JVM_FLAGS, "-cp", str(KAFKA_TOOLS / "lib" / "*"),
             "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
            stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir, start_new_session=True)
        out.close()
        wait_for(lambda: self.alive() and self.get("/connectors") is not None, 90, interval=0.3,
                 what="the Connect REST API (" + self.tail() + ")")
        return self

    def alive(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            raise AssertionError(f"worker exited with {self.proc.returncode}: {self.tail()}")
        return True

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def request(self, method: str, path: str, body: dict | None = None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)

    def get(self, path: str):
        """The decoded answer, or None while the worker is not ready (connection refused, 404 or
        409 while it rebalances / reads its config topic)."""
        try:
            return self.request("GET", path)[1]
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return None

    def stop(self) -> None:
        """SIGTERM: the worker stops its tasks (committing their offsets) and leaves its group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
                raise AssertionError("worker did not stop on SIGTERM: " + self.tail())
        self.proc = None


def read_topic(bs: str, topic: str) -> list[tuple[int, int, bytes | None, bytes | None]]:
    """(partition, offset, key, value) of every record of every partition, to the end."""
    admin = AdminClient({"bootstrap.servers": bs})
    parts = sorted(admin.list_topics(topic, timeout=10).topics[topic].partitions)
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("connect-r"), "enable.auto.commit": False,
                  "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    got = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        pending = set(parts)
        deadline = time.monotonic() + 30
        while pending:
            assert time.monotonic() < deadline, f"{topic}: no end of partitions {pending}"
            m = c.poll(5)
            if m is None:
                continue
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                pending.discard(m.partition())
                continue
            got.append((m.partition(), m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return got


def latest_per_key(records) -> dict:
    """What a compacted topic promises: each (partition, key)'s last value, at its offset."""
    out = {}
    for part, off, key, value in records:
        out[(part, key)] = (off, value)
    return {k: v for k, v in out.items() if v[1] is not None}


def copied_lines(bs: str, topic: str, since: int = 0) -> list[str]:
    """The lines in the (one-partition) topic from offset ``since`` on, in order."""
    return [json.loads(v) for _, off, _, v in sorted(read_topic(bs, topic), key=lambda r: r[1]) if off >= since]


def test_connect_worker_finds_connector_and_offsets_after_retention(tmp_path):
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        bs = node.kafka_bootstrap
        tag = unique("cx")
        cfg_t, off_t, st_t, data_t, plain = (f"{tag}-configs", f"{tag}-offsets", f"{tag}-status",
                                             f"{tag}-lines", f"{tag}-plain")
        source = tmp_path / "source.txt"
        first = [f"line {i} " + "x" * 40 for i in range(50)]
        source.write_text("".join(s + "\n" for s in first))
        port = free_port()
        props = tmp_path / "worker.properties"
        props.write_text("\n".join([
            f"bootstrap.servers={bs}",
            f"group.id={tag}-workers",
            f"listeners=http://127.0.0.1:{port}",
            "rest.advertised.host.name=127.0.0.1",
            f"rest.advertised.port={port}",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable=false",
            "value.converter.schemas.enable=false",
            f"config.storage.topic={cfg_t}",
            f"offset.storage.topic={off_t}",
            f"status.storage.topic={st_t}",
            "config.storage.replication.factor=1",
            "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "offset.storage.partitions=2",
            "status.storage.partitions=1",
            "offset.flush.interval.ms=500",
            "scheduled.rebalance.max.delay.ms=1000",
            f"plugin.path={tmp_path / 'plugins'}",
            # KIP-618: the leader writes the config topic in transactions, each task's records and
            # offsets go in one transaction, the worker reads its topics read_committed (a
            # superset of what the default at-least-once worker asks of the broker)
            "exactly.once.source.support=enabled",
        ]) + "\n")
        (tmp_path / "plugins").mkdir()
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(data_t, 1, 1), NewTopic(plain, 1, 1)]).values():
            f.result(30)

        worker = Worker(tmp_path, props, port).start()
        try:
            status, created = worker.request("POST", "/connectors", {"name": "lines", "config": {
                "connector.class": "rockafka.connect.LineFileSourceConnector",
                "tasks.max": "1", "file": str(source), "topic": data_t}})
            assert status == 201, created
            wait_for(lambda: [t.get("state") for t in (worker.get("/connectors/lines/status") or {}).get("tasks", [])]
                     == ["RUNNING"], 60, interval=0.3, what="the task running (" + worker.tail() + ")")
            wait_for(lambda: len(copied_lines(bs, data_t)) >= len(first), 60, interval=0.5,
                     what="the file's lines in the topic")
            assert copied_lines(bs, data_t) == first

            # the worker's internal topics, as it created them: compacted
            for t in (cfg_t, off_t, st_t):
                res = ConfigResource(ConfigResource.Type.TOPIC, t)
                assert admin.describe_configs([res])[res].result(20)["cleanup.policy"].value == "compact", t

            # the task's offset reaches the end of the file
            size = source.stat().st_size

            def stored_position():
                latest = latest_per_key(read_topic(bs, off_t))
                positions = [json.loads(v).get("position") for (_, k), (_, v) in latest.items()
                             if k is not None and b"lines" in k]
                return positions[0] if positions else None
            wait_for(lambda: stored_position() == size, 30, interval=0.5, what="the source offset committed")
        finally:
            worker.stop()
        assert copied_lines(bs, data_t) == first  # the stop copied nothing more
        c = Consumer({"bootstrap.servers": bs, "group.id": unique("connect-w")})
        try:  # the lines took offsets 0..49, their commit marker the next one
            copied_end = c.get_watermark_offsets(TopicPartition(data_t, 0), timeout=10)[1]
        finally:
            c.close()
        assert copied_end >= len(first)

        before = {t: latest_per_key(read_topic(bs, t)) for t in (cfg_t, off_t, st_t)}
        assert any(k[1] and k[1].startswith(b"connector-lines") for k in before[cfg_t]), before[cfg_t].keys()

        # roll the log well past every record the worker wrote; the retention pass deletes those
        # segments, compaction keeps the latest values. Once the plain topic (written after the
        # worker stopped) has lost its first records, every segment before them is gone too.
        p = Producer({"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 8192})
        pad = b"." * 2000
        for i in range(160):
            p.produce(plain, b"p%d" % i + pad, partition=0)
            p.poll(0)
        assert p.flush(30) == 0

        def plain_start() -> int:
            c = Consumer({"bootstrap.servers": bs, "group.id": unique("connect-w")})
            try:
                return c.get_watermark_offsets(TopicPartition(plain, 0), timeout=10)[0]
            finally:
                c.close()
        wait_for(lambda: plain_start() > 80, 60, interval=0.3, what="retention deleting old segments")
        for t, latest in before.items():
            wait_for(lambda: latest_per_key(read_topic(bs, t)) == latest, 30, interval=0.5,
                     what=f"{t}: every key's latest value after the retention pass")

        # more lines while the worker is down; the restarted worker copies only those (the first
        # ones went with their segments: the line topic is not compacted, its records have no key)
        more = [f"later {i}" for i in range(10)]
        with source.open("a") as f:
            f.write("".join(s + "\n" for s in more))
        worker = Worker(tmp_path, props, port).start()
        try:
            wait_for(lambda: worker.get("/connectors") == ["lines"], 60, interval=0.3,
                     what="the connector found again (" + worker.tail() + ")")
            config = worker.get("/connectors/lines/config")
            assert config["file"] == str(source) and config["topic"] == data_t
            wait_for(lambda: len(copied_lines(bs, data_t, copied_end)) >= len(more), 60, interval=0.5,
                     what="the new lines copied (" + worker.tail() + ")")
            # the task resumed at its stored position: no line copied twice, nothing skipped
            assert copied_lines(bs, data_t, copied_end) == more
        finally:
            worker.stop()
