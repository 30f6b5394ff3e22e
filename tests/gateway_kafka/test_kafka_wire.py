"""The gateway at the wire level: framing, bad input, ordering, protocol errors, idempotence.

A raw connection (tests.gateway_kafka.kafka_helpers.RawKafka, speaking through the project's
codec) sends exactly the bytes under test. Every bad-input case also checks that a second,
well-behaved connection is still served.
"""

from __future__ import annotations

import random
import struct
import time

import pytest

from engine.record_batch import Record, build_batch
from gateway_kafka import error_codes as E
from tests.gateway_kafka.kafka_helpers import RawKafka, create_topic, produce, unique

pytestmark = pytest.mark.timeout(120)

API_VERSIONS, METADATA, PRODUCE, FETCH, LIST_OFFSETS, INIT_PID = 18, 3, 0, 1, 2, 22


def still_served(bootstrap: str) -> None:
    with RawKafka(bootstrap) as ok:
        resp = ok.request(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        assert resp["error_code"] == 0 and resp["api_keys"]


def batch(values: list[bytes], **kw) -> bytes:
    now = int(time.time() * 1000)
    return build_batch([Record(i, 0, None, v, []) for i, v in enumerate(values)], base_timestamp=now, **kw)


def produce_req(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def produce_result(resp: dict) -> dict:
    return resp["responses"][0]["partition_responses"][0]


def fetch_req(topic: str, offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                        "fetch_offset": offset, "log_start_offset": -1,
                                                        "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}


# -- framing and bad input ---------------------------------------------------------------------

def test_oversized_frame_is_refused_before_buffering(node):
    with RawKafka(node.kafka_bootstrap) as bad:
        bad.send_raw(struct.pack(">i", 200 * 1024 * 1024) + b"\x00" * 16)
        assert bad.closed_by_server()
    still_served(node.kafka_bootstrap)


@pytest.mark.parametrize("size", [0, -5])
def test_non_positive_frame_size_closes_connection(node, size):
    with RawKafka(node.kafka_bootstrap) as bad:
        bad.send_raw(struct.pack(">i", size))
        assert bad.closed_by_server()
    still_served(node.kafka_bootstrap)


def test_truncated_frame_then_disconnect_leaves_server_healthy(node):
    bad = RawKafka(node.kafka_bootstrap)
    bad.send_raw(struct.pack(">i", 100) + b"\x00\x12\x00\x03")
    bad.close()
    still_served(node.kafka_bootstrap)


def test_unknown_api_key_closes_only_that_connection(node):
    with RawKafka(node.kafka_bootstrap) as other, RawKafka(node.kafka_bootstrap) as bad:
        bad.send_raw(struct.pack(">ihhi", 10, 999, 0, 1) + struct.pack(">h", -1))
        assert bad.closed_by_server()
        assert other.request(API_VERSIONS, 0, {})["error_code"] == 0


def test_random_bytes_close_connection_and_server_keeps_serving(node):
    rng = random.Random(1234)
    for _ in range(20):
        with RawKafka(node.kafka_bootstrap) as bad:
            body = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 200)))
            bad.send_raw(struct.pack(">i", len(body)) + body)
            bad.sock.settimeout(5)
            try:  # either an answer (bytes happened to decode) or a close; never a hang
                bad.read_frame()
            except OSError:
                pass
    still_served(node.kafka_bootstrap)


def test_too_new_api_versions_gets_v0_answer_with_supported_range(node):
    with RawKafka(node.kafka_bootstrap) as raw:
        raw.send_raw(struct.pack(">ihhi", 10, API_VERSIONS, 99, 42) + struct.pack(">h", -1))
        frame = raw.read_frame()
        from gateway_kafka.protocol import decode_response

        corr, body = decode_response(API_VERSIONS, 0, frame)
        assert corr == 42
        assert body["error_code"] == E.UNSUPPORTED_VERSION
        versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert versions[API_VERSIONS] == (0, 4)
        assert versions[PRODUCE][0] == 3


def test_pipelined_requests_are_answered_in_order_and_acks0_gets_no_answer(node):
    topic = unique("pipe")
    create_topic(node.kafka_bootstrap, topic)
    from gateway_kafka.protocol import decode_response, encode_request

    with RawKafka(node.kafka_bootstrap) as raw:
        frames = [
            encode_request(FETCH, 11, 1, fetch_req(topic, 0, max_wait_ms=300, min_bytes=1000), "p"),  # long poll
            encode_request(PRODUCE, 8, 2, produce_req(topic, batch([b"fire-and-forget"]), acks=0), "p"),
            encode_request(API_VERSIONS, 3, 3, {"client_software_name": "p", "client_software_version": "1"}, "p"),
            encode_request(LIST_OFFSETS, 5, 4, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1,
                                                "timestamp": -1}]}]}, "p"),
        ]
        raw.send_raw(b"".join(frames))
        answers = [raw.read_frame() for _ in range(3)]
        corrs = [struct.unpack_from(">i", a)[0] for a in answers]
        assert corrs == [1, 3, 4]  # in request order; the acks=0 produce got no response
        _, offsets = decode_response(LIST_OFFSETS, 5, answers[2])
        assert offsets["topics"][0]["partitions"][0]["offset"] == 1  # ... but it was stored


# -- protocol errors ---------------------------------------------------------------------------

def test_corrupt_batch_is_rejected_and_connection_stays_usable(node):
    topic = unique("crc")
    create_topic(node.kafka_bootstrap, topic)
    good = batch([b"a", b"b"])
    broken = bytearray(good)
    broken[-1] ^= 0xFF  # flips a record byte: the CRC no longer matches
    with RawKafka(node.kafka_bootstrap) as raw:
        res = produce_result(raw.request(PRODUCE, 9, produce_req(topic, bytes(broken))))
        assert res["error_code"] == E.CORRUPT_MESSAGE
        assert "CRC" in (res["error_message"] or "")
        truncated = produce_result(raw.request(PRODUCE, 9, produce_req(topic, good[:-3])))
        assert truncated["error_code"] == E.CORRUPT_MESSAGE
        ok = produce_result(raw.request(PRODUCE, 9, produce_req(topic, good)))
        assert ok["error_code"] == 0 and ok["base_offset"] == 0


def test_unknown_topic_partition_and_offset_out_of_range(node):
    topic = unique("errs")
    create_topic(node.kafka_bootstrap, topic)
    with RawKafka(node.kafka_bootstrap) as raw:
        res = produce_result(raw.request(PRODUCE, 9, produce_req(unique("missing"), batch([b"x"]))))
        assert res["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
        res = produce_result(raw.request(PRODUCE, 9, produce_req(topic, batch([b"x"]), partition=7)))
        assert res["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION
        fetched = raw.request(FETCH, 11, fetch_req(topic, 5))
        part = fetched["responses"][0]["partitions"][0]
        assert part["error_code"] == E.OFFSET_OUT_OF_RANGE and part["high_watermark"] == 0
        meta = raw.request(METADATA, 9, {"topics": [{"name": "bad name!"}], "allow_auto_topic_creation": True,
                                         "include_topic_authorized_operations": False})
        assert meta["topics"][0]["error_code"] == E.INVALID_TOPIC_EXCEPTION


def test_fetch_long_poll_wakes_on_arrival(node):
    topic = unique("poll")
    create_topic(node.kafka_bootstrap, topic)
    # The fetch may wait 10 minutes; the socket gives up after 30 s. Only a wake-up by the
    # arriving record can answer it in between.
    with RawKafka(node.kafka_bootstrap, timeout=30) as raw:
        from gateway_kafka.protocol import decode_response, encode_request

        raw.send_raw(encode_request(FETCH, 11, 7, fetch_req(topic, 0, max_wait_ms=600_000), "poll"))
        produce("confluent-kafka", node.kafka_bootstrap, topic, [(None, b"wake up", [])])
        frame = raw.read_frame()
        _, resp = decode_response(FETCH, 11, frame)
        part = resp["responses"][0]["partitions"][0]
        assert part["error_code"] == 0 and b"wake up" in bytes(part["records"])


# -- idempotent producer -----------------------------------------------------------------------

def init_pid(raw: RawKafka) -> tuple[int, int]:
    resp = raw.request(INIT_PID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                     "producer_id": -1, "producer_epoch": -1})
    assert resp["error_code"] == 0
    return resp["producer_id"], resp["producer_epoch"]


def hw(raw: RawKafka, topic: str) -> int:
    resp = raw.request(LIST_OFFSETS, 5, {"replica_id": -1, "isolation_level": 0, "topics": [
        {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    return resp["topics"][0]["partitions"][0]["offset"]


def test_idempotent_sequences_duplicates_and_gaps_across_restart_and_crash(make_node):
    n = make_node({"producer_state_snapshot_interval": 3_600_000})  # crash case must rebuild from the log
    topic = unique("idem")
    create_topic(n.kafka_bootstrap, topic)
    with RawKafka(n.kafka_bootstrap) as raw:
        pid, epoch = init_pid(raw)
        other_pid, _ = init_pid(raw)
        assert other_pid != pid
        first = batch([b"a", b"b", b"c"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, first)))["base_offset"] == 0
        retry = produce_result(raw.request(PRODUCE, 9, produce_req(topic, first)))
        assert retry["error_code"] == 0 and retry["base_offset"] == 0  # answered with the original offset
        assert hw(raw, topic) == 3  # ... and not stored twice
        gap = batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, gap)))["error_code"] == \
            E.OUT_OF_ORDER_SEQUENCE_NUMBER
        second = batch([b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=3)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, second)))["base_offset"] == 3
        overlap = batch([b"c", b"d"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, overlap)))["error_code"] == \
            E.DUPLICATE_SEQUENCE_NUMBER
    n.restart()  # graceful: state comes from the snapshot written at stop
    with RawKafka(n.kafka_bootstrap) as raw:
        retry = produce_result(raw.request(PRODUCE, 9, produce_req(topic, second)))
        assert retry["error_code"] == 0 and retry["base_offset"] == 3
        third = batch([b"e", b"f"], producer_id=pid, producer_epoch=epoch, base_sequence=4)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, third)))["base_offset"] == 4
        new_pid, _ = init_pid(raw)
        assert new_pid not in (pid, other_pid)  # ids are never reused after a restart
    n.kill()  # crash: the snapshot does not have `third`; it is rebuilt from the log
    n.start()
    with RawKafka(n.kafka_bootstrap) as raw:
        retry = produce_result(raw.request(PRODUCE, 9, produce_req(topic, third)))
        assert retry["error_code"] == 0 and retry["base_offset"] == 4
        assert hw(raw, topic) == 6
        # KIP-360 epoch bump: the new epoch starts at sequence 0 and fences the old epoch
        bumped = raw.request(INIT_PID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                           "producer_id": pid, "producer_epoch": epoch})
        assert (bumped["error_code"], bumped["producer_id"], bumped["producer_epoch"]) == (0, pid, epoch + 1)
        late = batch([b"g"], producer_id=pid, producer_epoch=epoch + 1, base_sequence=1)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, late)))["error_code"] == \
            E.OUT_OF_ORDER_SEQUENCE_NUMBER
        fresh = batch([b"g"], producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, fresh)))["base_offset"] == 6
        stale = batch([b"h"], producer_id=pid, producer_epoch=epoch, base_sequence=6)
        assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, stale)))["error_code"] == \
            E.INVALID_PRODUCER_EPOCH


def test_idempotence_rebuilt_after_a_crash_covers_delayed_records(make_node):
    """An idempotent batch whose last record is delayed (header rmq.delay.level): after a
    kill -9 the producer state is rebuilt from the log, where that record's offset holds a
    placeholder carrying its sequence, so the producer's next batch is in order."""
    n = make_node({"producer_state_snapshot_interval": 3_600_000, "messageDelayLevel": "1s 1s 1s"})
    topic = unique("idem-delay")
    create_topic(n.kafka_bootstrap, topic)
    now = int(time.time() * 1000)
    with RawKafka(n.kafka_bootstrap) as raw:
        pid, epoch = init_pid(raw)
        mixed = build_batch([Record(0, 0, None, b"now", []), Record(1, 0, None, b"later", [("rmq.delay.level", b"1")])],
                            base_timestamp=now, producer_id=pid, producer_epoch=epoch, base_sequence=0)
        res = produce_result(raw.request(PRODUCE, 9, produce_req(topic, mixed)))
        assert (res["error_code"], res["base_offset"]) == (0, 0)
    n.kill()  # no snapshot since the start saw that batch: state comes from the log
    n.start()
    with RawKafka(n.kafka_bootstrap) as raw:
        following = batch([b"next"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
        res = produce_result(raw.request(PRODUCE, 9, produce_req(topic, following)))
        assert res["error_code"] == 0 and res["base_offset"] >= 2


# -- limits ------------------------------------------------------------------------------------

def test_records_near_the_size_limit(make_node):
    n = make_node({"message_max_bytes": 200_000})
    topic = unique("big")
    create_topic(n.kafka_bootstrap, topic)
    near = [(b"k", b"x" * 190_000, [])]
    assert produce("confluent-kafka", n.kafka_bootstrap, topic, near) == [0]
    assert produce("kafka-python", n.kafka_bootstrap, topic, near) == [1]
    with pytest.raises(Exception, match="MSG_SIZE_TOO_LARGE|MessageSizeTooLarge|too large"):
        produce("confluent-kafka", n.kafka_bootstrap, topic, [(b"k", b"y" * 210_000, [])])
    from tests.gateway_kafka.kafka_helpers import consume

    got = consume("aiokafka", n.kafka_bootstrap, topic, 2)
    assert [len(g[3]) for g in got] == [190_000, 190_000]


# -- fetch limits and list offsets -------------------------------------------------------------

def test_fetch_limits_follow_the_first_batch_rule(node):
    topic = unique("limits")
    create_topic(node.kafka_bootstrap, topic, partitions=2)
    big = b"z" * 30_000
    with RawKafka(node.kafka_bootstrap) as raw:
        for part in (0, 1):
            for _ in range(3):  # three separate ~30 KB batches per partition
                assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, batch([big]), partition=part)))[
                    "error_code"] == 0

        def fetch(max_bytes: int, partition_max: int) -> list[int]:
            req = fetch_req(topic, 0)
            req["max_bytes"] = max_bytes
            req["topics"][0]["partitions"] = [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": 0, "log_start_offset": -1,
                 "partition_max_bytes": partition_max} for p in (0, 1)]
            resp = raw.request(FETCH, 11, req)
            return [len(bytes(p["records"] or b"")) for p in resp["responses"][0]["partitions"]]

        one = len(batch([big]))
        # limits smaller than one batch: the first partition still gets its first batch whole,
        # the second gets nothing (the response budget is spent)
        assert fetch(1_000, 1_000) == [one, 0]
        # a per-partition limit of two batches, generous total: two batches from each
        assert fetch(10_000_000, 2 * one + 10) == [2 * one, 2 * one]
        # total budget of three batches: two from the first partition, one from the second
        assert fetch(3 * one + 10, 2 * one + 10) == [2 * one, one]


def test_list_offsets_earliest_latest_timestamps_and_max(node):
    topic = unique("lo")
    create_topic(node.kafka_bootstrap, topic)
    base = int(time.time() * 1000) - 60_000
    stamps = [base + 5_000, base + 1_000, base + 9_000, base + 3_000]  # not monotonic
    with RawKafka(node.kafka_bootstrap) as raw:
        for ts in stamps:
            b = build_batch([Record(0, 0, None, b"v", [])], base_timestamp=ts)
            assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, b)))["error_code"] == 0

        def lookup(ts: int) -> tuple[int, int]:
            resp = raw.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
                {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
            p = resp["topics"][0]["partitions"][0]
            assert p["error_code"] == 0
            return p["offset"], p["timestamp"]

        assert lookup(-2)[0] == 0 and lookup(-1)[0] == 4
        assert lookup(-3) == (2, base + 9_000)  # the record with the largest timestamp
        assert lookup(base + 4_000) == (0, base + 5_000)  # first offset whose timestamp is >= t
        assert lookup(base + 6_000) == (2, base + 9_000)
        assert lookup(base + 10_000) == (-1, -1)
        unknown = raw.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 9, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert unknown["topics"][0]["partitions"][0]["error_code"] == E.UNKNOWN_TOPIC_OR_PARTITION


def test_graceful_stop_with_parked_requests_and_busy_clients(make_node):
    """A stop while a fetch long-polls and a JoinGroup is parked ends cleanly (exit code 0),
    and everything acknowledged before it is there after the restart."""
    n = make_node({"group_initial_rebalance_delay_ms": 60_000})  # keeps the JoinGroup parked
    topic = unique("stop")
    create_topic(n.kafka_bootstrap, topic)
    offsets = produce("confluent-kafka", n.kafka_bootstrap, topic, [(None, b"kept-%d" % i, []) for i in range(20)])
    assert offsets == list(range(20))
    from gateway_kafka.protocol import encode_request

    poller, joiner = RawKafka(n.kafka_bootstrap), RawKafka(n.kafka_bootstrap)
    try:
        poller.send_raw(encode_request(FETCH, 11, 1, fetch_req(topic, 20, max_wait_ms=30_000), "t"))
        first = joiner.request(11, 5, {"group_id": "parked", "session_timeout_ms": 10_000,
                                       "rebalance_timeout_ms": 60_000, "member_id": "", "group_instance_id": None,
                                       "protocol_type": "consumer", "protocols": [{"name": "range", "metadata": b""}]})
        assert first["error_code"] == E.MEMBER_ID_REQUIRED
        joiner.send_raw(encode_request(11, 5, 2, {
            "group_id": "parked", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 60_000,
            "member_id": first["member_id"], "group_instance_id": None, "protocol_type": "consumer",
            "protocols": [{"name": "range", "metadata": b""}]}, "t"))
        assert n.stop(timeout=30) == 0
    finally:
        poller.close()
        joiner.close()
    n.settings = {}  # normal rebalance delay again, so the reading group below forms at once
    n.start()
    from tests.gateway_kafka.kafka_helpers import consume

    got = consume("confluent-kafka", n.kafka_bootstrap, topic, 20)
    assert [g[3] for g in got] == [b"kept-%d" % i for i in range(20)]


def test_client_that_never_reads_does_not_stall_others(node):
    """A connection that pipelines big fetches and never reads its answers only blocks
    itself (its socket buffers fill); other connections keep being served."""
    topic = unique("slow")
    create_topic(node.kafka_bootstrap, topic)
    from gateway_kafka.protocol import encode_request

    with RawKafka(node.kafka_bootstrap) as raw:
        for _ in range(20):  # ~2 MB of records
            assert produce_result(raw.request(PRODUCE, 9, produce_req(topic, batch([b"q" * 100_000]))))[
                "error_code"] == 0
    hog = RawKafka(node.kafka_bootstrap)
    try:
        frame = encode_request(FETCH, 11, 1, fetch_req(topic, 0), "hog")
        hog.sock.settimeout(2)
        sent = 0
        try:
            for _ in range(200):  # up to ~400 MB of answers requested, none read
                hog.send_raw(frame)
                sent += 1
        except OSError:
            pass  # our own send buffer filled up: the server stopped reading us, as it should
        assert sent > 0
        for _ in range(3):
            still_served(node.kafka_bootstrap)
            with RawKafka(node.kafka_bootstrap) as other:
                resp = other.request(FETCH, 11, fetch_req(topic, 0))
                assert resp["responses"][0]["partitions"][0]["high_watermark"] == 20
    finally:
        hog.close()
    still_served(node.kafka_bootstrap)


def test_acks0_error_closes_the_connection(node):
    with RawKafka(node.kafka_bootstrap) as raw:
        raw.request(PRODUCE, 9, produce_req(unique("nowhere"), batch([b"lost"]), acks=0), expect_response=False)
        assert raw.closed_by_server()
    still_served(node.kafka_bootstrap)


def test_idle_connections_are_closed(make_node):
    n = make_node({"connections_max_idle_ms": 300})
    with RawKafka(n.kafka_bootstrap) as idle:
        assert idle.request(API_VERSIONS, 0, {})["error_code"] == 0
        assert idle.closed_by_server(timeout=20)
    with RawKafka(n.kafka_bootstrap) as busy:  # a connection that keeps talking stays open
        for _ in range(5):
            assert busy.request(API_VERSIONS, 0, {})["error_code"] == 0


def test_produce_v13_names_topics_by_id(node):
    """Produce v13 (KIP-516): the topic is named by its id (as Metadata v10+ reports it); the
    answer carries the id; an id no topic has is UNKNOWN_TOPIC_ID, and with acks=0 the
    connection is closed so the producer refreshes its metadata."""
    import uuid

    bs = node.kafka_bootstrap
    topic = unique("tid")
    create_topic(bs, topic)
    with RawKafka(bs) as raw:
        meta = raw.request(METADATA, 12, {"topics": [{"topic_id": uuid.UUID(int=0), "name": topic}],
                                          "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        tid = meta["topics"][0]["topic_id"]
        assert tid != uuid.UUID(int=0)

        def by_id(topic_id, records, acks=1):
            return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
                    "topic_data": [{"topic_id": topic_id, "partition_data": [{"index": 0, "records": records}]}]}

        first = raw.request(PRODUCE, 13, by_id(tid, batch([b"first-value-a", b"b"])))["responses"][0]
        assert first["topic_id"] == tid
        assert first["partition_responses"][0]["error_code"] == E.NONE
        assert first["partition_responses"][0]["base_offset"] == 0
        second = produce_result(raw.request(PRODUCE, 13, by_id(tid, batch([b"second-value-c"]))))
        assert (second["error_code"], second["base_offset"]) == (E.NONE, 2)
        stranger = uuid.uuid4()
        unknown = raw.request(PRODUCE, 13, by_id(stranger, batch([b"refused-value-x"])))["responses"][0]
        assert unknown["topic_id"] == stranger
        assert unknown["partition_responses"][0]["error_code"] == E.UNKNOWN_TOPIC_ID
        assert str(stranger) in unknown["partition_responses"][0]["error_message"]
        fetched = raw.request(FETCH, 12, fetch_req(topic, 0))
        records = fetched["responses"][0]["partitions"][0]["records"]
        # values long enough that a CRC or timestamp byte cannot look like one
        data = bytes(records)
        assert b"first-value-a" in data and b"second-value-c" in data and b"refused-value-x" not in data
    with RawKafka(bs) as raw:
        raw.request(PRODUCE, 13, by_id(uuid.uuid4(), batch([b"y"]), acks=0), expect_response=False)
        assert raw.closed_by_server()
    still_served(bs)
