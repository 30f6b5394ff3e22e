"""Spark reading 1 tag of 10: the ``rockafka`` data source (tag pushed to the broker) vs Spark's
Kafka source reading everything and filtering in Spark, same node, same topic, same session.

    PYTHONPATH=. .venv/bin/python -m compat.bench.spark_pushdown_bench [--mib 1024] [--reps 3]

``make bench`` runs it too (compat/bench/run_all.py, section ``spark``: 1 GiB in the full run,
``--spark-pushdown-mib`` to change it).

One ``rockafka serve`` on loopback; a topic of 4 queues filled with 1 KiB messages by the SDK in
batches, tags T0..T9 round robin (so each message is also readable by Kafka clients, its tag in
the ``rmq.tags`` header). Both reads count the matching rows and sum their body lengths, so no
side skips the fetch. "Served" is what the broker sent to consumers of the topic, read from the
node's Prometheus counters (``rockafka_topic_bytes_out`` by listener) around each read. Prints a
Markdown table with medians and the pushdown/Kafka ratios; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

TAG = "T3"


def served(admin_url: str, topic: str) -> dict[str, tuple[float, float]]:
    text = urllib.request.urlopen(f"{admin_url}/metrics", timeout=30).read().decode()
    out: dict[str, list[float]] = {}
    for kind in ("bytes", "messages"):
        pat = re.compile(r'rockafka_topic_%s_out_total\{listener="([^"]+)",topic="%s"\} ([0-9.e+]+)'
                         % (kind, re.escape(topic)))
        for listener, value in pat.findall(text):
            out.setdefault(listener, [0.0, 0.0])[0 if kind == "bytes" else 1] = float(value)
    return {k: (v[0], v[1]) for k, v in out.items()}


def delta(before, after) -> tuple[float, float]:
    b = sum(v[0] for v in after.values()) - sum(v[0] for v in before.values())
    m = sum(v[1] for v in after.values()) - sum(v[1] for v in before.values())
    return b, m


def fill(namesrv: str, topic: str, count: int) -> None:
    from gateway_native.client import Admin, Message, Producer

    with Admin(namesrv) as admin:
        admin.create_topic(topic, 4)
    p = Producer(f"bench-{uuid.uuid4().hex[:6]}", namesrv).start()
    try:
        body = b"x" * 1024
        batch = 64
        for i in range(0, count, batch):
            p.send_batch([Message(topic, body, tags=f"T{j % 10}") for j in range(i, min(count, i + batch))])
    finally:
        p.shutdown()


PUSHDOWN = "rockafka source, tag pushed"
KAFKA = "Kafka source, filtered in Spark"


def measure(mib: int, reps: int, log=lambda text: print(text, file=sys.stderr)) -> dict:
    """Fill a ``mib`` MiB topic on a fresh node and read tag ``TAG`` both ways, ``reps`` times after
    a warm-up round. Returns ``{"mib", "count", "expect", "runs": {read: [(seconds, bytes served,
    messages served)]}}`` (warm-up dropped). Raises if a read returns the wrong number of rows."""
    from pyspark.sql import functions as F

    from spark_examples.common import rockafka_session
    from tests.support.node import RunningNode

    count = mib * 1024
    expect = len([j for j in range(count) if f"T{j % 10}" == TAG])
    with tempfile.TemporaryDirectory() as tmp, RunningNode(Path(tmp) / "data", ready_timeout=120) as node:
        topic = f"pushdown-{uuid.uuid4().hex[:6]}"
        t0 = time.perf_counter()
        fill(node.namesrv_addr, topic, count)
        log(f"filled {count} messages in {time.perf_counter() - t0:.1f}s")
        spark = rockafka_session("rockafka-pushdown-bench", conf={"spark.driver.memory": "1g"})
        spark.sparkContext.setLogLevel("ERROR")

        def pushdown():
            df = (spark.read.format("rockafka").option("namesrv", node.namesrv_addr).option("topic", topic)
                  .option("group", f"bench-{uuid.uuid4().hex[:6]}").load().where(f"tags = '{TAG}'"))
            return df.agg(F.count(F.lit(1)), F.sum(F.length("body"))).collect()[0]

        def kafka():
            df = (spark.read.format("kafka").option("kafka.bootstrap.servers", node.kafka_bootstrap)
                  .option("subscribe", topic).option("includeHeaders", "true")
                  .option("startingOffsets", "earliest").option("endingOffsets", "latest").load()
                  .where(F.exists("headers", lambda h: (h["key"] == "rmq.tags") & (h["value"] == F.lit(TAG).cast("binary")))))
            return df.agg(F.count(F.lit(1)), F.sum(F.length("value"))).collect()[0]

        runs: dict[str, list[tuple[float, float, float]]] = {PUSHDOWN: [], KAFKA: []}
        try:
            for _ in range(reps + 1):  # the first round warms both paths up and is not kept
                for name, fn in ((PUSHDOWN, pushdown), (KAFKA, kafka)):
                    before = served(node.admin_url, topic)
                    t = time.perf_counter()
                    row = fn()
                    secs = time.perf_counter() - t
                    nbytes, msgs = delta(before, served(node.admin_url, topic))
                    if int(row[0]) != expect:
                        raise RuntimeError(f"{name}: {row[0]} rows, expected {expect}")
                    runs[name].append((secs, nbytes, msgs))
        finally:
            spark.stop()
    return {"mib": mib, "count": count, "expect": expect, "runs": {k: v[1:] for k, v in runs.items()}}


def render(result: dict) -> str:
    """The Markdown table and the ratio line ``pushdown / Kafka source: time Xx, bytes served Yx``."""
    runs = result["runs"]
    reps = len(runs[PUSHDOWN])
    lines = [f"Spark reading 1 tag of 10 from a {result['mib']} MiB topic ({result['count']} x 1 KiB, 4 queues), "
             f"{result['expect']} matching rows, median of {reps} after a warm-up", "",
             "| read | seconds | served MiB | served messages |", "| --- | --- | --- | --- |"]
    med = {}
    for name, kept in runs.items():
        med[name] = tuple(statistics.median(r[i] for r in kept) for i in range(3))
        lines.append(f"| {name} | {med[name][0]:.2f} | {med[name][1] / 2**20:.1f} | {int(med[name][2])} |")
    a, b = med[PUSHDOWN], med[KAFKA]
    lines += ["", f"pushdown / Kafka source: time {a[0] / b[0]:.2f}x, bytes served {a[1] / max(b[1], 1):.3f}x"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=1024, help="topic size (1 GiB by default; 64 for a quick run)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    print("\n" + render(measure(args.mib, args.reps)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
