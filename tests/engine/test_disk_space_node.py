"""A node whose data directory fills up, on a small file system the test mounts (tmpfs).

Kafka (confluent-kafka) and RocketMQ (the SDK) producers write until the disk is full: the
node never dies, every put past the limit is refused with the documented error (Kafka
KAFKA_STORAGE_ERROR, RocketMQ SERVICE_NOT_AVAILABLE, both saying the disk is full), consumers
keep reading meanwhile, producing resumes by itself when space returns, and every
acknowledged message reads back. With forcible cleaning on, the oldest segments go instead and
producing never stops for long.
"""

from __future__ import annotations

import os
import re
import time
import urllib.request
import uuid

import pytest

from gateway_native.client import LitePullConsumer, Message, MQBrokerError, Producer
from gateway_native.remoting.codes import ResponseCode as R
from engine.record_batch import Record, build_batch
from tests.gateway_kafka.kafka_helpers import RawKafka, consume, create_topic
from tests.gateway_native.helpers import read_native
from tests.support import mounts
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(300)

KAFKA_STORAGE_ERROR = 56
BODY = 32 * 1024


def metric(node: RunningNode, name: str) -> float:
    text = urllib.request.urlopen(node.admin_url + "/metrics", timeout=10).read().decode()
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} not in /metrics"
    return float(m.group(1))


class KafkaSender:
    """One record per call, answered before the next (retries off: the broker's answer is seen)."""

    def __init__(self, bootstrap: str, topic: str):
        from confluent_kafka import Producer as KProducer

        self.topic = topic
        self.p = KProducer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                            "enable.idempotence": False, "linger.ms": 0, "message.timeout.ms": 20000})

    def send(self, value: bytes):
        out = {}
        self.p.produce(self.topic, value, partition=0,
                       on_delivery=lambda err, msg: out.update(err=err, offset=msg.offset()))
        self.p.flush(30)
        assert out, "no delivery report"
        return out["err"], out["offset"]


def send_native(producer: Producer, topic: str, body: bytes):
    try:
        r = producer.send(Message(topic, body), )
        return None, r
    except MQBrokerError as exc:
        return exc, None


def test_full_disk_refuses_puts_then_resumes_and_loses_nothing(tmp_path):
    with mounts.tmpfs(tmp_path / "disk", 96) as disk:
        filler = mounts.fill(disk, leave_bytes=64 << 20)  # space the "operator" frees later
        node = RunningNode(disk / "data", settings={"cleanFileForciblyEnable": "false",
                                                   "mappedFileSizeCommitLog": 16 << 20})
        with node:
            ktopic, ntopic = f"full-k-{uuid.uuid4().hex[:6]}", f"FullN_{uuid.uuid4().hex[:6]}"
            create_topic(node.kafka_bootstrap, ktopic, 1)
            kafka = KafkaSender(node.kafka_bootstrap, ktopic)
            acked_k: dict[int, bytes] = {}
            acked_n: dict[tuple[int, int], bytes] = {}
            refused_k: list = []
            refused_n: list = []
            with Producer("full-native", node.namesrv_addr, retry_times_when_send_failed=0,
                          send_latency_fault_enable=False, compress_msg_body_over_howmuch=1 << 30) as producer:
                # fill: both protocols, in turn, until each was refused 5 times in a row
                for _ in range(4000):
                    if len(refused_k) >= 5 and len(refused_n) >= 5:
                        break
                    body = os.urandom(BODY)
                    err, offset = kafka.send(body)
                    if err is None:
                        assert not refused_k, "a Kafka put succeeded while the disk was full"
                        acked_k[offset] = body
                    else:
                        refused_k.append(err)
                    body = os.urandom(BODY)
                    exc, result = send_native(producer, ntopic, body)
                    if exc is None:
                        assert not refused_n, "a native put succeeded while the disk was full"
                        acked_n[(result.message_queue.queue_id, result.queue_offset)] = body
                    else:
                        refused_n.append(exc)
                assert len(refused_k) >= 5 and len(refused_n) >= 5, "the disk never filled up"
                assert all(e.code() == KAFKA_STORAGE_ERROR for e in refused_k), refused_k
                # librdkafka does not show the broker's error_message; the wire answer has it
                with RawKafka(node.kafka_bootstrap) as raw:
                    now = int(time.time() * 1000)
                    records = build_batch([Record(0, 0, None, b"x" * BODY, [])], base_timestamp=now)
                    part = raw.request(0, 9, {"transactional_id": None, "acks": -1, "timeout_ms": 5000, "topic_data": [
                        {"name": ktopic, "partition_data": [{"index": 0, "records": records}]}]}
                                       )["responses"][0]["partition_responses"][0]
                assert part["error_code"] == KAFKA_STORAGE_ERROR and "disk" in part["error_message"], part
                assert all(e.code == R.SERVICE_NOT_AVAILABLE and "disk" in e.remark for e in refused_n), refused_n[0]
                assert node.running()
                assert metric(node, "rockafka_disk_full") == 1
                assert metric(node, "rockafka_puts_refused_disk_full_total") >= 10
                # reads go on while the disk is full
                got = consume("confluent-kafka", node.kafka_bootstrap, ktopic, len(acked_k), timeout=60)
                assert {o: v for _p, o, _k, v, _h in got} == acked_k

                filler.unlink()  # space returns: producing resumes by itself
                deadline = time.monotonic() + 30
                while True:
                    err, offset = kafka.send(b"after")
                    if err is None:
                        acked_k[offset] = b"after"
                        break
                    assert err.code() == KAFKA_STORAGE_ERROR and time.monotonic() < deadline, err
                    time.sleep(0.2)
                exc, result = send_native(producer, ntopic, b"after")
                assert exc is None, exc
                acked_n[(result.message_queue.queue_id, result.queue_offset)] = b"after"
                assert metric(node, "rockafka_disk_full") == 0
            got = consume("confluent-kafka", node.kafka_bootstrap, ktopic, len(acked_k), timeout=60)
            assert {o: v for _p, o, _k, v, _h in got} == acked_k
            assert sorted(read_native(node, ntopic, acked_n.values())) == sorted(acked_n.values())
        assert "Traceback" not in node.log_tail(10**8)


def test_forcible_cleaning_removes_the_oldest_segments_and_producing_goes_on(tmp_path):
    with mounts.tmpfs(tmp_path / "disk", 64) as disk:
        node = RunningNode(disk / "data", settings={"mappedFileSizeCommitLog": 4 << 20})
        with node:
            ktopic, ntopic = f"clean-k-{uuid.uuid4().hex[:6]}", f"CleanN_{uuid.uuid4().hex[:6]}"
            create_topic(node.kafka_bootstrap, ktopic, 1)
            kafka = KafkaSender(node.kafka_bootstrap, ktopic)
            last_k = last_n = None
            refusals = 0
            with Producer("clean-native", node.namesrv_addr, retry_times_when_send_failed=0,
                          send_latency_fault_enable=False, compress_msg_body_over_howmuch=1 << 30) as producer:
                # three times the disk's size, through both protocols
                for i in range(3 * (64 << 20) // (2 * BODY)):
                    body = os.urandom(BODY)
                    err, offset = kafka.send(body)
                    if err is None:
                        last_k = (offset, body)
                    else:  # cleaning can fall behind a moment: refused cleanly, then resumed
                        assert err.code() == KAFKA_STORAGE_ERROR, err
                        refusals += 1
                    exc, result = send_native(producer, ntopic, body)
                    if exc is None:
                        last_n = (result.message_queue.queue_id, result.queue_offset, body)
                    else:
                        assert exc.code == R.SERVICE_NOT_AVAILABLE, exc
                        refusals += 1
                # a refusal is answered at once, so a short lag of the cleaner shows as a burst of
                # them: most sends still succeed, and producing resumes by itself
                sends = 2 * (3 * (64 << 20) // (2 * BODY))
                assert refusals <= sends // 10, f"producing stalled: {refusals} of {sends} sends refused"
                deadline = time.monotonic() + 30
                while True:
                    body = os.urandom(BODY)
                    err, offset = kafka.send(body)
                    exc, result = send_native(producer, ntopic, body) if err is None else (err, None)
                    if err is None and exc is None:
                        last_k, last_n = (offset, body), (result.message_queue.queue_id, result.queue_offset, body)
                        break
                    assert time.monotonic() < deadline, f"producing did not resume: {err or exc}"
                    time.sleep(0.1)
            assert node.running()
            assert metric(node, "rockafka_commitlog_segments_deleted_forcibly_total") > 0
            assert "commitlog_segment_deleted_forcibly" in node.log_tail(10**8)
            # the oldest messages are gone: the log start moved; the newest are readable
            from confluent_kafka import Consumer, TopicPartition

            c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": "clean-check"})
            try:
                low, high = c.get_watermark_offsets(TopicPartition(ktopic, 0), timeout=10)
            finally:
                c.close()
            assert low > 0 and high == last_k[0] + 1
            # cleaning may go on while the disk is still above the forcible ratio: the first record
            # readable is at or past the start seen above, and the last acknowledged one is there
            first = consume("confluent-kafka", node.kafka_bootstrap, ktopic, 1, timeout=60)
            assert first[0][1] >= low
            c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": "clean-last",
                          "enable.auto.commit": False})
            try:
                c.assign([TopicPartition(ktopic, 0, last_k[0])])
                deadline, msg = time.monotonic() + 30, None
                while msg is None and time.monotonic() < deadline:
                    msg = c.poll(1.0)
                    if msg is not None and msg.error():
                        raise AssertionError(msg.error())
            finally:
                c.close()
            assert msg is not None and msg.offset() == last_k[0] and msg.value() == last_k[1]
            with LitePullConsumer(f"clean_lp_{uuid.uuid4().hex[:6]}", node.namesrv_addr,
                                  consume_from_where="CONSUME_FROM_FIRST_OFFSET", auto_commit=False) as lp:
                queues = lp.fetch_message_queues(ntopic)
                mq = next(q for q in queues if q.queue_id == last_n[0])
                assert lp.min_offset(mq) > 0
                lp.assign([mq])
                lp.seek(mq, last_n[1])
                got_n = []
                deadline = time.monotonic() + 30
                while not got_n and time.monotonic() < deadline:
                    got_n = lp.poll(300)
                assert got_n and got_n[0].body == last_n[2]
        assert "Traceback" not in node.log_tail(10**8)


def test_a_full_disk_refusal_is_raised_at_once_not_waited_out(tmp_path):
    """On a topic whose queues are all on one group the SDK waits out a refusal that means the
    group is changing master (a slave, a lease that ran out) until ``send_msg_timeout``. A full
    disk is no such change: the broker's answer says so (``diskFull``) and the send is tried
    once, as ``retry_times_when_send_failed=0`` asks, and raises the broker's refusal (code 14,
    the disk is full) -- never a client-side "no response" that hides why nothing was stored."""
    node = RunningNode(tmp_path / "data", settings={"diskSpaceWarningLevelRatio": 0})
    topic = f"FullT_{uuid.uuid4().hex[:6]}"
    with node, Producer("full_once", node.namesrv_addr, retry_times_when_send_failed=0,
                        send_latency_fault_enable=False) as producer:
        with pytest.raises(MQBrokerError):  # the topic is auto-created; the put refused
            producer.send(Message(topic, b"first"))
        before = metric(node, "rockafka_puts_refused_disk_full_total")
        for i in range(20):
            with pytest.raises(MQBrokerError) as refused:
                producer.send(Message(topic, b"m%d" % i))
            assert refused.value.code == R.SERVICE_NOT_AVAILABLE and "disk" in refused.value.remark, refused.value
        assert metric(node, "rockafka_puts_refused_disk_full_total") - before == 20, "a refused send was tried again"
    assert "Traceback" not in node.log_tail(10**8)
