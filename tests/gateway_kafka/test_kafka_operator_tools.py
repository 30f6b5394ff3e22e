"""Apache Kafka's operator tools (kafka-tools jars) against the gateway: ``kafka-log-dirs
--describe``, ``kafka-transactions describe-producers`` / ``find-hanging`` and
``kafka-reassign-partitions --list`` / ``--execute`` (refused with the reason)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway_kafka.kafka_helpers import unique

pytestmark = [pytest.mark.timeout(300),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = Path(__file__).resolve().parents[2] / "compat" / "kafka-tools"


def tool(main: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), main, *args],
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def setup(node):
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    bs = node.kafka_bootstrap
    topic = unique("ops")
    admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bs, "enable.idempotence": True})
    for i in range(20):
        p.produce(topic, b"x" * 100, key=b"k%d" % i, partition=0)
    assert p.flush(30) == 0
    txn = Producer({"bootstrap.servers": bs, "transactional.id": unique("ops-txn")})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce(topic, b"open", partition=1)
    assert txn.flush(30) == 0  # the transaction stays open
    yield bs, topic
    txn.abort_transaction(30)


def test_log_dirs_describe_shows_partition_sizes(setup):
    bs, topic = setup
    out = tool("org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", bs, "--describe", "--topic-list", topic)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(next(ln for ln in out.stdout.splitlines() if ln.startswith("{")))
    (broker,) = doc["brokers"]
    (log_dir,) = broker["logDirs"]
    assert log_dir["error"] is None and log_dir["logDir"]
    sizes = {p["partition"]: p for p in log_dir["partitions"]}
    assert set(sizes) == {f"{topic}-0", f"{topic}-1"}
    assert sizes[f"{topic}-0"]["size"] > 20 * 100  # 20 records of 100 bytes, with their framing
    assert 0 < sizes[f"{topic}-1"]["size"] < sizes[f"{topic}-0"]["size"]
    assert all(p["offsetLag"] == 0 and not p["isFuture"] for p in sizes.values())


def test_transactions_describe_producers_and_find_hanging(setup):
    bs, topic = setup
    out = tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bs, "describe-producers",
               "--topic", topic, "--partition", "0")
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    assert len(rows) == 1, out.stdout  # the idempotent producer
    assert rows[0][3] == "19" and rows[0][-1] == "None", out.stdout  # last sequence; no open transaction
    out = tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bs, "describe-producers",
               "--topic", topic, "--partition", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [ln.split() for ln in out.stdout.splitlines()[1:] if ln.strip()]
    assert len(rows) == 1 and rows[0][-1] == "0", out.stdout  # the open transaction starts at offset 0
    # the open transaction is young and its coordinator knows it: not hanging
    out = tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bs, "find-hanging",
               "--broker-id", "0")
    assert out.returncode == 0, out.stderr[-3000:]
    assert [ln for ln in out.stdout.splitlines()[1:] if ln.strip()] == [], out.stdout


def test_reassign_partitions_lists_none_and_refuses_a_move(setup, tmp_path):
    bs, topic = setup
    main = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    out = tool(main, "--bootstrap-server", bs, "--list")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "No partition reassignments found." in out.stdout
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [0]}]}))
    out = tool(main, "--bootstrap-server", bs, "--execute", "--reassignment-json-file", str(plan))
    assert out.returncode != 0
    assert "partitions do not move between brokers" in out.stdout + out.stderr
