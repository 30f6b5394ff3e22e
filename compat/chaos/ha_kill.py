"""kill -9 of a SYNC_MASTER master under load from both protocols; every acknowledged message must
be on the slave, byte for byte, at the same offset.

One cycle:
1. the group (standalone NameServer, master with brokerRole=SYNC_MASTER, one slave) is up and
   the slave in sync;
2. two writers run: the Python SDK sending to ``ChaosNative`` (sync sends; a SEND_OK is an
   acknowledgement) and confluent-kafka producing to ``ChaosKafka`` with ``acks=all`` and
   ``min.insync.replicas=2`` (a delivery report without error is one);
3. after a random 0.3 .. 2.5 s the master gets SIGKILL (its process group), mid-write;
4. the writers stop; the slave is stopped cleanly and its store opened here, read-only in
   effect, through the engine: every acknowledged native message is at its commitlog offset
   (from its offset message id) and queue offset, every acknowledged Kafka record at its
   partition offset, and the commitlog bytes of each are identical on master and slave;
5. master, then slave, start again on the same data (a new epoch) and the next cycle begins.

Sends answered SLAVE_NOT_AVAILABLE / FLUSH_SLAVE_TIMEOUT / NOT_ENOUGH_REPLICAS(_AFTER_APPEND)
are counted and reported, never counted as replicated. ``run`` returns a report dict;
``python compat/chaos/ha_kill.py --cycles 20`` (``make chaos``) prints it and exits non-zero on
any loss. The suite (``tests/rockafka/test_ha_kill9.py``) runs a few cycles.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.group import BrokerGroup, commitlog_bytes, wait_until  # noqa: E402

NATIVE_TOPIC = "ChaosNative"
KAFKA_TOPIC = "ChaosKafka"
KAFKA_PARTITIONS = 2


class NativeWriter(threading.Thread):
    def __init__(self, namesrv: str, cycle: int):
        super().__init__(name="native-writer", daemon=True)
        self.namesrv = namesrv
        self.cycle = cycle
        self.stop_event = threading.Event()
        self.acked: list[tuple[str, int, int, bytes]] = []  # offset msg id, queue id, queue offset, body
        self.statuses: Counter[str] = Counter()

    def run(self) -> None:
        from gateway_native.client import Message, Producer

        i = 0
        try:
            with Producer(f"chaos-native-{self.cycle}", self.namesrv, retry_times_when_send_failed=0,
                          send_msg_timeout=3000) as p:
                while not self.stop_event.is_set():
                    body = f"native-{self.cycle}-{i}".encode() * 4
                    i += 1
                    try:
                        r = p.send(Message(NATIVE_TOPIC, body, keys=[f"c{self.cycle}-{i}"]))
                    except Exception as exc:  # the master died: not acknowledged
                        self.statuses[f"error:{type(exc).__name__}"] += 1
                        time.sleep(0.05)  # pace retries against a dead broker (not a synchronisation)
                        continue
                    self.statuses[r.status.name] += 1
                    if r.status.name == "SEND_OK":
                        self.acked.append((r.offset_msg_id, r.message_queue.queue_id, r.queue_offset, body))
        except Exception as exc:
            self.statuses[f"error:{type(exc).__name__}"] += 1


class KafkaWriter(threading.Thread):
    def __init__(self, bootstrap: str, cycle: int):
        super().__init__(name="kafka-writer", daemon=True)
        self.bootstrap = bootstrap
        self.cycle = cycle
        self.stop_event = threading.Event()
        self.acked: list[tuple[int, int, bytes]] = []  # partition, offset, value
        self.statuses: Counter[str] = Counter()

    def run(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": False,
                      "retries": 0, "message.timeout.ms": 5000, "linger.ms": 2, "socket.timeout.ms": 3000})

        def report(err, msg) -> None:
            if err is not None:
                self.statuses[err.name()] += 1
            else:
                self.statuses["OK"] += 1
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
        i = 0
        while not self.stop_event.is_set():
            value = f"kafka-{self.cycle}-{i}".encode() * 4
            try:
                p.produce(KAFKA_TOPIC, value, partition=i % KAFKA_PARTITIONS, on_delivery=report)
                i += 1
            except BufferError:
                pass
            p.poll(0.002)
        p.flush(10)


def _verify(group: BrokerGroup, native: NativeWriter, kafka: KafkaWriter) -> list[str]:
    """Problems found (empty: every acknowledged message is on the slave, byte for byte)."""
    from engine.config import BrokerConfig, MessageStoreConfig
    from engine.message import decode_message, decode_message_id
    from engine.record_batch import decode_batch
    from engine.store import MessageStore

    slave = group.slaves[0]
    problems: list[str] = []
    store = MessageStore(MessageStoreConfig(store_path_root_dir=str(slave.data_dir), broker_role="SLAVE"),
                         broker_config=BrokerConfig(broker_id=1, ha_listen_port=0))
    store.start()
    try:
        for msg_id, qid, qoff, body in native.acked:
            _, phy = decode_message_id(msg_id)
            unit = store.commitlog.read_unit(phy)
            if unit is None:
                problems.append(f"native {msg_id}: nothing at commitlog offset {phy} on the slave")
                continue
            m = decode_message(unit)
            if m.body != body or m.queue_id != qid or m.queue_offset != qoff:
                problems.append(f"native {msg_id}: slave has {m.body[:30]!r} q{m.queue_id}@{m.queue_offset}")
                continue
            got = store.get_message("chaos", NATIVE_TOPIC, qid, qoff, 1)
            if not got.messages or bytes(got.messages[0]) != unit:
                problems.append(f"native {msg_id}: queue {qid} offset {qoff} does not lead to it on the slave")
            if commitlog_bytes(group.master.data_dir, phy, len(unit)) != unit:
                problems.append(f"native {msg_id}: commitlog bytes at {phy} differ between master and slave")
        for part, offset, value in kafka.acked:
            got = store.get_message("chaos", KAFKA_TOPIC, part, offset, 1)
            if not got.messages:
                problems.append(f"kafka {part}@{offset}: not on the slave ({got.status.name})")
                continue
            unit, ref = bytes(got.messages[0]), got.units[0]
            m = decode_message(unit)
            header, records = decode_batch(m.body)
            rec = [r for r in records if header.base_offset + r.offset_delta == offset]
            if not rec or rec[0].value != value:
                problems.append(f"kafka {part}@{offset}: slave holds {rec[0].value[:30] if rec else None!r}")
            if commitlog_bytes(group.master.data_dir, ref.commitlog_offset, len(unit)) != unit:
                problems.append(f"kafka {part}@{offset}: commitlog bytes at {ref.commitlog_offset} differ")
    finally:
        store.shutdown()
    return problems


def _create_kafka_topic(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if KAFKA_TOPIC in admin.list_topics(timeout=10).topics:
        return
    fut = admin.create_topics([NewTopic(KAFKA_TOPIC, KAFKA_PARTITIONS, 2, config={"min.insync.replicas": "2"})],
                              request_timeout=15)[KAFKA_TOPIC]
    fut.result(30)


def run(work: Path, cycles: int, seed: int | None = None, log=print) -> dict:
    rng = random.Random(seed)
    report: dict = {"cycles": 0, "native_acked": 0, "kafka_acked": 0, "native_statuses": Counter(),
                    "kafka_statuses": Counter(), "problems": [], "kill_after_s": []}
    group = BrokerGroup(work, role="SYNC_MASTER")
    group.start()
    try:
        from confluent_kafka.admin import AdminClient

        wait_until(lambda: len(AdminClient({"bootstrap.servers": group.master.kafka_bootstrap})
                               .list_topics(timeout=10).brokers) == 2, 60, what="the master's Kafka view lists the slave")
        _create_kafka_topic(group.master.kafka_bootstrap)
        for cycle in range(cycles):
            native = NativeWriter(group.namesrv_addr, cycle)
            kafka = KafkaWriter(group.master.kafka_bootstrap, cycle)
            native.start()
            kafka.start()
            delay = rng.uniform(0.3, 2.5)
            wait_until(lambda: native.acked and kafka.acked, 60, what="both writers acknowledged")
            time.sleep(delay)  # the random moment of the kill (fault injection, not a synchronisation)
            group.master.kill()
            native.stop_event.set()
            kafka.stop_event.set()
            native.join(30)
            kafka.join(30)
            group.slaves[0].stop()
            problems = _verify(group, native, kafka)
            report["cycles"] += 1
            report["native_acked"] += len(native.acked)
            report["kafka_acked"] += len(kafka.acked)
            report["native_statuses"].update(native.statuses)
            report["kafka_statuses"].update(kafka.statuses)
            report["kill_after_s"].append(round(delay, 2))
            report["problems"] += [f"cycle {cycle}: {p}" for p in problems]
            log(f"cycle {cycle}: killed after {delay:.2f}s, native acked {len(native.acked)} "
                f"{dict(native.statuses)}, kafka acked {len(kafka.acked)} {dict(kafka.statuses)}, "
                f"problems {len(problems)}")
            group.master.start()
            group.slaves[0].start()
            group.wait_in_sync()
    finally:
        group.stop()
    report["native_statuses"] = dict(report["native_statuses"])
    report["kafka_statuses"] = dict(report["kafka_statuses"])
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--work-dir", default=None, help="where the nodes keep their data (default: a temp dir)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="rockafka-chaos-") as tmp:
        report = run(Path(args.work_dir or tmp), args.cycles, args.seed)
    print(json.dumps(report, indent=2))
    lost = len(report["problems"])
    print(f"{report['cycles']} kill -9 cycles: {report['native_acked']} native and {report['kafka_acked']} Kafka "
          f"acknowledged messages checked on the slave; {lost} problem(s)")
    return 1 if lost or report["cycles"] < args.cycles else 0


if __name__ == "__main__":
    sys.exit(main())
