"""KIP-932 share groups with the stock Java ``KafkaShareConsumer`` (kafka-clients 4.4),
``kafka-share-groups`` and confluent-kafka's ``ShareConsumer``: one node, one Members JVM, several
checks per test (docs/design/share-groups.md).

Two members share one partition. Values say what a member does with a record (see
``compat/java`` ``Members``): ``release-1-*`` is RELEASEd at its first delivery and ACCEPTed at
the second, ``reject-*`` is REJECTed (it lands in ``%DLQ%<group>``), ``renew-*`` is RENEWed once
and then ACCEPTed, everything else is ACCEPTed.
Members report a poll's records only after commitSync succeeded, so an accepted value reported
twice is a real redelivery.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from tests.compat import java_runner
from tests.gateway_kafka.kafka_helpers import unique
from tests.support.node import RunningNode, rockafka_command

pytestmark = pytest.mark.timeout(300)

SETTINGS = {"group_share_heartbeat_interval_ms": 500, "group_share_min_heartbeat_interval_ms": 100,
            "group_share_session_timeout_ms": 10000, "group_share_min_session_timeout_ms": 1000,
            "group_share_record_lock_duration_ms": 5000}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    java_runner.build(java_runner.KAFKA_DIR)
    with RunningNode(tmp_path_factory.mktemp("share") / "data", settings=SETTINGS) as n:
        yield n


def produce(bs: str, topic: str, values: list[str]) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 5})
    for v in values:
        p.produce(topic, v.encode(), key=v.encode())
    assert p.flush(30) == 0


def wait_until(pred, timeout: float, what: str, members=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.2)
    extra = f"; last events: {members.snapshot()[-20:]}" if members is not None else ""
    raise AssertionError(what + extra)


def share_topic(bs: str, prefix: str, partitions: int) -> tuple[str, str]:
    """A new topic and a share group set to start at its beginning."""
    topic, group = unique(prefix), unique(prefix + "-g")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    return topic, group


def dlq_values(node, group: str) -> list[str]:
    out = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, "dlq", "list", group],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_share_consumers_share_a_partition_release_reject_and_restart(node):
    bs = node.kafka_bootstrap
    topic, group = share_topic(bs, "shr", 1)
    plain = [f"v-{i}" for i in range(20)]
    released = [f"release-1-{i}" for i in range(4)]
    rejected = [f"reject-{i}" for i in range(3)]
    members = java_runner.JavaMembers(bs)
    try:
        members.send(f"share m1 {group} {topic} max.poll.records=5")
        members.send(f"share m2 {group} {topic} max.poll.records=5")

        # both members join and both are assigned the one partition; then the records arrive
        def assigned() -> list[str]:
            lines = [ln for ln in share_groups_tool(bs, "--describe", "--group", group, "--members") if group in ln]
            return lines if len(lines) == 2 and all(f"{topic}:0" in ln for ln in lines) else []

        wait_until(assigned, 60, "the two share members were not both assigned the partition", members)
        produce(bs, topic, plain[:10] + released + rejected + ["renew-0"] + plain[10:])

        def accepted() -> Counter:
            return Counter(r[3] for r in members.records() if r[5] == "ACCEPT")

        wait_until(lambda: set(plain + released + ["renew-0"]) <= set(accepted()), 90, "not every record was accepted",
                   members)
        wait_until(lambda: set(rejected) <= {r[3] for r in members.records() if r[5] == "REJECT"}, 30,
                   "rejected records were not reported", members)
        rows = members.records()
        # a released record comes back with a delivery count one higher, then is accepted
        for v in released:
            seen = sorted((r[4], r[5]) for r in rows if r[3] == v)
            assert seen[0] == (1, "RELEASE") and (2, "ACCEPT") in seen, (v, seen)
        assert all(r[4] == 1 for r in rows if r[3] in plain), "a plain record was delivered twice"
        # a renewed lock keeps the record with its member, same delivery count
        assert [(r[4], r[5]) for r in rows if r[3] == "renew-0"] == [(1, "RENEW"), (1, "ACCEPT")], rows
        per_member = Counter(e["member"] for e in members.snapshot() if e.get("event") == "records")
        assert set(per_member) == {"m1", "m2"}, f"the partition was not shared: {per_member}"

        assert group in share_groups_tool(bs, "--list")

        # rejected records are in the group's dead-letter queue
        def all_dead() -> bool:
            lines = dlq_values(node, group)
            return all(any(ln.endswith(" " + v) for ln in lines) for v in rejected)

        wait_until(all_dead, 30, "rejected records are not in the DLQ")
        # a dead letter resent with `rockafka admin dlq resend` goes back to its partition: delivered again
        row = next(ln.split() for ln in dlq_values(node, group) if ln.endswith(" reject-0"))
        resend = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, "dlq", "resend", group,
                                                      row[0]], capture_output=True, text=True, timeout=60)
        assert resend.returncode == 0 and topic in resend.stdout, resend.stdout + resend.stderr
        wait_until(lambda: sum(1 for r in members.records() if r[3] == "reject-0") == 2, 30,
                   "the resent dead letter was not delivered again", members)

        # a broker restart: accepted records are never delivered again, new ones are delivered
        node.restart()
        after = [f"after-{i}" for i in range(10)]
        produce(bs, topic, after)
        wait_until(lambda: set(after) <= set(accepted()), 120, "records produced after the restart were not delivered",
                   members)
        twice = {v: n for v, n in accepted().items() if n > 1}
        assert not twice, f"accepted records delivered again: {twice}"
        members.send("stop m1")
        members.send("stop m2")
        members.wait_for(lambda e: e.get("event") == "stopped" and e.get("member") == "m2", 60, "m2 did not stop")
        members.wait_for(lambda e: e.get("event") == "stopped" and e.get("member") == "m1", 60, "m1 did not stop")
    finally:
        members.close()

    # offsets as kafka-share-groups shows them: everything done, start offset at the end, no lag
    total = len(plain + released + rejected + after) + 2  # and renew-0, and the resent dead letter
    wait_until(lambda: offsets_row(bs, group, topic) == [str(total), "0"], 30, "share group offsets not at the end")
    # offsets change only in an empty group (the members' leave may trail their close)
    wait_until(lambda: any(ln.split()[:1] == [group] and " Empty " in ln
                           for ln in share_groups_tool(bs, "--describe", "--group", group, "--state")), 30,
               "the share group did not become empty")
    share_groups_tool(bs, "--reset-offsets", "--to-earliest", "--execute", "--group", group, "--topic", topic)
    assert offsets_row(bs, group, topic) == ["0", str(total)]
    share_groups_tool(bs, "--delete-offsets", "--group", group, "--topic", topic)
    assert offsets_row(bs, group, topic) is None


def share_groups_tool(bs: str, *args: str) -> list[str]:
    out = subprocess.run(["java", "-cp", str(java_runner.ROOT / "compat" / "kafka-tools" / "lib" / "*"),
                          "org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--bootstrap-server", bs, *args],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def offsets_row(bs: str, group: str, topic: str) -> list[str] | None:
    """[start offset, lag] of partition 0 in ``kafka-share-groups --describe`` (None: no row)."""
    for ln in share_groups_tool(bs, "--describe", "--group", group):
        cols = ln.split()
        if len(cols) >= 5 and cols[0] == group and cols[1] == topic and cols[2] == "0":
            return [cols[3], cols[-1]]
    return None


def test_confluent_kafka_share_consumer_accept_release_reject(node):
    """confluent-kafka 2.16's ShareConsumer (librdkafka's KIP-932 client), explicit acknowledgement."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    bs = node.kafka_bootstrap
    topic, group = share_topic(bs, "shc", 2)
    values = [f"c-{i}" for i in range(12)] + ["release-a", "reject-a"]
    produce(bs, topic, values)
    consumer = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit"})
    seen: list[tuple[str, int, str]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not ({v for v, _, a in seen if a == "ACCEPT"} >= set(values) - {"reject-a"}
                                                   and ("reject-a", 1, "REJECT") in seen):
            for m in consumer.poll(0.5):
                if m.error():
                    continue
                v, count = m.value().decode(), m.delivery_count()
                ack = AcknowledgeType.ACCEPT
                if v == "release-a" and count == 1:
                    ack = AcknowledgeType.RELEASE
                elif v == "reject-a":
                    ack = AcknowledgeType.REJECT
                consumer.acknowledge(m, ack)
                seen.append((v, count, ack.name))
            consumer.commit_sync()
    finally:
        consumer.close()
    accepted = Counter(v for v, _, a in seen if a == "ACCEPT")
    assert set(accepted) == set(values) - {"reject-a"} and max(accepted.values()) == 1, seen
    assert ("release-a", 1, "RELEASE") in seen and ("release-a", 2, "ACCEPT") in seen, seen
    assert [s for s in seen if s[0] == "reject-a"] == [("reject-a", 1, "REJECT")], seen
    assert any("reject-a" in ln for ln in dlq_values(node, group))


def test_released_record_waits_the_groups_redelivery_delay_level(node):
    """``share.record.redelivery.delay.level`` (set like any group config, kafka-configs
    --entity-type groups): a record released by confluent-kafka's ShareConsumer comes back with
    delivery count 2 no earlier than the engine's delay level 2 (5 s of the default
    messageDelayLevel), while the records behind it are delivered meanwhile."""
    from confluent_kafka import AcknowledgeType, ShareConsumer

    bs = node.kafka_bootstrap
    topic, group = share_topic(bs, "shd", 1)
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.record.redelivery.delay.level", "2", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    described = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)])
    assert next(iter(described.values())).result(30)["share.record.redelivery.delay.level"].value == "2"
    produce(bs, topic, ["later-0"])
    consumer = ShareConsumer({"bootstrap.servers": bs, "group.id": group, "share.acknowledgement.mode": "explicit"})
    released_at = redelivered_at = None
    accepted: list[str] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and redelivered_at is None:
            for m in consumer.poll(0.5):
                if m.error():
                    continue
                v, count = m.value().decode(), m.delivery_count()
                if v == "later-0" and count == 1:
                    consumer.acknowledge(m, AcknowledgeType.RELEASE)
                    released_at = time.monotonic()   # before the release is sent with the commit
                    produce(bs, topic, ["next-0", "next-1"])
                    continue
                if v == "later-0":
                    redelivered_at = time.monotonic()
                    assert count == 2
                consumer.acknowledge(m, AcknowledgeType.ACCEPT)
                accepted.append(v)
            consumer.commit_sync()
    finally:
        consumer.close()
    assert released_at is not None and redelivered_at is not None, accepted
    assert redelivered_at - released_at >= 4.95, redelivered_at - released_at
    assert accepted.index("next-0") < accepted.index("later-0"), accepted


def test_share_requests_that_cannot_apply_get_kafka_errors(node):
    """Bad share requests answer the protocol's error codes; the session and records stay usable."""
    import uuid

    from gateway_kafka import error_codes as E
    from gateway_kafka.apis._common import topic_id
    from tests.gateway_kafka.kafka_helpers import RawKafka

    bs = node.kafka_bootstrap
    topic, group = share_topic(bs, "she", 1)
    produce(bs, topic, ["a", "b"])
    tid, member = topic_id(topic), str(uuid.uuid4())
    raw = RawKafka(bs)

    def fetch(epoch: int, acks: list | None = None, who: str = member) -> dict:
        part = {"partition_index": 0, "acknowledgement_batches": acks or []}
        return raw.request(78, 2, {"group_id": group, "member_id": who, "share_session_epoch": epoch,
                                   "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 10,
                                   "batch_size": 10, "share_acquire_mode": 0, "is_renew_ack": False,
                                   "topics": [{"topic_id": tid, "partitions": [part]}], "forgotten_topics_data": []})

    try:
        assert fetch(0)["error_code"] == E.UNKNOWN_MEMBER_ID  # not a member of the group yet
        hb = raw.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                                 "subscribed_topic_names": [topic]})
        assert hb["error_code"] == E.NONE and hb["assignment"]["topic_partitions"][0]["partitions"] == [0]
        assert fetch(5)["error_code"] == E.SHARE_SESSION_NOT_FOUND
        got = fetch(0)
        [part] = got["responses"][0]["partitions"]
        assert part["acquired_records"] == [{"first_offset": 0, "last_offset": 1, "delivery_count": 1}]
        assert fetch(3)["error_code"] == E.INVALID_SHARE_SESSION_EPOCH  # expected 1
        # an offset this member does not hold: nothing of the partition is applied
        bad = fetch(1, [{"first_offset": 0, "last_offset": 2, "acknowledge_types": [1]}])
        assert bad["responses"][0]["partitions"][0]["acknowledge_error_code"] == E.INVALID_RECORD_STATE
        malformed = fetch(2, [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1, 1, 1]}])
        assert malformed["responses"][0]["partitions"][0]["acknowledge_error_code"] == E.INVALID_REQUEST
        ok = raw.request(79, 2, {"group_id": group, "member_id": member, "share_session_epoch": 3, "is_renew_ack": False,
                                 "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0,
                                             "acknowledgement_batches": [{"first_offset": 0, "last_offset": 1,
                                                                          "acknowledge_types": [1]}]}]}]})
        assert ok["error_code"] == E.NONE and ok["responses"][0]["partitions"][0]["error_code"] == E.NONE
        described = raw.request(90, 1, {"groups": [{"group_id": group, "topics": None}]})
        [row] = described["groups"][0]["topics"][0]["partitions"]
        assert (row["start_offset"], row["lag"]) == (2, 0)
        # offsets of a group with members cannot be reset
        alter = raw.request(91, 0, {"group_id": group, "topics": [{"topic_name": topic, "partitions": [
            {"partition_index": 0, "start_offset": 0}]}]})
        assert alter["error_code"] == E.NON_EMPTY_GROUP
    finally:
        raw.sock.close()

    # kill -9: the accepted records are never acquired again, a new one is (the revive log and
    # the group's offset are in the commitlog, which outlives the process)
    node.kill()
    node.start()
    produce(bs, topic, ["c"])
    raw = RawKafka(bs)
    try:
        hb = raw.request(76, 1, {"group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
                                 "subscribed_topic_names": [topic]})
        assert hb["error_code"] == E.NONE
        got = fetch(0)
        assert got["responses"][0]["partitions"][0]["acquired_records"] == [
            {"first_offset": 2, "last_offset": 2, "delivery_count": 1}]
    finally:
        raw.sock.close()
