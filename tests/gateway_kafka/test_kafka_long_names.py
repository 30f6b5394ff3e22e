"""Group and transactional ids -- and any other string a group or transaction record stores --
longer than an internal topic's record can hold (an int16 length: 32,767 UTF-8 bytes; a flexible
request's compact string can carry more) get the API's error code where the request is decoded; nothing reaches the store's encoders, the node logs no
traceback, and the same client's next request is served."""

from __future__ import annotations

import pytest

from gateway_kafka import error_codes as E
from tests.gateway_kafka.kafka_helpers import RawKafka, create_topic, unique

HUGE = "g" * 40_000


def _no_crash(node, before: int) -> None:
    text = node.log_tail(10**8)
    assert text.count("Traceback") == before and "connection_failed" not in text


@pytest.fixture(scope="module")
def topic(node):
    name = unique("longnames")
    create_topic(node.kafka_bootstrap, name, partitions=1)
    return name


def test_offset_commit_with_a_group_id_too_long_for_a_record(node, topic):
    before = node.log_tail(10**8).count("Traceback")
    with RawKafka(node.kafka_bootstrap) as raw:
        resp = raw.request(8, 8, {"group_id": HUGE, "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None,
                                  "topics": [{"name": topic, "partitions": [
                                      {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                                       "committed_metadata": None}]}]})
        assert resp["topics"][0]["partitions"][0]["error_code"] == E.INVALID_GROUP_ID
        ok = raw.request(8, 8, {"group_id": "short", "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None,
                                "topics": [{"name": topic, "partitions": [
                                    {"partition_index": 0, "committed_offset": 3, "committed_leader_epoch": -1,
                                     "committed_metadata": None}]}]})
        assert ok["topics"][0]["partitions"][0]["error_code"] == E.NONE
    _no_crash(node, before)


@pytest.mark.parametrize("api_key, version, body, code", [
    (11, 7, {"group_id": HUGE, "session_timeout_ms": 10_000, "rebalance_timeout_ms": 1000, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b""}], "reason": None}, E.INVALID_GROUP_ID),
    (22, 3, {"transactional_id": "t" * 40_000, "transaction_timeout_ms": 60_000, "producer_id": -1,
             "producer_epoch": -1}, E.INVALID_REQUEST),
    (68, 0, {"group_id": HUGE, "member_id": "", "member_epoch": 0, "instance_id": None, "rack_id": None,
             "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["x"], "server_assignor": None,
             "topic_partitions": []}, E.INVALID_GROUP_ID),
    # any other string a group record stores: INVALID_REQUEST (a SyncGroup used to fail encoding it)
    (11, 7, {"group_id": "fine", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 1000, "member_id": "",
             "group_instance_id": HUGE, "protocol_type": "consumer",
             "protocols": [{"name": "range", "metadata": b""}], "reason": None}, E.INVALID_REQUEST),
    (11, 7, {"group_id": "fine2", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 1000, "member_id": "",
             "group_instance_id": None, "protocol_type": "consumer",
             "protocols": [{"name": HUGE, "metadata": b""}], "reason": None}, E.INVALID_REQUEST),
    (68, 0, {"group_id": "fine3", "member_id": "", "member_epoch": 0, "instance_id": HUGE, "rack_id": None,
             "rebalance_timeout_ms": 1000, "subscribed_topic_names": ["x"], "server_assignor": None,
             "topic_partitions": []}, E.INVALID_REQUEST),
], ids=["JoinGroup", "InitProducerId", "ConsumerGroupHeartbeat", "JoinGroup-instance-id", "JoinGroup-protocol",
        "ConsumerGroupHeartbeat-instance-id"])
def test_group_and_transactional_ids_too_long_for_a_record(node, api_key, version, body, code):
    before = node.log_tail(10**8).count("Traceback")
    with RawKafka(node.kafka_bootstrap) as raw:
        resp = raw.request(api_key, version, body)
        assert resp["error_code"] == code, resp
        assert raw.request(18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
    _no_crash(node, before)
