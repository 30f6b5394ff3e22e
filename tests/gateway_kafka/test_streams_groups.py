"""StreamsGroupHeartbeat / StreamsGroupDescribe (KIP-1071) on the wire: Kafka's error codes for
bad heartbeats, the broker creating the topology's internal topics, a missing source topic
reported in the heartbeat status, and a task handed from one member to another only after the
first stopped reporting it. ListGroups / DescribeGroups / OffsetCommit treat the group as Kafka
does. (A real Kafka Streams application: tests/compat/test_java_kafka_streams_groups.py.)"""
from __future__ import annotations

import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from gateway_kafka import error_codes as E
from tests.gateway_kafka.kafka_helpers import RawKafka, unique


def _topology(source: str, changelog: str) -> dict:
    return {"epoch": 0, "subtopologies": [{
        "subtopology_id": "0", "source_topics": [source], "source_topic_regex": [],
        "state_changelog_topics": [{"name": changelog, "partitions": 0, "replication_factor": 0,
                                    "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}],
        "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}]}


def _hb(raw: RawKafka, group: str, member: str, epoch: int, topology: dict | None = None,
        active: list | None = None) -> dict:
    body = {"group_id": group, "member_id": member, "member_epoch": epoch, "endpoint_information_epoch": 0,
            "rebalance_timeout_ms": 30000 if epoch == 0 else -1, "topology": topology,
            "active_tasks": [] if epoch == 0 else active, "standby_tasks": [] if epoch == 0 else None,
            "warmup_tasks": [] if epoch == 0 else None, "process_id": str(uuid.uuid4()) if epoch == 0 else None}
    return raw.request(88, 0, body)


def _tasks(resp: dict) -> set[int] | None:
    if resp["active_tasks"] is None:
        return None
    return {p for t in resp["active_tasks"] for p in t["partitions"]}


def test_streams_heartbeat_errors_topics_and_handover(node):
    bs = node.kafka_bootstrap
    src, group = unique("sg-src"), unique("sg-app")
    changelog = f"{group}-store-changelog"
    raw = RawKafka(bs)
    try:
        assert _hb(raw, "", "m", 0, _topology(src, changelog))["error_code"] == E.INVALID_REQUEST
        assert _hb(raw, group, "m", 0, None)["error_code"] == E.INVALID_REQUEST
        assert _hb(raw, group, "nobody", 3)["error_code"] == E.UNKNOWN_MEMBER_ID

        # the source topic does not exist yet: the status says so and no task is assigned
        a = str(uuid.uuid4())
        r = _hb(raw, group, a, 0, _topology(src, changelog))
        assert r["error_code"] == E.NONE, r
        assert [s["status_code"] for s in r["status"] or ()] == [1], r["status"]  # MISSING_SOURCE_TOPICS
        assert not _tasks(r)

        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic(src, 2, 1)])[src].result(30)
        r = _hb(raw, group, a, r["member_epoch"], active=[])
        epoch_a = r["member_epoch"]
        assert r["error_code"] == E.NONE and _tasks(r) == {0, 1} and not r["status"], r
        # the changelog topic was created with one partition per task
        md = admin.list_topics(timeout=30).topics
        assert changelog in md and len(md[changelog].partitions) == 2
        assert _hb(raw, group, a, epoch_a + 7)["error_code"] == E.FENCED_MEMBER_EPOCH

        # b joins: a must give one task up before b gets it
        b = str(uuid.uuid4())
        rb = _hb(raw, group, b, 0, _topology(src, changelog))
        assert rb["error_code"] == E.NONE and not _tasks(rb), rb
        ra = _hb(raw, group, a, epoch_a, active=[{"subtopology_id": "0", "partitions": [0, 1]}])
        kept = _tasks(ra)
        assert ra["error_code"] == E.NONE and kept is not None and len(kept) == 1, ra
        moving = ({0, 1} - kept).pop()
        rb = _hb(raw, group, b, rb["member_epoch"], active=[])
        assert not _tasks(rb), "handed to b while a still owns it"
        ra = _hb(raw, group, a, ra["member_epoch"], active=[{"subtopology_id": "0", "partitions": sorted(kept)}])
        assert ra["error_code"] == E.NONE and ra["member_epoch"] > epoch_a, ra
        rb = _hb(raw, group, b, rb["member_epoch"], active=[])
        assert rb["error_code"] == E.NONE and _tasks(rb) == {moving}, rb

        # describe, list, classic describe, offset commit as Kafka answers them
        d = raw.request(89, 0, {"group_ids": [group, "no-such-group"], "include_authorized_operations": False})
        g, missing = d["groups"]
        assert g["error_code"] == E.NONE and g["topology"]["subtopologies"][0]["source_topics"] == [src]
        assert {m["member_id"] for m in g["members"]} == {a, b}
        assert missing["error_code"] == E.GROUP_ID_NOT_FOUND
        listed = raw.request(16, 5, {"states_filter": [], "types_filter": ["streams"]})
        assert [x["group_id"] for x in listed["groups"]] == [group]
        cg = raw.request(68, 1, {"group_id": group, "member_id": str(uuid.uuid4()), "member_epoch": 0,
                                 "instance_id": None, "rack_id": None, "rebalance_timeout_ms": 30000,
                                 "subscribed_topic_names": [src], "subscribed_topic_regex": None,
                                 "server_assignor": None, "topic_partitions": []})
        assert cg["error_code"] == E.GROUP_ID_NOT_FOUND, cg
        dg = raw.request(15, 5, {"groups": [group], "include_authorized_operations": False})
        assert dg["groups"][0]["error_code"] == E.GROUP_ID_NOT_FOUND
        commit = raw.request(8, 9, {"group_id": group, "generation_id_or_member_epoch": 1, "member_id": b,
                                    "group_instance_id": None, "topics": [
                                        {"name": src, "partitions": [{"partition_index": moving,
                                                                      "committed_offset": 0,
                                                                      "committed_metadata": ""}]}]})
        assert commit["topics"][0]["partitions"][0]["error_code"] == E.STALE_MEMBER_EPOCH

        # leaving: a's task becomes b's
        assert _hb(raw, group, a, -1)["member_epoch"] == -1
        rb = _hb(raw, group, b, rb["member_epoch"], active=[{"subtopology_id": "0", "partitions": [moving]}])
        assert _tasks(rb) == {0, 1}, rb
    finally:
        raw.sock.close()


def test_streams_protocol_off_is_not_advertised(make_node):
    n = make_node({"group_coordinator_rebalance_protocols": "classic,consumer"})
    raw = RawKafka(n.kafka_bootstrap)
    try:
        keys = {k["api_key"] for k in raw.request(18, 3, {"client_software_name": "t",
                                                          "client_software_version": "1"})["api_keys"]}
        assert 68 in keys and 88 not in keys and 89 not in keys
    finally:
        raw.sock.close()


def test_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced(node):
    bs = node.kafka_bootstrap
    src, group = unique("sg-rt"), unique("sg-rt-app")
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(src, 2, 1)])[src].result(30)
    raw = RawKafka(bs)
    try:
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        topo = _topology(src, f"{group}-store-changelog")
        body = {"group_id": group, "member_id": a, "member_epoch": 0, "endpoint_information_epoch": 0,
                "rebalance_timeout_ms": 1000, "topology": topo, "active_tasks": [], "standby_tasks": [],
                "warmup_tasks": [], "process_id": "pa"}
        ra = raw.request(88, 0, body)
        assert _tasks(ra) == {0, 1}, ra
        rb = _hb(raw, group, b, 0, topo)
        ra = _hb(raw, group, a, ra["member_epoch"], active=[{"subtopology_id": "0", "partitions": [0, 1]}])
        assert len(_tasks(ra) or ()) == 1, ra  # told to give one task up; it never confirms
        deadline = time.monotonic() + 30
        got: set[int] | None = set()
        while time.monotonic() < deadline:
            owned = [{"subtopology_id": "0", "partitions": sorted(got)}] if got else []
            rb = _hb(raw, group, b, rb["member_epoch"], active=owned)
            got = _tasks(rb) if _tasks(rb) is not None else got
            if got == {0, 1}:
                break
            time.sleep(0.2)
        assert got == {0, 1}, rb
        assert _hb(raw, group, a, ra["member_epoch"])["error_code"] == E.UNKNOWN_MEMBER_ID
    finally:
        raw.sock.close()
