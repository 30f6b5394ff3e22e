"""KIP-848 consumer groups (``group.protocol=consumer``) with confluent-kafka (librdkafka), and
the protocol's answers on the wire.

Members commit each batch synchronously before they count it ("commit, then emit"), so a record
counted twice is a real duplicate: across joins, leaves and a broker restart every record is
counted exactly once. A regex subscription picks up a topic created later; a classic group is
upgraded member by member to the consumer protocol (and an empty one offline) keeping its
offsets; group configs (resource type GROUP) are stored, described and used.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from gateway_kafka import error_codes as E
from gateway_kafka.apis._common import topic_id
from tests.gateway_kafka.kafka_helpers import RawKafka, unique, wait_for
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)

# short intervals so reconciliation steps (one heartbeat each) are quick; Kafka's bounds lowered
SETTINGS = {"group_consumer_heartbeat_interval_ms": 300, "group_consumer_min_heartbeat_interval_ms": 100,
            "group_consumer_session_timeout_ms": 8000, "group_consumer_min_session_timeout_ms": 1000}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("cgp") / "data", settings=SETTINGS) as n:
        yield n


def create(bs: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)


def produce(bs: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for v in values:
        p.produce(topic, v.encode(), key=v.encode())
    assert p.flush(30) == 0


class Member(threading.Thread):
    """A librdkafka consumer that commits every batch synchronously before counting it."""

    def __init__(self, bs: str, group: str, subscription: list[str], name: str, protocol: str = "consumer",
                 **extra):
        super().__init__(daemon=True, name=name)
        conf = {"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol, "enable.auto.commit": False,
                "auto.offset.reset": "earliest", "client.id": name}
        if protocol == "classic":
            conf.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 500})
        conf.update(extra)
        self.conf, self.subscription = conf, subscription
        self.stop_flag = threading.Event()
        self.records: list[tuple[str, int, int, str]] = []
        self.assigned: set[tuple[str, int]] = set()  # the client's own view, refreshed each poll
        self.error: BaseException | None = None
        self.started = threading.Event()

    def run(self) -> None:
        try:
            c = Consumer(self.conf)
            c.subscribe(self.subscription)
            self.started.set()
            try:
                while not self.stop_flag.is_set():
                    batch = [m for m in c.consume(100, 0.2) if m.error() is None]
                    self.assigned = {(tp.topic, tp.partition) for tp in c.assignment()}
                    if not batch:
                        continue
                    last: dict[tuple[str, int], int] = {}
                    for m in batch:
                        last[(m.topic(), m.partition())] = m.offset() + 1
                    if self._commit(c, [TopicPartition(t, p, o) for (t, p), o in last.items()]):
                        self.records += [(m.topic(), m.partition(), m.offset(), m.value().decode()) for m in batch]
            finally:
                c.close()
        except BaseException as exc:  # surfaced by the test
            self.error = exc

    def _commit(self, c: Consumer, offsets: list[TopicPartition]) -> bool:
        deadline = time.monotonic() + 60
        while True:
            try:
                c.commit(offsets=offsets, asynchronous=False)
                return True
            except KafkaException as exc:
                err = exc.args[0]
                # not committed: the partitions' next owner reads them again, so they are not counted
                if not err.retriable() or time.monotonic() > deadline or self.stop_flag.is_set():
                    return False
                time.sleep(0.2)

    def stop(self) -> None:
        self.stop_flag.set()
        self.join(60)
        assert self.error is None, self.error


def counted(members: list[Member]) -> list[str]:
    return [r[3] for m in members for r in m.records]


def test_members_join_leave_and_a_restart_every_record_exactly_once(node):
    bs = node.kafka_bootstrap
    topic, group = unique("kip848"), unique("g848")
    create(bs, topic, 6)
    values = [f"v{i}" for i in range(600)]
    members = [Member(bs, group, [topic], "m0")]
    members[0].start()
    produce(bs, topic, values[:100])
    wait_for(lambda: len(counted(members)) >= 50, 60, what="the first member consuming")
    for name in ("m1", "m2"):  # joins
        m = Member(bs, group, [topic], name)
        members.append(m)
        m.start()
    # the first member gives up partitions only as it reconciles (heartbeat by heartbeat): records
    # produced before that are rightly its own, so wait for the split before producing more
    wait_for(lambda: all(m.assigned for m in members)
             and sum(len(m.assigned) for m in members) == 6, 60, what="every member getting partitions")
    produce(bs, topic, values[100:250])
    wait_for(lambda: all(m.records for m in members), 60, what="every member getting records")
    members[1].stop()  # a leave
    produce(bs, topic, values[250:400])
    wait_for(lambda: len(set(counted(members))) >= 350, 60, what="records after the leave")
    node.restart()  # a broker restart under the running members
    produce(bs, topic, values[400:500])
    late = Member(bs, group, [topic], "m3")  # a join after the restart
    members.append(late)
    late.start()
    # as above: records produced before it owns partitions are the others' to read
    wait_for(lambda: late.assigned, 60, what="the member that joined after the restart getting partitions")
    produce(bs, topic, values[500:])
    wait_for(lambda: len(set(counted(members))) == len(values), 90, what="every record")
    for m in members:
        if m.is_alive():
            m.stop()
    got = counted(members)
    dupes = sorted({v for v in got if got.count(v) > 1})
    assert not dupes, f"counted more than once: {dupes[:20]}"
    assert sorted(got) == sorted(values)
    assert late.records, "the member that joined after the restart got no partitions"


def test_regex_subscription_picks_up_a_topic_created_later(node):
    bs = node.kafka_bootstrap
    prefix = f"rx{uuid.uuid4().hex[:8]}"
    create(bs, f"{prefix}-a", 2)
    produce(bs, f"{prefix}-a", ["a1", "a2"])
    m = Member(bs, unique("grx"), [f"^{prefix}-.*"], "rx")
    m.start()
    wait_for(lambda: {"a1", "a2"} <= set(counted([m])), 60, what="the first matching topic")
    create(bs, f"{prefix}-b", 3)
    produce(bs, f"{prefix}-b", ["b1", "b2", "b3"])
    create(bs, f"other{prefix}", 1)
    produce(bs, f"other{prefix}", ["x"])
    wait_for(lambda: {"b1", "b2", "b3"} <= set(counted([m])), 60, what="records of the topic created later")
    m.stop()
    assert sorted(counted([m])) == ["a1", "a2", "b1", "b2", "b3"]


def test_classic_group_upgraded_member_by_member_keeps_offsets(node):
    bs = node.kafka_bootstrap
    topic, group = unique("upg"), unique("gupg")
    create(bs, topic, 4)
    values = [f"u{i}" for i in range(400)]
    produce(bs, topic, values[:100])
    classic = [Member(bs, group, [topic], f"c{i}", protocol="classic") for i in range(2)]
    for m in classic:
        m.start()
    everyone: list[Member] = list(classic)

    def waited(n: int, what: str) -> None:
        try:
            wait_for(lambda: len(set(counted(everyone))) == n, 60, what=what)
        except AssertionError as exc:  # what the members and the coordinator saw, to tell why
            raise AssertionError(f"{exc}\n{_group_state(node, group, everyone)}") from None

    waited(100, "the classic group consuming")
    # one member at a time moves to the consumer protocol (online upgrade: the other is still classic)
    classic[0].stop()
    modern = [Member(bs, group, [topic], "n0")]
    everyone += modern
    modern[0].start()
    produce(bs, topic, values[100:200])
    waited(200, "records after the first upgrade")
    assert _group_type(bs, group) == "consumer"
    classic[1].stop()
    modern.append(Member(bs, group, [topic], "n1"))
    everyone.append(modern[1])
    modern[1].start()
    produce(bs, topic, values[200:300])
    waited(300, "records after the second upgrade")
    for m in modern:
        m.stop()
    # offline: the group has no members now; a classic member takes over at the committed offsets
    produce(bs, topic, values[300:])
    back = Member(bs, group, [topic], "back", protocol="classic")
    everyone.append(back)
    back.start()
    waited(400, "records after going back")
    back.stop()
    got = counted(classic + modern + [back])
    assert sorted(got) == sorted(values), "a record was counted twice or never"


def _group_state(node: RunningNode, group: str, members: list[Member]) -> str:
    """Each member's own view and the coordinator's (ConsumerGroupDescribe), and what the node
    logged about the group: a timed-out wait says where the records stopped."""
    lines = [f"{m.name}: alive={m.is_alive()} stopped={m.stop_flag.is_set()} error={m.error!r} "
             f"assigned={sorted(m.assigned)} counted={len(m.records)}" for m in members]
    try:
        raw = RawKafka(node.kafka_bootstrap)
        try:
            lines.append(f"described: {raw.request(69, 1, {'group_ids': [group], 'include_authorized_operations': False})}")
        finally:
            raw.sock.close()
    except Exception as exc:  # the description is a diagnosis; its own failure is reported too
        lines.append(f"describe failed: {exc!r}")
    lines += [line for line in node.log_tail(10**7).splitlines() if group in line][-40:]
    return "\n".join(lines)


def _group_type(bs: str, group: str) -> str:
    raw = RawKafka(bs)
    try:
        resp = raw.request(16, 5, {"states_filter": [], "types_filter": []})
        return {g["group_id"]: g["group_type"] for g in resp["groups"]}.get(group, "")
    finally:
        raw.sock.close()


def _heartbeat(raw: RawKafka, **fields) -> dict:
    body = {"group_id": "g", "member_id": str(uuid.uuid4()), "member_epoch": 0, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": 30000, "subscribed_topic_names": [], "subscribed_topic_regex": None,
            "server_assignor": None, "topic_partitions": []}
    body.update(fields)
    return raw.request(68, 1, body)


def test_heartbeat_answers_as_kafka(node):
    bs = node.kafka_bootstrap
    topic = unique("hb")
    create(bs, topic, 3)
    group = unique("ghb")
    raw = RawKafka(bs)
    try:
        assert _heartbeat(raw, group_id=group, server_assignor="sticky")["error_code"] == E.UNSUPPORTED_ASSIGNOR
        assert _heartbeat(raw, group_id=group, subscribed_topic_regex="(unclosed")["error_code"] == \
            E.INVALID_REGULAR_EXPRESSION
        assert _heartbeat(raw, group_id=group, member_id="")["error_code"] == E.INVALID_REQUEST
        assert _heartbeat(raw, group_id=group, rebalance_timeout_ms=-1)["error_code"] == E.INVALID_REQUEST
        joined = _heartbeat(raw, group_id=group, subscribed_topic_names=[topic], server_assignor="range")
        assert joined["error_code"] == E.NONE and joined["member_epoch"] >= 1
        assert joined["assignment"]["topic_partitions"] == [{"topic_id": topic_id(topic), "partitions": [0, 1, 2]}]
        member = joined["member_id"]
        again = _heartbeat(raw, group_id=group, member_id=member, member_epoch=joined["member_epoch"],
                           rebalance_timeout_ms=-1, subscribed_topic_names=None, topic_partitions=None)
        assert again["error_code"] == E.NONE and again["assignment"] is None  # nothing changed: no assignment
        ahead = _heartbeat(raw, group_id=group, member_id=member, member_epoch=joined["member_epoch"] + 5,
                           topic_partitions=None)
        assert ahead["error_code"] == E.FENCED_MEMBER_EPOCH
        assert _heartbeat(raw, group_id=group, member_epoch=3)["error_code"] == E.UNKNOWN_MEMBER_ID
        # a static member cannot take an instance id still in use
        s1 = _heartbeat(raw, group_id=group, instance_id="i1", subscribed_topic_names=[topic], server_assignor="range")
        assert s1["error_code"] == E.NONE
        assert _heartbeat(raw, group_id=group, instance_id="i1", subscribed_topic_names=[topic])["error_code"] == \
            E.UNRELEASED_INSTANCE_ID
        left = _heartbeat(raw, group_id=group, member_id=member, member_epoch=-1)
        assert left["error_code"] == E.NONE and left["member_epoch"] == -1
        # OffsetCommit from a member of the consumer protocol needs its current epoch (v9+)
        commit = raw.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": 0,
                                    "member_id": s1["member_id"], "group_instance_id": None,
                                    "topics": [{"name": topic, "partitions": [
                                        {"partition_index": 0, "committed_offset": 1,
                                         "committed_leader_epoch": -1, "committed_metadata": None}]}]})
        assert commit["topics"][0]["partitions"][0]["error_code"] == E.STALE_MEMBER_EPOCH
        described = raw.request(69, 1, {"group_ids": [group, "no-such-group"], "include_authorized_operations": True})
        g, missing = described["groups"]
        assert g["error_code"] == E.NONE and g["assignor_name"] == "range"  # the remaining member's choice
        assert [m["instance_id"] for m in g["members"]] == ["i1"] and g["members"][0]["member_type"] == 1
        assert g["authorized_operations"] > 0
        assert missing["error_code"] == E.GROUP_ID_NOT_FOUND
    finally:
        raw.sock.close()


def test_group_configs_stored_described_and_used(node):
    bs = node.kafka_bootstrap
    group = unique("gcfg")
    admin = AdminClient({"bootstrap.servers": bs})
    ops = [ConfigEntry("consumer.heartbeat.interval.ms", "7000", incremental_operation=AlterConfigOpType.SET),
           ConfigEntry("share.delivery.count.limit", "3", incremental_operation=AlterConfigOpType.SET)]
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=ops)
    admin.incremental_alter_configs([res])[res].result(30)
    bad = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("consumer.session.timeout.ms", "10", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="consumer.session.timeout.ms"):
        admin.incremental_alter_configs([bad])[bad].result(30)
    node.restart()  # group configs are records of __consumer_offsets
    admin = AdminClient({"bootstrap.servers": bs})
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    configs = list(described.values())[0].result(30)
    assert configs["consumer.heartbeat.interval.ms"].value == "7000"
    assert configs["share.delivery.count.limit"].value == "3"
    assert configs["consumer.session.timeout.ms"].value == "8000"  # the broker default
    raw = RawKafka(bs)
    try:
        topic = unique("cfgt")
        create(bs, topic, 1)
        joined = _heartbeat(raw, group_id=group, subscribed_topic_names=[topic])
        assert joined["error_code"] == E.NONE and joined["heartbeat_interval_ms"] == 7000
    finally:
        raw.sock.close()


def test_broker_resolved_regex_matches_whole_names_internal_topics_included(node):
    """KIP-848: the coordinator resolves a subscription regex as Kafka's does -- against the whole
    topic name, internal topics included (franz-go's Test848RegexBrokerResolves subscribes to
    ``__consumer_offsets`` this way)."""
    bs = node.kafka_bootstrap
    prefix = f"rxw{uuid.uuid4().hex[:8]}"
    create(bs, f"{prefix}-a", 1)
    create(bs, f"{prefix}-ab", 1)

    def assignment_of(pattern: str, want) -> set[str]:
        c = Consumer({"bootstrap.servers": bs, "group.id": unique("grxw"), "group.protocol": "consumer",
                      "enable.auto.commit": False, "auto.offset.reset": "latest"})
        try:
            c.subscribe([pattern])

            def got():
                c.poll(0.2)
                topics = {tp.topic for tp in c.assignment()}
                return topics if want(topics) else None
            return wait_for(got, 60, what=f"an assignment for {pattern}")
        finally:
            c.close()

    internal = assignment_of("^__consumer_offs.*", lambda t: "__consumer_offsets" in t)
    assert internal == {"__consumer_offsets"}
    whole = assignment_of(f"^{prefix}-a", lambda t: bool(t))
    assert whole == {f"{prefix}-a"}, whole
