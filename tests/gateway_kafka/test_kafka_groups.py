"""Consumer groups through the gateway's coordinator with each Python client.

A group of three members rebalances as members join and one leaves (default assignors, and
cooperative-sticky and roundrobin explicitly: the coordinator is protocol-agnostic); every produced record is
processed, and a record is processed twice only when a commit covering it failed (a member
lost the partition before committing), which is Kafka's at-least-once contract. Committed
offsets survive a restart of the server.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from tests.gateway_kafka.kafka_helpers import CLIENTS, consume, create_topic, produce, unique, wait_for

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 6


class Member(threading.Thread):
    """One group member polling, processing and committing synchronously after each poll."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, name: str, assignor: str | None = None):
        super().__init__(daemon=True, name=name)
        self.assignor = assignor
        self.client, self.bootstrap, self.topic, self.group = client, bootstrap, topic, group
        self.stop_flag = threading.Event()
        self.records: list[tuple[int, int]] = []
        self.uncommitted: list[tuple[int, int]] = []  # processed but their commit failed
        self.assignment: set[int] = set()
        self.max_assigned = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            if self.client == "aiokafka":
                asyncio.run(self._run_aiokafka())
            elif self.client == "kafka-python":
                self._run_kafka_python()
            else:
                self._run_confluent()
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def _note(self, parts) -> None:
        self.assignment = set(parts)
        self.max_assigned = max(self.max_assigned, len(self.assignment))

    def _run_kafka_python(self) -> None:
        from kafka import KafkaConsumer
        from kafka.errors import CommitFailedError, KafkaError

        extra = {}
        if self.assignor == "cooperative-sticky":
            from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

            extra["partition_assignment_strategy"] = [CooperativeStickyAssignor]
        elif self.assignor == "roundrobin":
            from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

            extra["partition_assignment_strategy"] = [RoundRobinPartitionAssignor]
        c = KafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                          auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                          heartbeat_interval_ms=500, fetch_max_wait_ms=100, max_poll_records=20, **extra)
        try:
            while not self.stop_flag.is_set():
                batch = c.poll(timeout_ms=100)
                self._note(tp.partition for tp in c.assignment())
                got = [(m.partition, m.offset) for msgs in batch.values() for m in msgs]
                self.records += got
                if got:
                    try:
                        c.commit()
                    except (CommitFailedError, KafkaError):
                        self.uncommitted += got
        finally:
            c.close()

    def _run_confluent(self) -> None:
        from confluent_kafka import Consumer, KafkaException

        conf = {"bootstrap.servers": self.bootstrap, "group.id": self.group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                "fetch.wait.max.ms": 100}
        if self.assignor:
            conf["partition.assignment.strategy"] = self.assignor
        c = Consumer(conf)
        c.subscribe([self.topic])
        try:
            while not self.stop_flag.is_set():
                msgs = c.consume(20, 0.1)
                self._note(tp.partition for tp in c.assignment())
                got = [(m.partition(), m.offset()) for m in msgs if not m.error()]
                self.records += got
                if got:
                    try:
                        c.commit(asynchronous=False)
                    except KafkaException:
                        self.uncommitted += got
        finally:
            c.close()

    async def _run_aiokafka(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.errors import CommitFailedError, KafkaError

        c = AIOKafkaConsumer(self.topic, bootstrap_servers=self.bootstrap, group_id=self.group,
                             auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                             heartbeat_interval_ms=500, fetch_max_wait_ms=100, max_poll_records=20)
        await c.start()
        try:
            while not self.stop_flag.is_set():
                batch = await c.getmany(timeout_ms=100)
                self._note(tp.partition for tp in c.assignment())
                got = [(m.partition, m.offset) for msgs in batch.values() for m in msgs]
                self.records += got
                if got:
                    try:
                        await c.commit()
                    except (CommitFailedError, KafkaError):
                        self.uncommitted += got
        finally:
            await c.stop()

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(60)
        assert not self.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize("client,assignor", [(c, None) for c in CLIENTS] + [
    ("confluent-kafka", "cooperative-sticky"), ("kafka-python", "cooperative-sticky"),
    ("confluent-kafka", "roundrobin"), ("kafka-python", "roundrobin")])
def test_three_member_group_rebalances_without_loss(node, client, assignor):
    bs = node.kafka_bootstrap
    topic, group = unique("grp3"), unique("g3")
    create_topic(bs, topic, partitions=PARTITIONS)
    expected = set()

    def produce_round(start: int, n: int) -> None:
        offsets_by_part = {}
        for p in range(PARTITIONS):
            offs = produce("confluent-kafka", bs, topic, [(None, b"%d-%d" % (p, i), []) for i in range(start, start + n)],
                           partition=p)
            offsets_by_part[p] = offs
            expected.update((p, o) for o in offs)

    produce_round(0, 20)
    members = [Member(client, bs, topic, group, f"{client}-m{i}", assignor) for i in range(3)]
    members[0].start()
    try:
        wait_for(lambda: members[0].records, 60, what="first member to consume")
        members[1].start()
        members[2].start()
        # everyone holds partitions at the same time: the joins rebalanced the group
        wait_for(lambda: all(m.assignment for m in members) and
                 sum(len(m.assignment) for m in members) == PARTITIONS, 60, what="three-way assignment")
        produce_round(20, 20)
        members[1].stop()  # leaves the group; the other two take over its partitions
        wait_for(lambda: sum(len(m.assignment) for m in (members[0], members[2])) == PARTITIONS
                 and all(m.assignment for m in (members[0], members[2])), 60, what="two-way assignment")
        produce_round(40, 20)
        seen = lambda: {r for m in members for r in m.records}  # noqa: E731
        wait_for(lambda: seen() >= expected, 60, what="every record processed")
    finally:
        for m in members:
            if m.is_alive():
                m.stop_flag.set()
        for m in members:
            m.join(60)
    for m in members:
        assert m.error is None, m.error
    all_records = [r for m in members for r in m.records]
    assert set(all_records) == expected
    duplicates = len(all_records) - len(set(all_records))
    allowed = sum(len(m.uncommitted) for m in members)
    assert duplicates <= allowed, f"{duplicates} records processed twice, only {allowed} had a failed commit"
    assert all(m.max_assigned >= 1 for m in members)


@pytest.mark.parametrize("client", CLIENTS)
def test_committed_offsets_survive_restart(make_node, client):
    n = make_node()
    topic, group = unique("restart"), unique("gr")
    create_topic(n.kafka_bootstrap, topic)
    produce(client, n.kafka_bootstrap, topic, [(None, b"m%d" % i, []) for i in range(10)])
    got = consume(client, n.kafka_bootstrap, topic, 10, group=group, commit=True)
    assert len(got) == 10
    n.restart()
    produce(client, n.kafka_bootstrap, topic, [(None, b"m%d" % i, []) for i in range(10, 13)])
    again = consume(client, n.kafka_bootstrap, topic, 3, group=group)
    assert [g[3] for g in again] == [b"m10", b"m11", b"m12"]

    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": n.kafka_bootstrap})
    fut = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])])
    committed = fut[group].result(20).topic_partitions
    assert [(tp.topic, tp.partition, tp.offset) for tp in committed] == [(topic, 0, 10)]


def test_group_admin_describe_list_delete(node):
    from confluent_kafka.admin import AdminClient

    bs = node.kafka_bootstrap
    topic, group = unique("adm"), unique("ga")
    create_topic(bs, topic)
    produce("confluent-kafka", bs, topic, [(None, b"x", [])])
    member = Member("confluent-kafka", bs, topic, group, "describe-me")
    member.start()
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        wait_for(lambda: member.assignment, 60, what="assignment")
        desc = admin.describe_consumer_groups([group])[group].result(20)
        assert str(desc.state).endswith("STABLE")
        assert len(desc.members) == 1
        assert [tp.partition for tp in desc.members[0].assignment.topic_partitions] == [0]
        listed = {g.group_id for g in admin.list_consumer_groups().result(20).valid}
        assert group in listed
        # a group with members cannot be deleted
        with pytest.raises(Exception, match="NON_EMPTY_GROUP|not empty"):
            admin.delete_consumer_groups([group])[group].result(20)
    finally:
        member.stop()
    assert member.records == [(0, 0)]
    admin.delete_consumer_groups([group])[group].result(20)
    listed = {g.group_id for g in admin.list_consumer_groups().result(20).valid}
    assert group not in listed


def wait_until_split(a, b, partitions: int, what: str) -> None:
    """Poll two confluent-kafka members until they share all ``partitions`` between them."""
    def split():
        a.poll(0.05)
        b.poll(0.05)
        return len(a.assignment()) + len(b.assignment()) == partitions and a.assignment() and b.assignment()

    wait_for(split, 60, interval=0, what=what)


def test_static_member_restart_keeps_assignment_without_rebalance(node):
    """KIP-345: a static member (group.instance.id) that restarts within its session timeout
    gets its partitions back and the other member is not rebalanced."""
    from confluent_kafka import Consumer

    bs = node.kafka_bootstrap
    topic, group = unique("static"), unique("gs")
    create_topic(bs, topic, partitions=4)
    revoked = {"a": 0, "b": 0}

    def make(instance: str) -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.instance.id": instance,
                      "session.timeout.ms": 30000, "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest"})

        def on_revoke(consumer, parts):
            if parts:
                revoked[instance] += 1

        c.subscribe([topic], on_revoke=on_revoke)
        return c

    a, b = make("a"), make("b")
    try:
        wait_until_split(a, b, 4, what="two static members assigned")
        b_parts = sorted(tp.partition for tp in b.assignment())
        revoked_a_before = revoked["a"]
        b.close()  # a static member leaves no LeaveGroup behind: its slot is kept
        b = make("b")
        wait_for(lambda: (b.poll(0.05), a.poll(0.05), b.assignment())[2], 60, interval=0, what="b back")
        assert sorted(tp.partition for tp in b.assignment()) == b_parts
        for _ in range(20):  # a keeps polling through b's return and is never revoked
            a.poll(0.05)
        assert revoked["a"] == revoked_a_before
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("crash", [False, True], ids=["restart", "kill"])
def test_group_membership_survives_a_broker_restart_without_rebalance(make_node, crash):
    """As with Kafka (group metadata lives in __consumer_offsets), a broker restart does not
    rebalance a stable group: its members keep their member ids, generation and partitions,
    and go on committing. After a kill -9 too (the group was saved when it became Stable)."""
    from confluent_kafka import Consumer

    n = make_node()
    bs = n.kafka_bootstrap
    topic, group = unique("gsurv"), unique("gsv")
    create_topic(bs, topic, partitions=4)
    events: list[tuple[str, str]] = []

    def make(name: str) -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "session.timeout.ms": 30000,
                      "heartbeat.interval.ms": 500, "auto.offset.reset": "earliest",
                      "enable.auto.commit": False, "reconnect.backoff.max.ms": 500})
        c.subscribe([topic], on_assign=lambda c_, parts: events.append((name, "assign")),
                     on_revoke=lambda c_, parts: events.append((name, "revoke")))
        return c

    a, b = make("a"), make("b")
    try:
        wait_until_split(a, b, 4, what="both members assigned")
        for _ in range(20):  # let the join settle: no more rebalances before the restart
            a.poll(0.05)
            b.poll(0.05)
        before = list(events)
        parts = (sorted(tp.partition for tp in a.assignment()), sorted(tp.partition for tp in b.assignment()))
        member_ids = (a.memberid(), b.memberid())
        if crash:
            n.kill()
            n.start()
        else:
            n.restart()
        produce("confluent-kafka", bs, topic, [(None, b"after", [])] * 8)
        got = 0
        deadline = time.monotonic() + 30
        while got < 8 and time.monotonic() < deadline:
            for c in (a, b):
                m = c.poll(0.1)
                if m is not None and m.error() is None:
                    got += 1
                    c.commit(message=m, asynchronous=False)  # the old generation is still valid
        assert got == 8
        assert events == before, "the restart rebalanced the group"
        assert (a.memberid(), b.memberid()) == member_ids
        assert (sorted(tp.partition for tp in a.assignment()), sorted(tp.partition for tp in b.assignment())) == parts
    finally:
        a.close()
        b.close()
