"""Kafka transactions with confluent-kafka's transactional producer (and kafka-python's and aiokafka's) against a real node:
read_committed consumers see committed records once and aborted ones never, read_uncommitted
consumers see both; consume-transform-produce commits its consumer offsets atomically with
the output; a re-initialised producer fences the old one; a transaction left open past
transaction.timeout.ms is aborted by the broker; committed state survives a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for

pytestmark = pytest.mark.timeout(180)


def txn_producer(bootstrap: str, tid: str, **extra) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def read(bootstrap: str, topic: str, isolation: str, expect: int, partitions: int = 1,
         group: str | None = None, stop_at_end: bool = True) -> list[bytes]:
    """Every record value of ``topic`` from the beginning, until ``expect`` arrived and every
    partition reached its end."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group or unique("g"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": isolation, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, 0) if group is None else TopicPartition(topic, p) for p in range(partitions)])
        got: list[bytes] = []
        eof: set[int] = set()

        def step():
            m = c.poll(0.2)
            if m is None:
                return False
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    return len(got) >= expect and len(eof) == partitions
                raise KafkaException(m.error())
            got.append(m.value())
            eof.discard(m.partition())
            return False
        wait_for(step, timeout=30, interval=0, what=f"{expect} records of {topic} ({isolation})")
        return got
    finally:
        c.close()


def test_committed_seen_once_aborted_never(node):
    bs = node.kafka_bootstrap
    topic = unique("txn")
    create_topic(bs, topic, 2)
    p = txn_producer(bs, unique("tid"))
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"c1-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=f"ab-{i}".encode(), partition=i % 2)
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, value=f"c2-{i}".encode(), partition=i % 2)
    p.commit_transaction(30)

    committed = read(bs, topic, "read_committed", 16, partitions=2)
    assert sorted(committed) == sorted([f"c1-{i}".encode() for i in range(10)] + [f"c2-{i}".encode() for i in range(6)])
    everything = read(bs, topic, "read_uncommitted", 26, partitions=2)
    assert sorted(everything) == sorted([f"c1-{i}".encode() for i in range(10)] + [f"ab-{i}".encode() for i in range(10)]
                                        + [f"c2-{i}".encode() for i in range(6)])


def test_open_transaction_holds_back_read_committed(node):
    bs = node.kafka_bootstrap
    topic = unique("lso")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, unique("tid"))
    p.begin_transaction()
    p.produce(topic, value=b"pending")
    p.flush(10)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"after-open")
    plain.flush(10)
    # read_uncommitted sees both; read_committed stops at the open transaction's first offset
    assert sorted(read(bs, topic, "read_uncommitted", 2)) == [b"after-open", b"pending"]
    def end_offsets(isolation: str) -> tuple[int, int]:
        c = Consumer({"bootstrap.servers": bs, "group.id": unique("g"), "isolation.level": isolation})
        try:
            return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)
        finally:
            c.close()
    # ListOffsets latest: the high watermark, or for read_committed the last stable offset
    assert end_offsets("read_uncommitted") == (0, 2)
    assert end_offsets("read_committed") == (0, 0)
    assert read(bs, topic, "read_committed", 0) == []
    p.commit_transaction(30)
    assert read(bs, topic, "read_committed", 2) == [b"pending", b"after-open"]
    assert end_offsets("read_committed") == (0, 3)  # past the COMMIT marker


def test_consume_transform_produce_commits_offsets_with_output(node):
    bs = node.kafka_bootstrap
    src, dst, group = unique("src"), unique("dst"), unique("ctp")
    create_topic(bs, src, 1)
    create_topic(bs, dst, 1)
    plain = Producer({"bootstrap.servers": bs})
    for i in range(10):
        plain.produce(src, value=f"in-{i}".encode())
    plain.flush(10)
    p = txn_producer(bs, unique("tid"))
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        c.subscribe([src])
        inputs = []
        wait_for(lambda: (m := c.poll(0.2)) is not None and not m.error() and inputs.append(m) is None and len(inputs) >= 5,
                 timeout=30, interval=0, what="5 input records")
        first, rest = inputs[:5], inputs[5:]
        # an aborted round: neither output nor offsets
        p.begin_transaction()
        for m in first:
            p.produce(dst, value=b"out-" + m.value())
        p.send_offsets_to_transaction([TopicPartition(src, 0, first[-1].offset() + 1)], c.consumer_group_metadata())
        p.abort_transaction(30)
        assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset < 0
        # the committed round
        p.begin_transaction()
        for m in first:
            p.produce(dst, value=b"out-" + m.value())
        p.send_offsets_to_transaction([TopicPartition(src, 0, first[-1].offset() + 1)], c.consumer_group_metadata())
        p.commit_transaction(30)
        assert c.committed([TopicPartition(src, 0)], timeout=10)[0].offset == first[-1].offset() + 1
    finally:
        c.close()
    assert read(bs, dst, "read_committed", 5) == [f"out-in-{i}".encode() for i in range(5)]
    assert len(rest) >= 0


def test_new_incarnation_fences_the_old_producer(node):
    bs = node.kafka_bootstrap
    topic, tid = unique("fence"), unique("tid")
    create_topic(bs, topic, 1)
    old = txn_producer(bs, tid)
    old.begin_transaction()
    old.produce(topic, value=b"from-old")
    old.flush(10)
    new = txn_producer(bs, tid)  # aborts the old incarnation's open transaction
    new.begin_transaction()
    new.produce(topic, value=b"from-new")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as err:
        old.commit_transaction(10)
    assert err.value.args[0].fatal() or "fenced" in str(err.value).lower()
    assert read(bs, topic, "read_committed", 1) == [b"from-new"]


def test_transaction_timeout_aborts(make_node):
    node = make_node({"transactionAbortTimedOutTransactionCleanupIntervalMs": 200})
    bs = node.kafka_bootstrap
    topic = unique("tmo")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, unique("tid"), **{"transaction.timeout.ms": 2000})
    p.begin_transaction()
    p.produce(topic, value=b"left-open")
    p.flush(10)
    wait_for(lambda: "txn_completed" in node.log_tail(500_000) and "timed_out" in node.log_tail(500_000),
             timeout=30, what="the broker's timeout abort")
    # the late producer's commit fails: the broker bumped its epoch when it aborted
    with pytest.raises(KafkaException):
        p.commit_transaction(10)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"later")
    plain.flush(10)
    assert read(bs, topic, "read_committed", 1) == [b"later"]


def test_transactions_survive_restart(make_node):
    node = make_node()
    bs = node.kafka_bootstrap
    topic, tid = unique("rst"), unique("tid")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, tid)
    p.begin_transaction()
    p.produce(topic, value=b"aborted-before")
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"committed-before")
    p.commit_transaction(30)
    node.restart()
    bs = node.kafka_bootstrap
    assert read(bs, topic, "read_committed", 1) == [b"committed-before"]
    p2 = txn_producer(bs, tid)
    p2.begin_transaction()
    p2.produce(topic, value=b"committed-after")
    p2.commit_transaction(30)
    assert read(bs, topic, "read_committed", 2) == [b"committed-before", b"committed-after"]


def test_native_consumers_see_committed_kafka_transactions_only(node):
    """The native expansion path: a RocketMQ consumer of the same queue gets committed records,
    never aborted ones or markers, and nothing of a transaction still open."""
    from gateway_native.client import LitePullConsumer, MQClientError

    bs = node.kafka_bootstrap
    topic = unique("nat")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, unique("tid"))
    p.begin_transaction()
    p.produce(topic, value=b"aborted")
    p.flush(10)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"committed")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"open-then-committed")
    p.flush(10)
    with LitePullConsumer(unique("nat"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        def routed():  # a topic created through Kafka is routed natively within about a second
            try:
                return lp.fetch_message_queues(topic)
            except MQClientError:
                return None
        lp.assign(wait_for(routed, timeout=30, what="the native route"))
        got: list = []
        wait_for(lambda: got.extend(lp.poll(200)) or got, timeout=30, what="the committed record")
        extra = lp.poll(300)  # the open transaction holds the queue back: nothing more yet
        assert [m.body for m in got + extra] == [b"committed"]
        p.commit_transaction(30)
        wait_for(lambda: got.extend(lp.poll(200)) or len(got) >= 2, timeout=30, what="the second commit")
    assert [m.body for m in got] == [b"committed", b"open-then-committed"]


def test_kafka_python_transactional_producer(node):
    from kafka import KafkaConsumer, KafkaProducer

    bs = node.kafka_bootstrap
    topic = unique("kp")
    create_topic(bs, topic, 1)
    p = KafkaProducer(bootstrap_servers=bs, transactional_id=unique("kptid"))
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"kp-aborted")
        p.flush()
        p.abort_transaction()
        p.begin_transaction()
        p.send(topic, b"kp-committed")
        p.commit_transaction()
    finally:
        p.close(timeout=10)
    c = KafkaConsumer(topic, bootstrap_servers=bs, isolation_level="read_committed", auto_offset_reset="earliest",
                      enable_auto_commit=False, consumer_timeout_ms=500)
    try:
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.value for m in c) or got, timeout=30, what="the committed record")
        got.extend(m.value for m in c)  # and nothing else behind it
    finally:
        c.close()
    assert got == [b"kp-committed"]
    assert sorted(read(bs, topic, "read_uncommitted", 2)) == [b"kp-aborted", b"kp-committed"]


def test_aiokafka_transactional_producer(node):
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bs = node.kafka_bootstrap
    topic = unique("aio")
    create_topic(bs, topic, 1)

    async def scenario() -> list[bytes]:
        p = AIOKafkaProducer(bootstrap_servers=bs, transactional_id=unique("aiotid"))
        await p.start()
        try:
            async with p.transaction():
                await p.send_and_wait(topic, b"aio-committed")
            await p.begin_transaction()
            await p.send_and_wait(topic, b"aio-aborted")
            await p.abort_transaction()
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, bootstrap_servers=bs, isolation_level="read_committed",
                             auto_offset_reset="earliest", enable_auto_commit=False)
        await c.start()
        try:
            got: list[bytes] = []
            deadline = asyncio.get_running_loop().time() + 30
            while not got and asyncio.get_running_loop().time() < deadline:
                batch = await c.getmany(timeout_ms=300)
                got += [m.value for msgs in batch.values() for m in msgs]
            batch = await c.getmany(timeout_ms=300)  # nothing after it
            got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await c.stop()

    assert asyncio.run(scenario()) == [b"aio-committed"]


def test_bad_transaction_requests_get_error_codes(node):
    """Wrong ids, epochs and states are answered with Kafka's error codes; the connection and
    other producers carry on."""
    from gateway_kafka import error_codes as E
    from tests.gateway_kafka.kafka_helpers import RawKafka

    bs = node.kafka_bootstrap
    topic, tid = unique("bad"), unique("tid")
    create_topic(bs, topic, 1)
    with RawKafka(bs) as raw:
        assert raw.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": 0})["error_code"] == \
            E.INVALID_TRANSACTION_TIMEOUT
        init = raw.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": 10_000})
        assert init["error_code"] == E.NONE
        pid, epoch = init["producer_id"], init["producer_epoch"]

        def add(t, p, producer_id=pid, producer_epoch=epoch, txn=tid):
            resp = raw.request(24, 1, {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": producer_id,
                                       "v3_and_below_producer_epoch": producer_epoch,
                                       "v3_and_below_topics": [{"name": t, "partitions": [p]}]})
            return resp["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"]

        def end(committed, producer_id=pid, producer_epoch=epoch, txn=tid):
            return raw.request(26, 1, {"transactional_id": txn, "producer_id": producer_id,
                                       "producer_epoch": producer_epoch, "committed": committed})["error_code"]

        assert add("no-such-topic-" + tid, 0) == E.UNKNOWN_TOPIC_OR_PARTITION
        assert add(topic, 0, txn="unknown-" + tid) == E.INVALID_PRODUCER_ID_MAPPING
        assert add(topic, 0, producer_id=pid + 12345) == E.INVALID_PRODUCER_ID_MAPPING
        assert end(True) == E.INVALID_TXN_STATE  # nothing open
        assert add(topic, 0) == E.NONE
        assert raw.request(25, 1, {"transactional_id": tid, "producer_id": pid, "producer_epoch": epoch,
                                   "group_id": ""})["error_code"] == E.INVALID_GROUP_ID
        again = raw.request(22, 1, {"transactional_id": tid, "transaction_timeout_ms": 10_000})
        assert again["producer_epoch"] == epoch + 1
        assert add(topic, 0) == E.PRODUCER_FENCED       # the old epoch is fenced
        assert end(True) == E.PRODUCER_FENCED
        assert end(False, producer_epoch=epoch + 1) == E.INVALID_TXN_STATE  # re-init aborted the open one
        assert raw.request(18, 0, {})["error_code"] == E.NONE  # the connection still works


def test_topic_deleted_during_a_transaction_does_not_hold_back_its_successor(node):
    from confluent_kafka.admin import AdminClient

    bs = node.kafka_bootstrap
    topic = unique("del")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, unique("tid"))
    p.begin_transaction()
    p.produce(topic, value=b"in-deleted-topic")
    p.flush(10)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(timeout=30)
    p.abort_transaction(30)
    create_topic(bs, topic, 1)
    plain = Producer({"bootstrap.servers": bs})
    plain.produce(topic, value=b"new-topic")
    plain.flush(10)
    assert read(bs, topic, "read_committed", 1) == [b"new-topic"]


def test_recreated_topic_forgets_aborted_transactions_of_its_predecessor(node):
    from confluent_kafka.admin import AdminClient

    bs = node.kafka_bootstrap
    topic, tid = unique("rec"), unique("tid")
    create_topic(bs, topic, 1)
    p = txn_producer(bs, tid)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"old-{i}".encode())
    p.flush(10)
    p.abort_transaction(30)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_topics([topic], operation_timeout=10)[topic].result(timeout=30)
    create_topic(bs, topic, 1)
    # the same transactional id (same producer id) writes at the same offsets again, and commits
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"new-{i}".encode())
    p.commit_transaction(30)
    assert read(bs, topic, "read_committed", 3) == [f"new-{i}".encode() for i in range(3)]


def test_describe_and_list_transactions(node):
    from gateway_kafka import error_codes as E
    from tests.gateway_kafka.kafka_helpers import RawKafka

    bs = node.kafka_bootstrap
    topic, tid = unique("desc"), unique("tid")
    create_topic(bs, topic, 2)
    p = txn_producer(bs, tid, **{"transaction.timeout.ms": 45_000})
    p.begin_transaction()
    p.produce(topic, value=b"x", partition=1)
    p.flush(10)
    with RawKafka(bs) as raw:
        (state,) = raw.request(65, 0, {"transactional_ids": [tid]})["transaction_states"]
        assert state["error_code"] == E.NONE and state["transaction_state"] == "Ongoing"
        assert state["transaction_timeout_ms"] == 45_000 and state["transaction_start_time_ms"] > 0
        assert state["topics"] == [{"topic": topic, "partitions": [1]}]
        listed = raw.request(66, 1, {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [],
                                     "duration_filter": -1})
        assert {"transactional_id": tid, "producer_id": state["producer_id"], "transaction_state": "Ongoing"} in \
            listed["transaction_states"]
        assert listed["unknown_state_filters"] == ["Bogus"]
        p.commit_transaction(30)
        (after,) = raw.request(65, 0, {"transactional_ids": [tid]})["transaction_states"]
        assert after["transaction_state"] == "CompleteCommit" and after["topics"] == []
        (missing,) = raw.request(65, 0, {"transactional_ids": ["no-such-" + tid]})["transaction_states"]
        assert missing["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND


def test_open_and_committed_transactions_survive_kill9(make_node):
    """Transaction state is in __transaction_state: after a kill -9 a committed transaction stays
    committed, an open one is still open with its partitions (its producer goes on and commits
    it), the staged offsets apply with the commit, and the epoch still fences older producers."""
    from confluent_kafka import Consumer as C

    node = make_node()
    bs = node.kafka_bootstrap
    topic, tid, group = unique("k9"), unique("tid"), unique("k9g")
    create_topic(bs, topic, 2)
    p = txn_producer(bs, tid, **{"metadata.recovery.strategy": "none"})
    p.begin_transaction()
    p.produce(topic, value=b"done", partition=0)
    p.commit_transaction(30)
    meta = C({"bootstrap.servers": bs, "group.id": group}).consumer_group_metadata()
    p.begin_transaction()
    p.produce(topic, value=b"open", partition=1)
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 1)], meta, 30)
    p.flush(10)
    node.kill()
    node.start()
    assert read(bs, topic, "read_committed", 1, partitions=2) == [b"done"]  # the open one holds partition 1
    p.commit_transaction(60)
    assert sorted(read(bs, topic, "read_committed", 2, partitions=2)) == [b"done", b"open"]
    c = C({"bootstrap.servers": bs, "group.id": group})
    try:
        assert c.committed([TopicPartition(topic, 0)], 20)[0].offset == 1
    finally:
        c.close()


def test_idle_transactional_ids_expire(make_node):
    from gateway_kafka import error_codes as E
    from tests.gateway_kafka.kafka_helpers import RawKafka

    node = make_node({"transactional_id_expiration_ms": 1000,
                      "transaction_abort_timed_out_transaction_cleanup_interval_ms": 100})
    tid = unique("tid")
    with RawKafka(node.kafka_bootstrap) as raw:
        init = raw.request(22, 4, {"transactional_id": tid, "transaction_timeout_ms": 60000,
                                   "producer_id": -1, "producer_epoch": -1})
        assert init["error_code"] == E.NONE

        def state():
            return raw.request(65, 0, {"transactional_ids": [tid]})["transaction_states"][0]["error_code"]
        wait_for(lambda: state() == E.TRANSACTIONAL_ID_NOT_FOUND, timeout=20, what="the idle id to expire")
    node.kill()  # the deletion is a record too
    node.start()
    with RawKafka(node.kafka_bootstrap) as raw:
        (after,) = raw.request(65, 0, {"transactional_ids": [tid]})["transaction_states"]
        assert after["error_code"] == E.TRANSACTIONAL_ID_NOT_FOUND
