"""A graceful stop (SIGTERM) of a master resigns (docs/design/failover.md, "Fencing"): the broker
gives up its lease, then tells the controller with a last heartbeat (``resign=true``), and the
controller elects at once -- its logged reason is the resignation, not a lease that ran out nor
a lost connection. With real processes: a 3-node controller quorum, a SYNC_MASTER group of two,
a native SDK sender on a chosen queue throughout and Kafka ``acks=all`` records before the stop;
every acknowledged message is on the new master afterwards, once."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from compat.chaos import failover as chaos
from tests.rockafka.test_failover_in_sync import TOPIC, PinnedWriter, _queue_bodies
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(300)

KAFKA_TOPIC = "ResignKafka"


def test_sigterm_of_the_master_resigns_and_the_controller_elects_on_it(tmp_path):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from gateway_native.client import Admin, Producer

    group = FailoverGroup(tmp_path, members=2).start()
    try:
        master = group.wait_settled()
        survivor = next(b for b in group.brokers if b is not master)
        old_id = int(master.settings["brokerId"])
        with Admin(group.namesrv_addr) as admin:  # created on the master (a slave never auto-creates)
            admin.create_topic(KAFKA_TOPIC, 1)
        kp = KafkaProducer(bootstrap_servers=master.kafka_bootstrap, acks="all", retries=5)
        try:
            kafka_acked = [kp.send(KAFKA_TOPIC, f"k-{i}".encode(), partition=0).get(timeout=30) for i in range(20)]
        finally:
            kp.close()
        with Producer("resign-writer", group.namesrv_addr, send_msg_timeout=20_000) as producer:
            mq = producer.fetch_publish_queues(TOPIC)[0]
            writer = PinnedWriter(producer, mq)
            writer.start()
            try:
                wait_until(lambda: len(writer.acked) >= 20, 30, what="sends acknowledged before the stop")
                stopped_wall = time.time()
                stopped_at = time.monotonic()
                assert master.stop() == 0  # SIGTERM: a clean exit
                assert group.wait_master(not_=master) is survivor
                wait_until(lambda: writer.acked_after(stopped_at) >= 10, 60, what="SEND_OK from the new master")
            finally:
                writer.stop_event.set()
                writer.join(60)
        # the controller elected because the master resigned
        elected = [line for line in chaos.controller_events(group, "controller_elected_master")
                   if (chaos._log_time(line) or 0) >= stopped_wall and re.search(rf"\bold_master={old_id}\b", line)]
        assert elected, "no election after the stop"
        assert "resigned" in elected[0], elected[0]
        assert f"master {old_id} resigned" in elected[0]
        assert "failover_resigned" in master.log_path.read_text("utf-8", "replace")
        # Kafka acks=all records are on the new master, at their offsets
        consumer = KafkaConsumer(bootstrap_servers=survivor.kafka_bootstrap, enable_auto_commit=False,
                                 consumer_timeout_ms=5000)
        try:
            tp = TopicPartition(KAFKA_TOPIC, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = {}
            deadline = time.monotonic() + 30
            while len(got) < len(kafka_acked) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=1000).values():
                    for r in records:
                        got[r.offset] = r.value
        finally:
            consumer.close()
        for i, meta in enumerate(kafka_acked):
            assert got.get(meta.offset) == f"k-{i}".encode(), meta.offset
        # nothing but SEND_OK before the stop; after it at most the send in flight at the stop,
        # as an error or as FLUSH_SLAVE_TIMEOUT (its slave's ACK came after the stop revoked the
        # lease: possibly stored, not acknowledged, as RocketMQ answers it)
        after_stop = [e for e in writer.errors if e[0] > stopped_at]
        assert all(t > stopped_at for t, _ in writer.not_ok), (stopped_at, writer.not_ok)
        assert len(after_stop) + len(writer.not_ok) <= 1, (after_stop, writer.not_ok)
        assert {status for _, status in writer.not_ok} <= {"FLUSH_SLAVE_TIMEOUT"}, writer.not_ok
    finally:
        group.stop()
    stored = _queue_bodies(survivor.data_dir, mq.queue_id)  # every SEND_OK at its offset, once
    for _t, off, body in writer.acked:
        assert stored.get(off) == body, off
    counts = Counter(stored.values())
    assert all(counts[body] == 1 for _t, _o, body in writer.acked)
