"""Reading a tiered topic: offsets that left the disk (served from the object store) beside the
local tier, same node, same records, same consumer, one run.

    PYTHONPATH=. .venv/bin/python -m compat.bench.tiered_bench [--mib 64] [--reps 3]

``make bench`` runs it too (compat/bench/run_all.py, section ``tiered``).

One ``rockafka serve`` on loopback with its remote tier on a real S3 server (s3proxy, filesystem
backend, as the tests use it: tests/support/s3_server.py). Each repetition writes ``mib`` MiB of
1 KiB records with confluent-kafka into a fresh tiered topic (``local.retention.bytes`` 1 MiB,
4 MiB commitlog segments), then the same records into a plain topic, waits until the node has
uploaded the tiered topic and its local retention moved the local start past 75 % of it
(the rest, past the last closed segment, is read locally in the "remote" reads too),
then reads each from offset 0 with one confluent-kafka consumer (the fetch sizes of the Kafka consume row):

- **remote, cold**: the first read of the tiered topic (the node's read cache holds nothing of it);
- **remote, cached**: the same read again (its 1 MiB chunks now in the read cache);
- **local**: the plain topic (page cache warm: it was just written).

Reported per read: records/s over the whole topic and the first record's latency (assign to the
first poll returning a record). Asserts nothing about time; every read checks it got every
record in order.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

RECORD = 1024
SEGMENT = 4 << 20
COLD, CACHED, LOCAL = "remote, cold", "remote, cached", "local tier"


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _settings(server, bucket: str) -> dict[str, object]:
    return {
        "mappedFileSizeCommitLog": SEGMENT,
        # store-wide retention as configured by default (72 h): the plain topic keeps its records;
        # the tiered topic's local start moves past what local.retention.bytes allows, so reads
        # below it are served from the object store even while the segment files still exist
        "tieredBackendServiceProvider": "s3",
        "objectStoreEndpoint": server.endpoint,
        "objectStoreBucket": bucket,
        "objectStoreAccessKey": "rockafka",
        "objectStoreSecretKey": "rockafka-test-secret",
        "tieredStoreGroupCommitSize": SEGMENT,
        "tieredStoreUploadInterval": 200,
    }


def _produce(bootstrap: str, topics: list[str], count: int) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 256 * 1024,
                  "queue.buffering.max.kbytes": 256 * 1024})
    for i in range(count):
        value = (b"%09d" % i) + bytes(RECORD - 9)
        for t in topics:
            while True:
                try:
                    p.produce(t, value, partition=0)
                    break
                except BufferError:
                    p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise RuntimeError("records left unacknowledged")


def _offset(bootstrap: str, topic: str, which: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": _unique("lo")})
    try:
        return c.offsets_for_times([TopicPartition(topic, 0, which)], timeout=10)[0].offset
    finally:
        c.close()


def read_all(bootstrap: str, topic: str, count: int, timeout: float = 300.0) -> tuple[float, float]:
    """(records/s, first record latency in ms) of reading ``count`` records from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": _unique("tier"), "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100, "fetch.max.bytes": 50 << 20,
                  "max.partition.fetch.bytes": 10 << 20, "queued.max.messages.kbytes": 256 * 1024})
    try:
        started = time.perf_counter()
        c.assign([TopicPartition(topic, 0, 0)])
        first = None
        got = 0
        deadline = time.monotonic() + timeout
        while got < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {got} of {count} records of {topic} in {timeout:.0f}s")
            # the first record by poll (consume() waits for a full batch or its timeout)
            msgs = c.consume(min(1_000, count - got), 0.5) if first is not None else [m for m in [c.poll(0.5)] if m is not None]
            for m in msgs:
                if m.error() is not None:
                    raise RuntimeError(f"{topic}: {m.error()}")
                if m.offset() != got or int(m.value()[:9]) != got:
                    raise RuntimeError(f"{topic}: offset {m.offset()} where {got} was due")
                got += 1
            if msgs and first is None:
                first = time.perf_counter() - started
        elapsed = time.perf_counter() - started
        return count / elapsed, (first or elapsed) * 1000
    finally:
        c.close()


def measure(mib: int, reps: int, log=lambda text: None) -> dict[str, dict[str, list[float]]]:
    """{read: {"records/s": [...], "first record ms": [...]}} over ``reps`` repetitions."""
    from tests.gateway_kafka.kafka_helpers import create_topic
    from tests.support.node import RunningNode
    from tests.support.s3_server import S3Server

    count = mib * 1024 * 1024 // RECORD
    out: dict[str, dict[str, list[float]]] = {k: {"records/s": [], "first record ms": []}
                                              for k in (COLD, CACHED, LOCAL)}
    with tempfile.TemporaryDirectory(prefix="tiered-bench-") as tmp:
        root = Path(tmp)
        server = S3Server(root / "s3")
        bucket = server.make_bucket("bench")
        with server, RunningNode(root / "data", settings=_settings(server, bucket), ready_timeout=120) as node:
            bs = node.kafka_bootstrap
            for rep in range(reps):
                tiered, plain = _unique("tiered"), _unique("plain")
                create_topic(bs, tiered, 1, {"remote.storage.enable": "true",
                                             "local.retention.bytes": str(1 << 20)})
                create_topic(bs, plain, 1)
                # the tiered topic first: the plain one's records then close its last segment
                _produce(bs, [tiered], count)
                _produce(bs, [plain], count)
                deadline = time.monotonic() + 300
                while _offset(bs, tiered, -4) < count * 0.75:  # earliest-local: offloaded
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{tiered}: not offloaded within 300 s")
                    time.sleep(0.5)
                for name, topic in ((COLD, tiered), (CACHED, tiered), (LOCAL, plain)):
                    rate, first = read_all(bs, topic, count)
                    out[name]["records/s"].append(rate)
                    out[name]["first record ms"].append(first)
                    log(f"rep {rep + 1}/{reps} {name}: {rate:,.0f} records/s, first record {first:.1f} ms")
    return out


def render(result: dict[str, dict[str, list[float]]], mib: int) -> str:
    lines = [f"Reading {mib} MiB of 1 KiB records from offset 0 (confluent-kafka), median of "
             f"{len(result[COLD]['records/s'])}", "",
             "| read | records/s | first record ms | vs local (records/s) |", "|---|---|---|---|"]
    local = statistics.median(result[LOCAL]["records/s"])
    for name in (COLD, CACHED, LOCAL):
        rate = statistics.median(result[name]["records/s"])
        first = statistics.median(result[name]["first record ms"])
        lines.append(f"| {name} | {rate:,.0f} | {first:.1f} | {rate / local:.2f}x |")
    return "\n".join(lines) + "\n"


def part(mib: int, reps: int, budget_left_s: float, tables: list, log) -> None:
    """The ``make bench`` section: two tables (records/s, first record latency), the remote
    reads in the Rockafka column and the local tier as the column they are compared with."""
    from compat.bench.workloads.stats import Failure, Table

    rates = Table(f"Reading a tiered topic ({mib} MiB of 1 KiB records): remote tier vs local tier",
                  "records/s", "local tier", "higher")
    firsts = Table("Reading a tiered topic: first record after assign, remote tier vs local tier",
                   "ms", "local tier", "lower")
    if budget_left_s < 120:
        for t, case in ((rates, COLD), (firsts, COLD)):
            t.add(case, "rockafka", Failure("skipped: time budget spent"))
    else:
        try:
            result = measure(mib, reps, log=log)
            for name in (COLD, CACHED):
                for v in result[name]["records/s"]:
                    rates.add(name, "rockafka", v)
                for v in result[name]["first record ms"]:
                    firsts.add(name, "rockafka", v)
                for v in result[LOCAL]["records/s"]:
                    rates.add(name, "local tier", v)
                for v in result[LOCAL]["first record ms"]:
                    firsts.add(name, "local tier", v)
        except Exception as e:
            rates.add(COLD, "rockafka", Failure(f"{type(e).__name__}: {e}"))
    rates.notes.append("One node, its remote tier on s3proxy (filesystem backend) on the same machine. "
                       "Cold: the first read of offsets that left the disk; cached: the same read again "
                       "(tieredStoreReadCacheSize). Local tier column: the same records in a plain topic.")
    tables += [rates, firsts]


def main(argv: list[str] | None = None) -> int:
    root = str(Path(__file__).resolve().parents[2])   # run on its own: the tree's tests/ helpers
    if root not in sys.path:
        sys.path.insert(0, root)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    result = measure(args.mib, args.reps, log=lambda text: print(text, file=sys.stderr, flush=True))
    print(render(result, args.mib))
    return 0


if __name__ == "__main__":
    sys.exit(main())
