"""Kafka clients through a failover (docs/design/failover.md, "What clients see"): the stock
Java producer with its defaults (idempotent, acks=all) keeps producing while the master is
killed — no OUT_OF_ORDER_SEQUENCE_NUMBER, no error, each record stored once at the offset it was
acknowledged with — and the partition leader epoch follows the master epoch: Metadata reports
it, stored batches carry it, OffsetForLeaderEpoch answers where an older epoch ended."""

from __future__ import annotations

import subprocess

import pytest

from tests.compat import java_runner
from tests.gateway_kafka.kafka_helpers import RawKafka
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    java_runner.build(java_runner.KAFKA_DIR)
    g = FailoverGroup(tmp_path_factory.mktemp("kafka-failover")).start()
    yield g
    g.stop()


def _bootstrap(group: FailoverGroup) -> str:
    return ",".join(b.kafka_bootstrap for b in group.brokers)


def test_java_idempotent_producer_keeps_producing_through_kill_9_of_the_master(group, tmp_path):
    master = group.wait_settled()
    cmd = java_runner.kafka_command(_bootstrap(group), ["idempotent-failover"], tmp_path)
    cmd[-4:-4] = ["--records", "300", "--timeout-s", "180"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (tmp_path / "producing").exists() or proc.poll() is not None, 120,
                   what="the Java producer's first acknowledgements")
        master.kill()
        group.wait_master(not_=master)
        (tmp_path / "failed-over").touch()
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    result = java_runner.parse(cmd, proc.returncode, out, err)
    result.assert_passed("idempotent-failover", min_checks=7)
    master.start()  # rejoins as a slave
    group.wait_settled()


def _metadata(node, topic: str) -> dict:
    with RawKafka(node.kafka_bootstrap) as raw:
        resp = raw.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                  "include_cluster_authorized_operations": False,
                                  "include_topic_authorized_operations": False})
    parts = resp["topics"][0]["partitions"]
    return parts[0] if parts else {}  # not there yet: a new topic reaches each member in turn


def _epoch_end(node, topic: str, epoch: int, current: int = -1) -> dict:
    with RawKafka(node.kafka_bootstrap) as raw:
        resp = raw.request(23, 3, {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
            {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}]}]})
    return resp["topics"][0]["partitions"][0]


def test_leader_epoch_follows_the_master_epoch(group):
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    master = group.wait_settled()
    topic = "epoch-topic"
    kadmin = AdminClient({"bootstrap.servers": _bootstrap(group)})
    kadmin.create_topics([NewTopic(topic, 1, 3)], request_timeout=15)[topic].result(30)
    epoch = group.ha(master)["masterEpoch"]
    p = Producer({"bootstrap.servers": _bootstrap(group), "acks": "all"})
    for i in range(20):
        p.produce(topic, f"a-{i}".encode(), partition=0)
    assert p.flush(30) == 0
    for node in group.brokers:  # every member reports the master's epoch
        wait_until(lambda: _metadata(node, topic).get("leader_epoch") == epoch, 30, what="the leader epoch in Metadata")
    # a manual switch: the epoch grows by one
    target = next(b for b in group.brokers if b is not master)
    from gateway_native.client import Admin

    with Admin(group.namesrv_addr) as admin:
        admin.elect_master(group.namesrv_addr.split(";"), "broker-a", group.brokers.index(target) + 1)
    new = group.wait_master(not_=master)
    wait_until(lambda: _metadata(new, topic).get("leader_epoch") == epoch + 1, 30, what="the bumped leader epoch")
    wait_until(lambda: _metadata(master, topic).get("leader_epoch") == epoch + 1, 30,
               what="the old master reporting the new epoch")
    assert _metadata(new, topic)["leader_id"] == group.brokers.index(new) + 1

    def more() -> bool:
        p.produce(topic, b"b-after", partition=0)
        return p.flush(10) == 0
    wait_until(more, 60, 0.5, "a record acknowledged by the new master")
    # where the old epoch ended, per the new master's epoch file
    assert _epoch_end(new, topic, epoch) == {"error_code": 0, "partition": 0, "leader_epoch": epoch, "end_offset": 20}
    end = _epoch_end(new, topic, epoch + 1)
    assert end["leader_epoch"] == epoch + 1 and end["end_offset"] >= 21
    assert _epoch_end(new, topic, epoch, current=epoch)["error_code"] == 74  # FENCED_LEADER_EPOCH
    assert _epoch_end(new, topic, epoch, current=epoch + 5)["error_code"] == 75  # UNKNOWN_LEADER_EPOCH
    # stored batches carry the epoch they were written in
    c = Consumer({"bootstrap.servers": _bootstrap(group), "group.id": "epoch-check", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        from confluent_kafka import TopicPartition

        c.assign([TopicPartition(topic, 0, 0)])
        seen = []
        wait_until(lambda: seen.extend(m for m in c.consume(50, 1.0) if m.error() is None) or
                   any(m.value() == b"b-after" for m in seen), 60, what="the records back")
        epochs = {m.value()[:1]: m.leader_epoch() for m in seen}
        assert epochs[b"a"] == epoch and epochs[b"b"] == epoch + 1, epochs
    finally:
        c.close()


def test_elect_leaders_moves_the_group_to_its_preferred_replica(group):
    from confluent_kafka import ElectionType, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from gateway_native.client import Admin

    master = group.wait_settled()
    preferred = group.by_id(1)  # the lowest broker id: first in every partition's replica list
    if master is preferred:  # lead elsewhere first, so the election has something to do
        with Admin(group.namesrv_addr) as admin:
            admin.elect_master(group.namesrv_addr.split(";"), "broker-a", 2)
        master = group.wait_master(not_=preferred)
    group.wait_settled()
    kadmin = AdminClient({"bootstrap.servers": _bootstrap(group)})
    topic = "elect-topic"
    kadmin.create_topics([NewTopic(topic, 2, 3)], request_timeout=15)[topic].result(30)
    replicas = wait_until(lambda: _metadata(master, topic).get("replica_nodes"), 30, what="the topic on the master")
    assert replicas[0] == 1
    # the preferred replica must hold the topic before it leads: a slave copies the topic table
    # (haSyncMetadataInterval; at once on a change), so one elected the instant after CreateTopics
    # would lead without it and every member would then copy its table (replication.md)
    for node in group.brokers:
        wait_until(lambda: _metadata(node, topic).get("replica_nodes"), 30, what="the topic on every member")
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    result = kadmin.elect_leaders(ElectionType.PREFERRED, parts).result(60)
    assert all(err is None for err in result.values()), result
    assert group.wait_master(not_=master) is preferred
    group.wait_settled()
    for node in group.brokers:  # every member's view, whichever the admin client asks next
        try:
            wait_until(lambda: _metadata(node, topic).get("leader_id") == 1, 30, what="partition 0 led by broker 1")
        except AssertionError as exc:  # say what each member and the NameServers list
            with Admin(group.namesrv_addr) as admin:
                addrs = admin.cluster_info().get("brokerAddrTable", {})
            views = {b.kafka_bootstrap: _metadata(b, topic) for b in group.brokers}
            raise AssertionError(f"{exc}; metadata per member: {views}; NameServer brokerAddrTable: {addrs}") from None
    # now the preferred replica leads: nothing to elect
    result = kadmin.elect_leaders(ElectionType.PREFERRED, parts).result(60)
    assert {err.code() for err in result.values()} == {84}, result  # ELECTION_NOT_NEEDED


def test_transactions_and_committed_offsets_carry_over_to_the_new_master(group):
    """The new master's coordinators recover from the log it holds: a transaction open across the
    switch commits there (its records become visible to read_committed readers, none is lost or
    doubled) and a group's committed offset is what the group reads back."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    from gateway_native.client import Admin

    master = group.wait_settled()
    boot = _bootstrap(group)
    topic = "txn-failover-topic"
    kadmin = AdminClient({"bootstrap.servers": boot})
    kadmin.create_topics([NewTopic(topic, 1, 3)], request_timeout=15)[topic].result(30)
    offsets = Consumer({"bootstrap.servers": boot, "group.id": "failover-group", "enable.auto.commit": False})
    offsets.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    offsets.close()
    p = Producer({"bootstrap.servers": boot, "transactional.id": "failover-txn", "transaction.timeout.ms": 120_000})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"before-{i}".encode(), partition=0)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, f"open-{i}".encode(), partition=0)
    assert p.flush(30) == 0  # stored in the open transaction on the old master (and its slaves)

    target = next(b for b in group.brokers if b is not master)
    with Admin(group.namesrv_addr) as admin:
        admin.elect_master(group.namesrv_addr.split(";"), "broker-a", group.brokers.index(target) + 1)
    assert group.wait_master(not_=master) is target
    p.commit_transaction(60)  # EndTxn at the new master's coordinator, which knows the transaction

    c = Consumer({"bootstrap.servers": boot, "group.id": "failover-group", "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0)
        committed = wait_until(lambda: (lambda r: r[0] if r and r[0].offset >= 0 else None)(
            c.committed([tp], timeout=5)), 60, 0.5, "the group's committed offset from the new master")
        assert committed.offset == 7
        c.assign([TopicPartition(topic, 0, 0)])
        seen: list[bytes] = []
        wait_until(lambda: seen.extend(m.value() for m in c.consume(50, 1.0) if m.error() is None) or
                   len(seen) >= 10, 60, what="both transactions' records")
        c.consume(50, 1.0)  # nothing more arrives
        assert seen == [f"before-{i}".encode() for i in range(5)] + [f"open-{i}".encode() for i in range(5)]
    finally:
        c.close()
    group.wait_settled()
