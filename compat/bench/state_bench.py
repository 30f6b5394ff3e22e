"""What coordinator state costs: produce, transaction and offset-commit throughput (confluent-kafka).

    python compat/bench/state_bench.py                        # starts its own `rockafka serve`
    python compat/bench/state_bench.py --bootstrap host:port  # any Kafka-protocol server

Cases, each run ``--reps`` times (fresh topics per run), median reported:
1. ``produce``: ``--records`` records of ``--size`` bytes to one partition, acks=1, no idempotence
   (the plain produce path, which coordinator state must not slow down);
2. ``produce_idempotent``: the same with enable.idempotence (acks=all, sequence checks);
3. ``transactions``: one transactional producer, ``--txns`` transactions of ``--txn-records``
   records over 6 partitions, each with send_offsets_to_transaction for a group (as a
   consume-transform-produce loop does): AddPartitionsToTxn, AddOffsetsToTxn,
   TxnOffsetCommit, EndTxn per transaction;
4. ``offset_commits``: a consumer committing one partition's offset synchronously
   ``--commits`` times.

Prints one JSON object. Every loop is bounded in count and time. Used to state the cost of
keeping group, transaction and producer state in the log (docs/design/coordinator-state.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from compat.bench.workloads import kafka_wl  # noqa: E402


def _topic(admin, partitions: int) -> str:
    from confluent_kafka.admin import NewTopic

    name = f"sb-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(30)
    return name


def transactions(bs: str, topic: str, txns: int, per_txn: int, deadline_s: float = 180) -> float:
    from confluent_kafka import Consumer, Producer, TopicPartition

    group = f"sbg-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
    p = Producer({"bootstrap.servers": bs, "transactional.id": f"sbt-{uuid.uuid4().hex[:8]}", "linger.ms": 1})
    p.init_transactions(30)
    meta = c.consumer_group_metadata()
    deadline = time.monotonic() + deadline_s
    start = time.perf_counter()
    done = 0
    for t in range(txns):
        if time.monotonic() > deadline:
            break
        p.begin_transaction()
        for i in range(per_txn):
            p.produce(topic, b"v" * 100, partition=i % 6)
        p.send_offsets_to_transaction([TopicPartition(topic, 0, t + 1)], meta, 30)
        p.commit_transaction(30)
        done += 1
    elapsed = time.perf_counter() - start
    c.close()
    if done < txns:
        raise RuntimeError(f"only {done} of {txns} transactions within {deadline_s}s")
    return done / elapsed


def offset_commits(bs: str, topic: str, commits: int) -> float:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bs, "group.id": f"sbc-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False})
    start = time.perf_counter()
    for i in range(commits):
        c.commit(offsets=[TopicPartition(topic, 0, i + 1)], asynchronous=False)
    elapsed = time.perf_counter() - start
    c.close()
    return commits / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="an already running server; default: start rockafka serve")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txns", type=int, default=300)
    ap.add_argument("--txn-records", type=int, default=20)
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], help="key=value node setting (own node only)")
    args = ap.parse_args()
    node = tmp = None
    bs = args.bootstrap
    if bs is None:
        from tests.support.node import RunningNode

        tmp = tempfile.TemporaryDirectory(prefix="state-bench-")
        settings = dict(kv.split("=", 1) for kv in args.set)
        node = RunningNode(Path(tmp.name) / "data", settings=settings).start()
        bs = node.kafka_bootstrap
    try:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": bs})
        runs: dict[str, list[float]] = {"produce_records_per_s": [], "produce_idempotent_records_per_s": [],
                                        "transactions_per_s": [], "offset_commits_per_s": []}
        for _ in range(args.reps):
            for key, idempotent in (("produce_records_per_s", False), ("produce_idempotent_records_per_s", True)):
                runs[key].append(kafka_wl.produce(bs, _topic(admin, 1), args.records, args.size,
                                                  idempotent=idempotent)["records_per_s"])
            runs["transactions_per_s"].append(transactions(bs, _topic(admin, 6), args.txns, args.txn_records))
            runs["offset_commits_per_s"].append(offset_commits(bs, _topic(admin, 1), args.commits))
        result = {"server": "rockafka" if node else bs, "record_bytes": args.size, "reps": args.reps,
                  "median": {k: round(statistics.median(v), 1) for k, v in runs.items()},
                  "runs": {k: [round(x, 1) for x in v] for k, v in runs.items()}}
        print(json.dumps(result, indent=2))
    finally:
        if node is not None:
            node.stop()
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
