"""RocketMQ 5's in-sync rules for native writes in controller mode (docs/design/failover.md, "What
each protocol promises"), with real processes: a 3-node controller quorum and a SYNC_MASTER group
of two brokers.

- After kill -9 of the master the survivor is master with the SyncStateSet [itself]: native
  sends are SEND_OK again (not SLAVE_NOT_AVAILABLE until the dead broker returns), as Kafka
  acks=all is; the SDK sending to an explicit queue follows the failover with at most one failed
  send; the restarted broker rejoins the SyncStateSet; every SEND_OK is on both replicas once.
- With ``minInSyncReplicas=2`` the survivor refuses native sends with RocketMQ's answer
  (SYSTEM_ERROR "in-sync replicas not enough") and stores nothing until the set regrows.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from compat.chaos import failover as chaos
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(300)

TOPIC = "InSyncTopic"


class PinnedWriter(threading.Thread):
    """Sends to one chosen queue, one send at a time, and records what the application sees."""

    def __init__(self, producer, mq):
        super().__init__(name="pinned-writer", daemon=True)
        self.producer, self.mq = producer, mq
        self.stop_event = threading.Event()
        self.acked: list[tuple[float, int, bytes]] = []  # ack time, queue offset, body
        self.statuses: Counter[str] = Counter()
        self.not_ok: list[tuple[float, str]] = []  # answer time, status of each answer but SEND_OK
        self.errors: list[tuple[float, str]] = []

    def run(self) -> None:
        from gateway_native.client import Message

        i = 0
        while not self.stop_event.is_set():
            body = f"pinned-{i:06d}".encode()
            i += 1
            try:
                r = self.producer.send(Message(TOPIC, body), self.mq)
            except Exception as exc:
                self.errors.append((time.monotonic(), f"{type(exc).__name__}: {exc}"))
                continue
            self.statuses[r.status.name] += 1
            if r.status.name == "SEND_OK":
                self.acked.append((time.monotonic(), r.queue_offset, body))
            else:
                self.not_ok.append((time.monotonic(), r.status.name))
            self.stop_event.wait(0.01)

    def acked_after(self, t: float) -> int:
        return sum(1 for a in self.acked if a[0] > t)


def _queue_bodies(data_dir, queue_id: int) -> dict[int, bytes]:
    store = chaos._open(data_dir)
    try:
        return {off: body for (q, off), body in chaos._scan(store, TOPIC, queue_id + 1, False).items() if q == queue_id}
    finally:
        store.shutdown()


def test_a_two_member_group_acknowledges_on_its_sync_state_set_after_a_kill(tmp_path):
    from kafka import KafkaProducer

    from gateway_native.client import Producer

    group = FailoverGroup(tmp_path, members=2).start()
    try:
        master = group.wait_settled()
        survivor = next(b for b in group.brokers if b is not master)
        with Producer("in-sync-writer", group.namesrv_addr, send_msg_timeout=20_000) as producer:
            mq = producer.fetch_publish_queues(TOPIC)[0]
            writer = PinnedWriter(producer, mq)
            writer.start()
            try:
                wait_until(lambda: len(writer.acked) >= 20, 30, what="sends acknowledged before the kill")
                killed_at = time.monotonic()
                master.kill()
                new = group.wait_master(not_=master)
                assert new is survivor
                wait_until(lambda: writer.acked_after(killed_at) >= 20, 60, what="SEND_OK from the new master")
                resumed = min(a[0] for a in writer.acked if a[0] > killed_at) - killed_at
                print(f"\nnative SEND_OK resumed {resumed:.2f} s after kill -9 of the master")
                assert group.ha(new)["syncStateSet"] == []  # the master alone, as the controller says
                in_sync = group.quorum.replicas_info()["inSyncReplicas"]
                assert [r["brokerId"] for r in in_sync] == [int(new.settings["brokerId"])]
                # Kafka acks=all gets the same promise on the same set
                kp = KafkaProducer(bootstrap_servers=new.kafka_bootstrap, acks="all", retries=5)
                try:
                    kp.send("InSyncKafka", b"on-the-sync-state-set").get(timeout=30)
                finally:
                    kp.close()
                # the dead broker comes back, catches up and the set regrows
                master.start()
                group.wait_settled(members=2)
                grown = len(writer.acked)
                wait_until(lambda: len(writer.acked) >= grown + 10, 30, what="SEND_OK with both members in sync")
            finally:
                writer.stop_event.set()
                writer.join(60)
        after_kill = [e for e in writer.errors if e[0] > killed_at]
        assert len(after_kill) <= 1, after_kill  # only the send in flight at the kill may fail
        assert set(writer.statuses) == {"SEND_OK"}, writer.statuses  # never SLAVE_NOT_AVAILABLE
    finally:
        group.stop()
    for broker in group.brokers:  # every acknowledged message at its offset, once, on each replica
        stored = _queue_bodies(broker.data_dir, mq.queue_id)
        for _t, off, body in writer.acked:
            assert stored.get(off) == body, (broker.data_dir, off)
        counts = Counter(stored.values())
        assert all(counts[body] == 1 for _t, _o, body in writer.acked)


def test_below_min_in_sync_replicas_a_native_send_is_refused_and_not_stored(tmp_path):
    from gateway_native.client import Message, Producer
    from gateway_native.client.producer import MQBrokerError
    from gateway_native.remoting.codes import ResponseCode as R

    group = FailoverGroup(tmp_path, members=2, settings={"minInSyncReplicas": 2}).start()
    try:
        master = group.wait_settled()
        with Producer("min-in-sync", group.namesrv_addr, send_msg_timeout=20_000) as producer:
            mq = producer.fetch_publish_queues(TOPIC)[0]
            first = producer.send(Message(TOPIC, b"two copies"), mq)
            assert first.status.name == "SEND_OK"
            master.kill()
            group.wait_master(not_=master)

            def refused():
                try:
                    producer.send(Message(TOPIC, b"one copy only"), mq)
                except MQBrokerError as exc:
                    return exc
                return None
            exc = wait_until(refused, 30, what="the new master's refusal")
            assert exc.code == R.SYSTEM_ERROR and "in-sync replicas not enough" in str(exc)
            master.start()
            group.wait_settled(members=2)
            again = producer.send(Message(TOPIC, b"two copies again"), mq)
            assert again.status.name == "SEND_OK"
            assert again.queue_offset == first.queue_offset + 1  # the refused sends were not stored
    finally:
        group.stop()
