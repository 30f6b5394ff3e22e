"""Flow control as RocketMQ describes it ("流量控制"), with a real stalled disk: the data
directory is an ext4 file system on a loop device that the test freezes (``fsfreeze``), as a
cloud volume stalls. Writes into it block until it thaws; the node must not pile requests up
behind the one stuck write.

Under SYNC_FLUSH (sends go through the send queue): RocketMQ producers get SYSTEM_BUSY with
``[PC_SYNCHRONIZED]`` (the commitlog has been locked longer than osPageCacheBusyTimeOutMills)
or ``[TIMEOUT_CLEAN_QUEUE]`` (waited longer than waitTimeMillsInSendQueue), a Kafka producer is
told ``throttle_time_ms`` (librdkafka's throttle callback fires) and retries; consumers keep
reading what is stored. Once the disk thaws, producing goes on and everything acknowledged
reads back.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import threading
import time
import uuid

import pytest

from gateway_native.client import MQBrokerError, MQClientError, Message, Producer
from gateway_native.remoting.codes import ResponseCode as R
from tests.gateway_kafka.kafka_helpers import consume, create_topic
from tests.gateway_native.helpers import read_native
from tests.support import mounts
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)


def indexed(node: RunningNode, topic: str, key: str) -> bool:
    url = f"{node.admin_url}/api/messages?topic={topic}&key={key}"
    return bool(json.loads(urllib.request.urlopen(url, timeout=10).read())["messages"])


def freeze(path, frozen: bool) -> None:
    r = subprocess.run(["fsfreeze", "-f" if frozen else "-u", str(path)], capture_output=True, text=True, timeout=60)
    if frozen and r.returncode != 0:
        pytest.skip(f"cannot freeze the file system here: {r.stderr.strip()}")


def read_assigned(bootstrap: str, topic: str, count: int, timeout: float) -> list[bytes]:
    """Values of partition 0 from the start, read without a consumer group."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"assign-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.wait.max.ms": 200})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                out.append(m.value())
        return out
    finally:
        c.close()


def test_a_stalled_disk_answers_busy_and_throttles_instead_of_queueing(tmp_path):
    with mounts.ext4_loop(tmp_path / "disk", 160) as disk:
        node = RunningNode(disk / "data", settings={"flushDiskType": "SYNC_FLUSH",
                                                   "mappedFileSizeCommitLog": 16 << 20})
        node.log_path = tmp_path / "node.log"  # the node's log must not be on the disk that stalls
        with node:
            ktopic, ntopic = f"fc-k-{uuid.uuid4().hex[:6]}", f"FcN_{uuid.uuid4().hex[:6]}"
            create_topic(node.kafka_bootstrap, ktopic, 1)
            from confluent_kafka import Producer as KProducer

            throttles: list[int] = []
            delivered: dict[int, bytes] = {}
            kp = KProducer({"bootstrap.servers": node.kafka_bootstrap, "enable.idempotence": True, "linger.ms": 0,
                            "message.timeout.ms": 120000,
                            "throttle_cb": lambda ev: throttles.append(int(ev.throttle_time * 1000))})

            def on_delivery(err, msg):
                if err is None:
                    delivered[msg.offset()] = msg.value()
            for i in range(20):  # data to read while the disk is stalled
                kp.produce(ktopic, b"before-%d" % i, on_delivery=on_delivery)
            assert kp.flush(30) == 0

            producers = [Producer(f"fc-{i}", node.namesrv_addr, retry_times_when_send_failed=0, send_msg_timeout=5000,
                                  send_latency_fault_enable=False, instance_name=f"fc-{i}-{uuid.uuid4().hex[:4]}").start()
                         for i in range(8)]
            acked_n: list[bytes] = []
            for i, p in enumerate(producers):  # routes and connections are in place before the disk stalls
                body = b"warm-" + os.urandom(8)
                p.send(Message(ntopic, body, keys=[f"warm-{i}"]))
                acked_n.append(body)
            # the index has caught up (no write of the store's own is under way when it freezes)
            deadline = time.monotonic() + 20
            while not indexed(node, ntopic, f"warm-{len(producers) - 1}"):
                assert time.monotonic() < deadline, "the index never caught up"
                time.sleep(0.05)
            remarks: list[str] = []
            stop = threading.Event()

            def send_loop(p: Producer) -> None:
                i = 0
                while not stop.is_set() and i < 200:
                    body = b"n-" + os.urandom(8)
                    try:
                        p.send(Message(ntopic, body))
                        acked_n.append(body)
                    except MQBrokerError as exc:
                        assert exc.code == R.SYSTEM_BUSY, (exc.code, exc.remark)
                        remarks.append(exc.remark or "")
                    except MQClientError:
                        pass  # the one send stuck on the frozen disk times out at the client
                    i += 1
            threads = [threading.Thread(target=send_loop, args=(p,), daemon=True) for p in producers]
            freeze(disk, True)
            try:
                for t in threads:
                    t.start()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not (
                        any("[PC_SYNCHRONIZED]" in r for r in remarks) and any("[TIMEOUT_CLEAN_QUEUE]" in r for r in remarks)):
                    time.sleep(0.1)
                assert any(r.startswith("[PC_SYNCHRONIZED]broker busy") for r in remarks), remarks[:5]
                assert any(r.startswith("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue:")
                           for r in remarks), remarks[:5]
                # Kafka: told to slow down, not left waiting on an unbounded queue
                for i in range(5):
                    kp.produce(ktopic, b"during-%d" % i, on_delivery=on_delivery)
                deadline = time.monotonic() + 60
                while not throttles and time.monotonic() < deadline:
                    kp.poll(0.1)
                assert throttles and max(throttles) > 0, "no throttle_time_ms reached the Kafka producer"
                # consumers keep reading what is stored (by assignment: a group's join writes
                # its metadata record, which waits for the disk like any write)
                got = read_assigned(node.kafka_bootstrap, ktopic, 20, timeout=30)
                assert got[:20] == [b"before-%d" % i for i in range(20)]
                assert node.running()
            finally:
                freeze(disk, False)
                stop.set()
                for t in threads:
                    t.join(60)
            # thawed: producing goes on by itself, and everything acknowledged reads back
            assert kp.flush(120) == 0
            assert sum(v.startswith(b"during-") for v in delivered.values()) == 5
            for p in producers:
                body = b"after-" + os.urandom(8)
                p.send(Message(ntopic, body))
                acked_n.append(body)
                p.shutdown()
            got = consume("confluent-kafka", node.kafka_bootstrap, ktopic, len(delivered), timeout=60)
            assert {o: v for _p, o, _k, v, _h in got} == delivered
            assert set(acked_n) <= set(read_native(node, ntopic, acked_n))
        assert "Traceback" not in node.log_tail(10**8)
