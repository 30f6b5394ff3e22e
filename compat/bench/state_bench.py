"""What coordinator state costs: produce, transaction and offset-commit throughput (confluent-kafka).

    python compat/bench/state_bench.py                          # a node from this checkout
    python compat/bench/state_bench.py --compare /path/to/other # and one from another checkout,
                                                                # side by side, with ratios
    python compat/bench/state_bench.py --bootstrap host:port    # any Kafka-protocol server

Cases, each run ``--reps`` times (fresh topics per run; with ``--compare`` both nodes run each
case in turn within a repetition, so load from other users of the machine hits both alike),
median reported:
1. ``produce``: ``--records`` records of ``--size`` bytes to one partition, acks=1, no idempotence
   (the plain produce path, which coordinator state must not slow down);
2. ``produce_idempotent``: the same with enable.idempotence (acks=all, sequence checks);
   for both, besides records/s, the node's CPU time per record (user + sys of its process, from
   /proc), which a busy machine disturbs far less than wall-clock throughput;
3. ``transactions``: one transactional producer, ``--txns`` transactions of ``--txn-records``
   records over 6 partitions, each with send_offsets_to_transaction for a group (as a
   consume-transform-produce loop does): AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit,
   EndTxn per transaction;
4. ``offset_commits``: a consumer committing one partition's offset synchronously
   ``--commits`` times.

Prints one JSON object. Every loop is bounded in count and time; the nodes are stopped in a
``finally``. Used to state the cost of keeping group, transaction and producer state in the log
(docs/design/coordinator-state.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from compat.bench.workloads import kafka_wl  # noqa: E402


class Server:
    """``rockafka serve`` from a checkout (its own code), on free loopback ports."""

    def __init__(self, checkout: Path, work: Path, settings: list[str]):
        from tests.support.node import free_port

        self.checkout = checkout
        self.log_path = work / f"{checkout.name}-{uuid.uuid4().hex[:6]}.log"
        ports = [free_port() for _ in range(5)]
        self.bootstrap = f"127.0.0.1:{ports[0]}"
        args = [sys.executable, "-m", "rockafka.cli", "serve", "--host", "127.0.0.1",
                "--data-dir", str(work / f"data-{ports[0]}"), "--kafka-port", str(ports[0]),
                "--namesrv-port", str(ports[1]), "--broker-port", str(ports[2]), "--ha-port", str(ports[3]),
                "--admin-port", str(ports[4])]
        for kv in settings:
            args += ["--set", kv]
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, cwd=str(checkout), stdout=self.log, stderr=subprocess.STDOUT,
                                     env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        deadline = time.monotonic() + 60
        while b"node_ready" not in self.log_path.read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"node from {checkout} did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
        self.log.close()


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


def run_cases(bs: str, server: Server | None, args: argparse.Namespace, runs: dict[str, list[float]]) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bs})
    for case, idempotent in (("produce", False), ("produce_idempotent", True)):
        cpu0 = server.cpu_seconds() if server else 0.0
        r = kafka_wl.produce(bs, _topic(admin, 1), args.records, args.size, idempotent=idempotent)
        runs.setdefault(f"{case}_records_per_s", []).append(r["records_per_s"])
        if server is not None:
            runs.setdefault(f"{case}_server_cpu_us_per_record", []).append(
                (server.cpu_seconds() - cpu0) / args.records * 1e6)
    runs.setdefault("transactions_per_s", []).append(transactions(bs, _topic(admin, 6), args.txns, args.txn_records))
    runs.setdefault("offset_commits_per_s", []).append(offset_commits(bs, _topic(admin, 1), args.commits))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="an already running server instead of a node from this checkout")
    ap.add_argument("--compare", type=Path, help="another checkout whose node runs every case beside this one")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--txns", type=int, default=300)
    ap.add_argument("--txn-records", type=int, default=20)
    ap.add_argument("--commits", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--set", action="append", default=[], help="key=value node setting (own nodes only)")
    args = ap.parse_args()
    servers: dict[str, Server | None] = {}
    work = tempfile.TemporaryDirectory(prefix="state-bench-")
    try:
        if args.bootstrap:
            targets = {"server": args.bootstrap}
            servers["server"] = None
        else:
            servers["this"] = Server(ROOT, Path(work.name), args.set)
            if args.compare:
                servers["other"] = Server(args.compare.resolve(), Path(work.name), args.set)
            targets = {name: s.bootstrap for name, s in servers.items()}
        runs: dict[str, dict[str, list[float]]] = {name: {} for name in targets}
        for rep in range(args.reps):
            order = list(targets) if rep % 2 == 0 else list(reversed(targets))
            for name in order:
                run_cases(targets[name], servers[name], args, runs[name])
        result = {"record_bytes": args.size, "reps": args.reps,
                  "median": {name: {k: round(statistics.median(v), 2) for k, v in r.items()} for name, r in runs.items()},
                  "runs": {name: {k: [round(x, 2) for x in v] for k, v in r.items()} for name, r in runs.items()}}
        if "other" in runs:
            result["compare"] = str(args.compare)
            result["ratio_this_to_other"] = {k: round(result["median"]["this"][k] / result["median"]["other"][k], 3)
                                             for k in result["median"]["this"]}
        print(json.dumps(result, indent=2))
    finally:
        for s in servers.values():
            if s is not None:
                s.stop()
        work.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
