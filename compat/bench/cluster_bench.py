"""Aggregate produce throughput of a cluster with 1, 2 and 3 broker groups, each group its own
``rockafka serve`` process (so a second group can use the second core), behind one NameServer.

    python compat/bench/cluster_bench.py [--records N] [--seconds S] [--reps R] [--out compat/bench/results/DATE-cluster]
    make bench-cluster

For each group count, a fresh cluster (a standalone NameServer and N single-node groups,
ASYNC_MASTER, ASYNC_FLUSH) and, ``--reps`` times on a fresh topic of 6 partitions/queues spread
over every group (Kafka CreateTopics, docs/design/cluster.md):

- Kafka protocol: confluent-kafka produces ``--records`` records of 1 KiB, acks=1, round robin
  over the 6 partitions (so each group gets its share), bootstrapped on the first group;
- native protocol: the stock RocketMQ Java client (compat/bench/rocketmq-bench) sends
  asynchronously, 256 in flight, 1 KiB, for ``--seconds``; it spreads messages over every
  writable queue of the route, so over every group.

Prints and writes medians (min–max) and the ratio to one group. The clients run on the same
two cores as the servers: the numbers say how much a second and third group add on this
machine, not what separate machines would give. Bounded: every phase has a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from compat.bench.workloads import kafka_wl, native_wl  # noqa: E402
from tests.support.node import RunningNode, StandaloneNamesrv  # noqa: E402

NAMES = ("broker-a", "broker-b", "broker-c")
PARTITIONS = 6  # divides over 1, 2 and 3 groups alike
SIZE = 1024
TMP_ROOT = ROOT / "compat" / "bench" / "results" / "tmp"  # ignored by git; removed after each cluster


def start_cluster(work: Path, groups: int) -> tuple[StandaloneNamesrv, list[RunningNode]]:
    ns = StandaloneNamesrv(work / "ns")
    nodes = [RunningNode(work / name, settings={
        "brokerName": name, "brokerRole": "ASYNC_MASTER", "flushDiskType": "ASYNC_FLUSH", "namesrvAddr": ns.addr,
        "kafka_node_id": 100 * i, "cluster_view_refresh_ms": 300, "registerNameServerPeriod": 1000})
        for i, name in enumerate(NAMES[:groups])]
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda n: n.start(), nodes))
    from confluent_kafka.admin import AdminClient

    want = {100 * i for i in range(groups)}
    deadline = time.monotonic() + 60
    for n in nodes:
        while {b for b in AdminClient({"bootstrap.servers": n.kafka_bootstrap}).list_topics(timeout=10).brokers} != want:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{n.data_dir.name} did not list every group within 60 s")
            time.sleep(0.2)  # the view follows the NameServer's registrations; nothing to wait on
    return ns, nodes


def spread_topic(bs: str) -> str:
    topic = f"cluster-bench-{uuid.uuid4().hex[:8]}"
    kafka_wl.create_topic(bs, topic, PARTITIONS)
    return topic


def wait_routed(namesrv: str, topic: str, groups: int) -> None:
    from gateway_native.client import Admin

    deadline = time.monotonic() + 60
    with Admin(namesrv) as admin:
        while time.monotonic() < deadline:
            try:
                if len({q.broker_name for q in admin.message_queues(topic)}) == groups:
                    return
            except Exception:
                pass
            time.sleep(0.2)
    raise RuntimeError(f"{topic} not routed on {groups} groups within 60 s")


def summary(values: list[float]) -> dict:
    return {"median": round(statistics.median(values)), "min": round(min(values)), "max": round(max(values)),
            "n": len(values)}


def run(groups: int, records: int, seconds: float, reps: int) -> dict:
    out: dict[str, list[float]] = {"kafka": [], "native": []}
    with tempfile.TemporaryDirectory(prefix="cluster-bench-", dir=TMP_ROOT) as tmp:
        ns, nodes = start_cluster(Path(tmp), groups)
        try:
            bs = nodes[0].kafka_bootstrap
            for rep in range(reps):
                topic = spread_topic(bs)
                r = kafka_wl.produce(bs, topic, records, SIZE, acks="1", partitions=PARTITIONS)
                out["kafka"].append(r["records_per_s"])
                print(json.dumps({"groups": groups, "case": "kafka", "rep": rep, **r}), flush=True)
            for rep in range(reps):
                topic = spread_topic(bs)
                wait_routed(ns.addr, topic, groups)
                r = native_wl.run("send-async", ns.addr, topic=topic, seconds=int(seconds), window=256, size=SIZE)
                out["native"].append(r["msgs_per_s"])
                print(json.dumps({"groups": groups, "case": "native", "rep": rep, **r}), flush=True)
        finally:
            for n in nodes:
                try:
                    n.stop()
                except Exception:
                    n.kill()
            ns.stop()
    return {case: summary(v) for case, v in out.items()}


def write(out: Path, results: dict[int, dict], args: argparse.Namespace, started: str, load: str) -> None:
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    out.with_suffix(".json").write_text(json.dumps({"started": started, "records": args.records, "seconds": args.seconds,
                                                    "reps": args.reps, "results": results}, indent=2) + "\n")
    base = {case: results[1][case]["median"] for case in ("kafka", "native")} if 1 in results else {}
    lines = [f"# Rockafka: aggregate produce throughput with 1, 2 and 3 broker groups — {started[:10]}", "",
             f"Run `make bench-cluster` (compat/bench/cluster_bench.py), started {started}; commit {commit}.", "",
             "## Machine", "",
             f"- {os.cpu_count()} cores, shared; load average at start {load} (noisy: medians of {args.reps} runs)",
             f"- Python {platform.python_version()}, {platform.platform()}", "",
             "## Settings", "",
             "- One standalone NameServer; N groups of one node each (`rockafka serve`, its own process), "
             "ASYNC_MASTER, ASYNC_FLUSH, no slave; every process and client on the same 2 cores, loopback.",
             f"- A fresh topic of {PARTITIONS} partitions per run, created through Kafka CreateTopics and so "
             "spread over every group in contiguous blocks (1 group: 6; 2: 3+3; 3: 2+2+2).",
             f"- Kafka: confluent-kafka, {args.records:,} records of 1 KiB, acks=1, linger.ms=5, round robin over the "
             "partitions, bootstrapped on broker-a.",
             f"- Native: stock RocketMQ Java client 5.5.0 (compat/bench/rocketmq-bench), async send, 256 in flight, "
             f"1 KiB, {args.seconds:g} s per run; the client spreads messages over every writable queue.", "",
             "## Results", "",
             "Unit: records (messages) per second; median (min–max, n = runs); ratio = median / the 1-group median.", "",
             "| groups | Kafka protocol | ratio | native protocol | ratio |", "|---|---|---|---|---|"]
    for groups, r in sorted(results.items()):
        cells = []
        for case in ("kafka", "native"):
            s = r[case]
            cells.append(f"{s['median']:,} ({s['min']:,}–{s['max']:,}, n={s['n']})")
            cells.append(f"{s['median'] / base[case]:.2f}" if base.get(case) else "—")
        lines.append(f"| {groups} | " + " | ".join(cells) + " |")
    lines += ["", "Both clients and all servers share two cores: a group is one Python process whose hot path "
              "holds the GIL, so a second group can take the second core only while the client leaves it free. "
              "On separate machines each group adds its own cores; here the gain is bounded by the client.", ""]
    out.with_suffix(".md").write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=150_000)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--groups", default="1,2,3")
    ap.add_argument("--out", type=Path,
                    default=ROOT / "compat" / "bench" / "results" / f"{datetime.now(timezone.utc):%Y-%m-%d}-cluster")
    args = ap.parse_args()
    native_wl.build()
    started = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = f"{os.getloadavg()[0]:.2f}"
    results = {}
    TMP_ROOT.mkdir(parents=True, exist_ok=True)
    for groups in (int(g) for g in args.groups.split(",")):
        results[groups] = run(groups, args.records, args.seconds, args.reps)
        print(json.dumps({"groups": groups, **results[groups]}), flush=True)
    write(args.out, results, args, started, load)
    print(f"written {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
