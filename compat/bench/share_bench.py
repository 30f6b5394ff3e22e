"""Share-group consumption on one Rockafka node: confluent-kafka's ShareConsumer (KIP-932, implicit
acknowledgement) against a classic Consumer reading the same backlog, both on the node's Kafka
listener; prints records/s of each and their ratio. A share consumer acknowledges every record,
and each acquisition and acknowledgement is a revive-log record (docs/design/share-groups.md),
so the ratio is the price of per-record acknowledgement.

Usage: python compat/bench/share_bench.py [--records 20000] [--members 1]
Nothing here asserts anything; it only measures (tests never run it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from confluent_kafka import Consumer, Producer, ShareConsumer  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewTopic, ResourceType)

from tests.support.node import RunningNode  # noqa: E402


def produce(bs: str, topic: str, n: int) -> None:
    p = Producer({"bootstrap.servers": bs, "linger.ms": 20, "batch.num.messages": 1000})
    body = b"x" * 100
    for i in range(n):
        p.produce(topic, body)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(60)


def classic(bs: str, topic: str, n: int) -> float:
    c = Consumer({"bootstrap.servers": bs, "group.id": "bench-classic-" + uuid.uuid4().hex[:6],
                  "auto.offset.reset": "earliest", "enable.auto.commit": True})
    c.subscribe([topic])
    got, start = 0, None
    deadline = time.monotonic() + 300
    while got < n and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                start = start or time.monotonic()
                got += 1
    c.close()
    return got / (time.monotonic() - start)


def share(bs: str, topic: str, n: int, members: int) -> float:
    group = "bench-share-" + uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bs})
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)
    counts = [0] * members
    first: list[float] = []
    done = threading.Event()

    def run(i: int) -> None:
        c = ShareConsumer({"bootstrap.servers": bs, "group.id": group})
        c.subscribe([topic])
        deadline = time.monotonic() + 300
        while not done.is_set() and time.monotonic() < deadline:
            for m in c.poll(1.0):
                if not m.error():
                    if not first:
                        first.append(time.monotonic())
                    counts[i] += 1
            if sum(counts) >= n:
                done.set()
        c.close()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    done.wait(300)
    end = time.monotonic()
    for t in threads:
        t.join(60)
    return sum(counts) / (end - first[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--members", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d, RunningNode(Path(d) / "data") as node:
        bs = node.kafka_bootstrap
        topic = "bench-share"
        admin = AdminClient({"bootstrap.servers": bs})  # held until the result is in
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        produce(bs, topic, args.records)
        c = classic(bs, topic, args.records)
        s = share(bs, topic, args.records, args.members)
        print(f"records={args.records} (100 B, one partition) classic consumer {c:,.0f} rec/s; "
              f"share consumer x{args.members} (implicit acks) {s:,.0f} rec/s; share/classic {s / c:.2f}")


if __name__ == "__main__":
    main()
