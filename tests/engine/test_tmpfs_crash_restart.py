"""Kill -9 and restart a node whose data lives on a memory-backed disk (a 256 MB tmpfs, as a
Kubernetes ``emptyDir`` with ``medium: Memory``) with RocketMQ's default 1 GiB commitlog
segments: it comes back every time, serves every acknowledged message, and the memory it takes
is what the data takes -- not the segment size (reading a 1 GiB segment's holes would fill the
tmpfs and end in SIGBUS).

Producers of both protocols run while the node is killed. ``CHAOS_CYCLES`` sets the
number of kill/restart cycles (3 here; ``make chaos`` runs many more).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid

import pytest

from gateway_native.client import Message, MQClientError, Producer
from tests.gateway_native.helpers import read_native
from tests.gateway_kafka.kafka_helpers import consume, create_topic
from tests.support import mounts
from tests.support.node import RunningNode

CYCLES = int(os.environ.get("CHAOS_CYCLES", "3"))
pytestmark = pytest.mark.timeout(120 + 60 * CYCLES)


def shmem_rss_kb(pid: int) -> int:
    """Pages of shared memory (tmpfs files) mapped by the process, in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1])
    return 0


class Load:
    """A Kafka (idempotent confluent-kafka) and a native producer writing until told to stop;
    what each got acknowledged is kept."""

    def __init__(self, node: RunningNode, ktopic: str, ntopic: str, cycle: int):
        self.node, self.ktopic, self.ntopic, self.cycle = node, ktopic, ntopic, cycle
        self.acked_k: dict[int, bytes] = {}  # offset -> value (one partition)
        self.acked_n: list[bytes] = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._kafka), threading.Thread(target=self._native)]

    def _kafka(self) -> None:
        from confluent_kafka import Producer as KProducer

        p = KProducer({"bootstrap.servers": self.node.kafka_bootstrap, "enable.idempotence": True,
                       "linger.ms": 2, "message.timeout.ms": 5000})

        def done(err, msg):
            if err is None:
                self.acked_k[msg.offset()] = msg.value()
        i = 0
        while not self.stop.is_set() and i < 5000:
            p.produce(self.ktopic, b"k-%d-%d-" % (self.cycle, i) + os.urandom(200), on_delivery=done)
            p.poll(0.001)
            i += 1
        p.flush(8)

    def _native(self) -> None:
        try:
            with Producer(f"crash-{self.cycle}", self.node.namesrv_addr, retry_times_when_send_failed=0,
                          send_msg_timeout=2000, send_latency_fault_enable=False) as p:
                i = 0
                while not self.stop.is_set() and i < 5000:
                    body = b"n-%d-%d-" % (self.cycle, i) + os.urandom(200)
                    try:
                        p.send(Message(self.ntopic, body))
                    except MQClientError:
                        break  # the node is gone
                    self.acked_n.append(body)
                    i += 1
        except MQClientError:
            pass

    def __enter__(self) -> "Load":
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def high_watermark(node: RunningNode, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": "hw"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        c.close()


def test_kill_restart_loop_on_a_small_tmpfs_with_1gib_segments(tmp_path):
    rng = random.Random(11)
    with mounts.tmpfs(tmp_path / "disk", 256) as disk:
        node = RunningNode(disk / "data")  # mappedFileSizeCommitLog: RocketMQ's 1 GiB
        node.start()
        try:
            ktopic, ntopic = f"crash-k-{uuid.uuid4().hex[:6]}", f"CrashN_{uuid.uuid4().hex[:6]}"
            create_topic(node.kafka_bootstrap, ktopic, 1)
            acked_k: dict[int, bytes] = {}
            acked_n: set[bytes] = set()
            for cycle in range(CYCLES):
                with Load(node, ktopic, ntopic, cycle) as load:
                    time.sleep(rng.uniform(0.5, 2.0))  # the crash lands at a random moment of the load
                    node.kill()
                acked_n.update(load.acked_n)
                acked_k.update(load.acked_k)
                node.start()  # comes back on the same ports and data
                assert shmem_rss_kb(node.proc.pid) < 64 * 1024, "start-up mapped far more than the data"
                assert mounts.used_bytes(disk) < 96 << 20, "the tmpfs holds far more than the data"
                got = consume("confluent-kafka", node.kafka_bootstrap, ktopic, high_watermark(node, ktopic), timeout=60)
                by_offset = {o: v for _p, o, _k, v, _h in got}
                lost = [o for o, v in acked_k.items() if by_offset.get(o) != v]
                assert not lost, f"cycle {cycle}: acknowledged Kafka records lost at offsets {lost[:10]}"
                assert acked_n <= set(read_native(node, ntopic, acked_n)), f"cycle {cycle}: native messages lost"
            assert acked_n and acked_k
        finally:
            node.kill()
        assert "Fatal Python error" not in node.log_tail(10**8)
