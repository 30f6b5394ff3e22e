"""Kafka-protocol benchmark with confluent-kafka (librdkafka): throughput and end-to-end latency.

    python compat/bench/kafka_bench.py                      # starts its own `rockafka serve`
    python compat/bench/kafka_bench.py --bootstrap host:port  # any Kafka-protocol server

Measures, on one topic with one partition:
1. produce throughput: ``--records`` records of ``--size`` bytes, acks=1, linger 5 ms;
2. consume throughput: the same records read from the beginning by a fresh consumer;
3. end-to-end latency at a fixed rate: ``--rate`` records/s for ``--seconds`` s, each carrying
   its send time; a consumer records receive time - send time; p50/p99/max.
Prints one JSON object. Bounded: every phase has a deadline; total about a minute by default.
"""

from __future__ import annotations

import argparse
import json
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def produce_throughput(bs: str, topic: str, records: int, size: int, conf: dict | None = None) -> dict:
    """``conf``: extra client settings (e.g. security.protocol for a TLS listener)."""
    from confluent_kafka import Producer

    p = Producer({**(conf or {}), "bootstrap.servers": bs, "acks": "1", "linger.ms": 5, "batch.size": 1_000_000,
                  "queue.buffering.max.messages": 1_000_000, "enable.idempotence": False})
    payload = b"x" * size
    errors = []

    def cb(err, _msg):
        if err is not None:
            errors.append(err)

    start = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, payload, on_delivery=cb)
                break
            except BufferError:
                p.poll(0.01)
        if i % 1000 == 0:
            p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"produce failed: {left} undelivered, errors {errors[:3]}")
    return {"records": records, "seconds": round(elapsed, 3), "records_per_s": round(records / elapsed),
            "mib_per_s": round(records * size / elapsed / 2**20, 1)}


def consume_throughput(bs: str, topic: str, records: int, size: int, conf: dict | None = None) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**(conf or {}), "bootstrap.servers": bs, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                  "fetch.max.bytes": 50 * 2**20, "max.partition.fetch.bytes": 10 * 2**20})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    start = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records and time.monotonic() < deadline:
        for m in c.consume(10_000, 1.0):
            if not m.error():
                got += 1
    elapsed = time.perf_counter() - start
    c.close()
    if got < records:
        raise RuntimeError(f"consumed only {got} of {records}")
    return {"records": got, "seconds": round(elapsed, 3), "records_per_s": round(got / elapsed),
            "mib_per_s": round(got * size / elapsed / 2**20, 1)}


def latency(bs: str, topic: str, rate: int, seconds: float, size: int) -> dict:
    import threading

    from confluent_kafka import Consumer, Producer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"lat-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "fetch.min.bytes": 1})
    c.assign([TopicPartition(topic, 0, 0)])
    total = int(rate * seconds)
    samples: list[float] = []
    done = threading.Event()

    def consume():
        deadline = time.monotonic() + seconds + 30
        while len(samples) < total and time.monotonic() < deadline:
            m = c.poll(0.2)  # one at a time: consume(n, t) would wait for n records
            if m is not None and not m.error():
                sent = struct.unpack_from(">d", m.value())[0]
                samples.append((time.time() - sent) * 1000)
        done.set()

    t = threading.Thread(target=consume, daemon=True)
    t.start()
    p = Producer({"bootstrap.servers": bs, "acks": "1", "linger.ms": 0})
    pad = b"x" * max(0, size - 8)
    start = time.perf_counter()
    for i in range(total):
        target = start + i / rate
        while (now := time.perf_counter()) < target:
            p.poll(min(0.001, target - now))
        p.produce(topic, struct.pack(">d", time.time()) + pad)
    p.flush(30)
    done.wait(seconds + 40)
    c.close()
    samples.sort()
    if not samples:
        raise RuntimeError("no latency samples")

    def pct(q):
        return round(samples[min(len(samples) - 1, int(q * len(samples)))], 2)

    return {"rate_per_s": rate, "records": len(samples), "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "max_ms": round(samples[-1], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="an already running server; default: start rockafka serve")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=10)
    args = ap.parse_args()
    node = None
    bs = args.bootstrap
    tmp = None
    if bs is None:
        from tests.support.node import RunningNode

        tmp = tempfile.TemporaryDirectory(prefix="kafka-bench-")
        node = RunningNode(Path(tmp.name) / "data").start()
        bs = node.kafka_bootstrap
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": bs})
        t1, t2 = f"bench-{uuid.uuid4().hex[:8]}", f"lat-{uuid.uuid4().hex[:8]}"
        for f in admin.create_topics([NewTopic(t1, 1, 1), NewTopic(t2, 1, 1)]).values():
            f.result(30)
        result = {"server": "rockafka" if node else bs, "record_bytes": args.size,
                  "produce": produce_throughput(bs, t1, args.records, args.size),
                  "consume": consume_throughput(bs, t1, args.records, args.size),
                  "latency": latency(bs, t2, args.rate, args.seconds, args.size)}
        print(json.dumps(result, indent=2))
    finally:
        if node is not None:
            node.stop()
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
