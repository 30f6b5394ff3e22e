"""Exactly-once under concurrency and crashes, with confluent-kafka (librdkafka) clients.

Four consume-transform-produce workers (``eos_worker.py``, each its own transactional id, one
read_committed consumer group) turn every record of a 6-partition topic into one output record,
while an idempotent producer keeps feeding the input, a worker is killed -9 and replaced (the
group rebalances) and the broker is killed -9 twice and restarted on the same data. Afterwards:
the read_committed output holds every input record exactly once, every commit a worker was told
succeeded is still in effect after each crash, the idempotent input holds no duplicate, and the
broker logged no handler exception. (Before coordinator state was kept in the log this failed:
commits lost in a crash were consumed again and their output duplicated, and concurrent
transactions broke connections with FileNotFoundError from shared temp files.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from tests.gateway_kafka.kafka_helpers import RawKafka, create_topic, unique, wait_for

pytestmark = pytest.mark.timeout(420)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PARTITIONS = 6
RECORDS = 2400
WORKERS = 4
OFFSET_FETCH = 9


class Worker:
    """One worker process; its stdout events feed the shared progress table."""

    def __init__(self, index: int, args: list[str], table: "Progress", log_dir: Path):
        self.index = index
        self.table = table
        name = f"worker-{index}-{time.monotonic_ns()}"
        self.err = open(log_dir / f"{name}.err", "wb")
        self.out = open(log_dir / f"{name}.out", "w")  # its events, for a failure's post-mortem
        self.proc = subprocess.Popen([sys.executable, str(HERE / "eos_worker.py"), *args], stdout=subprocess.PIPE,
                                     stderr=self.err, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                     text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.out.write(line)
            self.out.flush()
            try:
                event = json.loads(line)
            except ValueError:
                continue
            self.table.note(self.index, event)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self.reader.join(30)
        self.proc.stdout.close()
        self.err.close()
        self.out.close()


class Progress:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[int, int] = {}  # partition -> highest offset a worker was told was committed
        self.events: list[tuple[int, dict]] = []

    def note(self, worker: int, event: dict) -> None:
        with self.lock:
            self.events.append((worker, event))
            if event.get("event") == "committed":
                for p, o in event["offsets"].items():
                    self.acked[int(p)] = max(self.acked.get(int(p), 0), int(o))

    def processed(self) -> int:
        with self.lock:
            return sum(self.acked.values())

    def snapshot(self) -> dict[int, int]:
        with self.lock:
            return dict(self.acked)


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    with RawKafka(bootstrap) as raw:
        resp = raw.request(OFFSET_FETCH, 7, {"group_id": group, "require_stable": False,
                                             "topics": [{"name": topic, "partition_indexes": list(range(PARTITIONS))}]})
    return {p["partition_index"]: p["committed_offset"] for t in resp["topics"] for p in t["partitions"]}


def read_all(bootstrap: str, topic: str, isolation: str, expect: int) -> list[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("read"), "enable.auto.commit": False,
                  "isolation.level": isolation, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got: list[tuple[int, int, bytes]] = []
    eof: set[int] = set()

    def step() -> bool:
        for m in c.consume(500, 0.5):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                continue
            got.append((m.partition(), m.offset(), m.value()))
            eof.discard(m.partition())
        return len(got) >= expect and len(eof) == PARTITIONS

    try:
        wait_for(step, timeout=60, interval=0, what=f"{expect} records of {topic} ({isolation})")
        return got
    finally:
        c.close()


def test_exactly_once_with_concurrent_workers_rebalances_and_broker_crashes(make_node, tmp_path):
    n = make_node()
    bs = n.kafka_bootstrap
    source, dest, group = unique("eos-in"), unique("eos-out"), unique("eos-g")
    create_topic(bs, source, PARTITIONS)
    create_topic(bs, dest, PARTITIONS)
    progress = Progress()
    workers: dict[int, Worker] = {}

    def start_worker(i: int) -> None:
        workers[i] = Worker(i, [bs, group, f"{group}-tid-{i}", source, dest, "300"], progress, tmp_path)

    # the input: an idempotent producer feeding records through everything that follows
    feed_errors: list[str] = []
    fed = threading.Event()

    def feed() -> None:
        p = Producer({"bootstrap.servers": bs, "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000, "reconnect.backoff.max.ms": 1000})
        for i in range(RECORDS):
            p.produce(source, value=f"v{i}".encode(), partition=i % PARTITIONS,
                      on_delivery=lambda err, _m: err is not None and feed_errors.append(str(err)))
            if i % 20 == 19:
                p.poll(0)
                time.sleep(0.2)  # pace: the crashes below happen while records keep arriving
        left = p.flush(150)
        if left:
            feed_errors.append(f"{left} records not delivered")
        fed.set()

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        feeder.start()
        for i in range(WORKERS):
            start_worker(i)
            time.sleep(0.5)  # staggered joins: the group rebalances as each member arrives

        def reached(fraction: float) -> None:
            wait_for(lambda: progress.processed() >= fraction * RECORDS, timeout=120, interval=0.1,
                     what=f"{fraction:.0%} of the input processed (at {progress.processed()})")

        def crash_broker() -> None:
            acked = progress.snapshot()  # every commit acknowledged before the crash
            n.kill()
            n.start()
            after = committed_offsets(bs, group, source)
            lost = {p: (o, after.get(p, -1)) for p, o in acked.items() if after.get(p, -1) < o}
            assert not lost, f"acknowledged commits lost in the crash (partition: (acked, committed)): {lost}"

        reached(0.15)
        workers[0].kill()  # a member dies; its replacement fences it and the group rebalances
        start_worker(0)
        reached(0.30)
        crash_broker()
        reached(0.55)
        crash_broker()
        assert fed.wait(150), "the input producer did not finish"
        assert not feed_errors, feed_errors
        reached(1.0)
    finally:
        for w in workers.values():
            w.kill()

    inputs = read_all(bs, source, "read_uncommitted", RECORDS)
    values = sorted(v for _p, _o, v in inputs)
    assert values == sorted(f"v{i}".encode() for i in range(RECORDS)), "the idempotent input has duplicates or gaps"
    outputs = read_all(bs, dest, "read_committed", RECORDS)
    produced = [tuple(v.split(b":", 2)) for _p, _o, v in outputs]
    seen: dict[tuple[int, int], int] = {}
    for p, o, _v in produced:
        seen[(int(p), int(o))] = seen.get((int(p), int(o)), 0) + 1
    duplicates = {k: c for k, c in seen.items() if c > 1}
    assert not duplicates, f"{len(duplicates)} input records were output more than once, e.g. {list(duplicates)[:5]}"
    assert set(seen) == {(p, o) for p, o, _v in inputs}, "some input records have no output record"
    assert committed_offsets(bs, group, source) == {p: RECORDS // PARTITIONS for p in range(PARTITIONS)}
    assert any(e.get("event") == "committed" for _w, e in progress.events)
    log_text = n.log_tail(10**8)
    for bad in ("Traceback", "event='connection_failed'", "event='processor_failed'"):
        assert bad not in log_text, f"the broker logged {bad}:\n" + log_text[log_text.find(bad) - 2000:][:6000]
