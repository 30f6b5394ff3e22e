"""`make bench`: Rockafka side by side with Apache Kafka and Apache RocketMQ, same run, same
machine, same clients; results in compat/bench/results/<date>.md.

What runs (sizes per ``--size``; the results file records the ones used):
- Kafka protocol, confluent-kafka against Rockafka and Apache Kafka 4.4 (KRaft, one node):
  produce throughput for 1 KiB and 100 B records x acks=1/all x none/lz4; consume throughput
  from a backlog; end-to-end latency p50/p99/p99.9 at a fixed rate; a Spark batch read of a
  topic (rows/s), and Spark reading 1 tag of 10 from a 1 GiB topic with the ``rockafka`` source
  (tag pushed) vs the Kafka source (filtered in Spark) on one Rockafka node (``--spark-pushdown-mib``
  for a quicker size); produce throughput on topics of 8 .. 10,000 partitions; recovery time after
  kill -9 with a large log.
- Native protocol, the stock RocketMQ Java client (compat/bench/rocketmq-bench/) against
  Rockafka and Apache RocketMQ 5.5 (NameServer + broker): sync and async send of 1 KiB,
  pull and push consume, async send on topics of 8 .. 10,000 queues.
- Replication (``--only replication``): Rockafka master + slave with brokerRole=SYNC_MASTER vs
  Apache RocketMQ master + slave with SYNC_MASTER, the stock Java client (sync and async send);
  Rockafka ``acks=all`` with its slave in sync vs Apache Kafka with two brokers and
  ``replication.factor=2``, confluent-kafka. Every system here waits for one replica per write.
- py-spy profiles of Rockafka's process during produce and during fetch (top 15 functions).

Invariants:
- every server listens on 127.0.0.1 only and is stopped in a ``finally`` (also on SIGTERM /
  Ctrl-C), so nothing is left listening; data lives under compat/bench/results/tmp/ and is
  removed at the end;
- a system that fails to fetch, build or start, or a case that fails, becomes a FAILED cell
  with its reason; the rest of the run goes on;
- equivalent durability settings: Rockafka and RocketMQ ASYNC_FLUSH (flush every 500 ms) and
  ASYNC_MASTER without a slave; Kafka with replication factor 1, min.insync.replicas 1 and
  ``log.flush.interval.ms=500`` so it also flushes twice a second;
- a run is bounded: each case has its own deadline, and once ``--budget`` minutes are spent
  the remaining cases are reported as skipped;
- no system is measured beside an idle peer of the other protocol family's broker: Apache
  RocketMQ is started for the native and scale sections' turns only (after Rockafka's), and
  the replication section runs one system at a time (an idle RocketMQ took 11-14 % of the
  2-core machine). Apache Kafka's single node (4 % idle) and Rockafka's (1 %) stay up.

Nothing here asserts anything; it only measures (tests never run it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH / "peers"))

from compat.bench.workloads import kafka_wl, native_wl  # noqa: E402
from compat.bench.workloads.stats import Failure, Table, render_profile  # noqa: E402

ROCKAFKA_SETTINGS = {"flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER",
                     "flushIntervalCommitLog": 500}
KAFKA_OVERRIDES = {"default.replication.factor": 1, "min.insync.replicas": 1,
                   "log.flush.interval.ms": 500, "log.flush.scheduler.interval.ms": 500,
                   "auto.create.topics.enable": "true"}
ROCKETMQ_OVERRIDES = {"flushDiskType": "ASYNC_FLUSH", "brokerRole": "ASYNC_MASTER",
                      "flushIntervalCommitLog": 500}

SIZES = {
    # development: every path once, a couple of minutes
    "tiny": dict(reps=3, p1k=3_000, p100=10_000, consume=10_000, lat_rate=200, lat_seconds=2,
                 spark_mib=4, spark_pushdown_mib=16, native_seconds=2, scale_queues=[8, 256], scale_records=3_000, scale_seconds=3,
                 scale_native_seconds=2, scale_minutes=3, recovery_mib=32, recovery_reps=3, profile_records=10_000, tiered_mib=8),
    # the real run: about 20 minutes on a 2-core machine
    "full": dict(reps=3, p1k=60_000, p100=200_000, consume=200_000, lat_rate=500, lat_seconds=6,
                 spark_mib=128, spark_pushdown_mib=1024, native_seconds=3, scale_queues=[8, 256, 4096, 10_000],
                 scale_records=30_000, scale_seconds=5, scale_native_seconds=3, scale_minutes=4, recovery_mib=2048, recovery_reps=3,
                 profile_records=400_000, tiered_mib=64),
}


def log(event: str, **kw: object) -> None:
    stamp = time.strftime("%H:%M:%S")
    print(f"{stamp} {event} " + " ".join(f"{k}={v}" for k, v in kw.items()), file=sys.stderr, flush=True)


class Budget:
    def __init__(self, minutes: float) -> None:
        self.end = time.monotonic() + minutes * 60
        self.started = time.monotonic()

    def left(self) -> float:
        return self.end - time.monotonic()

    def spent(self) -> float:
        return time.monotonic() - self.started


class Skipped(Exception):
    pass


def attempt(table: Table | None, case: str, system: str, fn, budget: Budget, value=lambda r: r):
    """Run one measurement; record its value, or a Failure with the reason; return the result or None."""
    if budget.left() <= 0:
        if table is not None:
            table.add(case, system, Failure("skipped: time budget spent"))
        return None
    try:
        result = fn()
    except Exception as e:  # any failure is a reported cell, never the end of the run
        reason = f"{type(e).__name__}: {e}"
        log("case_failed", table=table.title if table else "-", case=case, system=system, reason=reason[:300])
        if table is not None:
            table.add(case, system, Failure(reason))
        return None
    if table is not None:
        table.add(case, system, value(result))
    log("case_done", table=table.title if table else "-", case=case, system=system,
        value=round(value(result), 3) if table is not None else "")
    return result


# -- machine and versions ------------------------------------------------------------------------

def sh(*cmd: str) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e})"


def interpreter_seconds(n: int = 20_000_000) -> float:
    """Seconds a pure-Python loop of ``n`` additions takes here, best of 3: the broker's CPU per
    message follows the interpreter's speed, which varies between machines and days more than
    the load average says, so results of two days compare only with this beside them."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        best = min(best, time.perf_counter() - t0)
    return best


def machine_details(data_root: Path) -> list[str]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f"{kb / 2**20:.1f} GiB"
    except (OSError, IndexError, ValueError):
        pass
    du = shutil.disk_usage(data_root)
    dev = sh("df", "--output=source,fstype", str(data_root)).splitlines()[-1]
    import confluent_kafka
    import pyspark

    commit = sh("git", "-C", str(ROOT), "rev-parse", "--short", "HEAD")
    java = sh("java", "-version").splitlines()[0] if shutil.which("java") else "not found"
    return [
        f"- CPU: {os.cpu_count()} cores, {cpu}; load average at start {os.getloadavg()[0]:.2f} "
        f"(the machine is shared; numbers are noisy, hence medians and ratios from the same run)",
        f"- Interpreter speed: a pure-Python loop of 20 M additions takes {interpreter_seconds():.2f} s (best of 3)",
        f"- Memory: {mem}",
        f"- Disk (data directories): {dev}, {du.total / 2**30:.0f} GiB, {du.free / 2**30:.0f} GiB free",
        f"- OS: {platform.platform()}",
        f"- Python {platform.python_version()}; Rockafka commit {commit}",
        f"- confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}); "
        f"PySpark {pyspark.__version__}",
        f"- {java}",
    ]


# -- systems -------------------------------------------------------------------------------------

def start_peer(name: str, make, attempts: int = 2):
    """Start a peer, once more on fresh ports if the first start fails (on a shared machine a free
    port can be taken between choosing and binding it); (peer, None) or (None, reason)."""
    reason = ""
    for i in range(attempts):
        log("starting", system=name, attempt=i + 1)
        peer = make(i)
        try:
            peer.start()
            return peer, None
        except Exception as e:
            reason = concise_reason(str(e))
            log("start_failed", system=name, reason=reason)
            try:
                peer.stop()
            except Exception as stop_error:
                log("stop_failed", system=name, error=stop_error)
    return None, reason


def concise_reason(text: str, limit: int = 600) -> str:
    """The first line of a start-up failure plus the log lines that name an error."""
    lines = text.splitlines()
    keep = lines[:1] + [ln.strip() for ln in lines[1:]
                        if any(w in ln for w in ("Exception", "ERROR", "Error", "error:", "FATAL", "Address already"))
                        and "|-INFO" not in ln]
    return " | ".join(keep)[:limit]


def stop_systems(systems) -> None:
    """Stop every (name, system) that started; a Rockafka node that does not stop is killed."""
    for name, obj in systems:
        if obj is None:
            continue
        try:
            obj.stop()
        except Exception as e:
            log("stop_failed", system=name, error=e)
            if name.startswith("rockafka"):
                obj.kill()


class PeerForItsTurn:
    """A single-node peer started for the section that measures it and stopped after its turn,
    so no other system is measured beside it idling: Apache RocketMQ's NameServer + broker took
    11 % of the 2-core machine doing nothing (Apache Kafka's single node 4 %, Rockafka's 1 %)."""

    def __init__(self, name: str, make, failed: dict[str, str], what: str):
        self.name, self.make, self.failed, self.what = name, make, failed, what
        self.peer = None

    def up(self):
        """The started peer, or None (the reason is in ``failed``)."""
        if self.peer is None and self.name not in self.failed:
            self.peer, reason = start_peer(self.name, self.make)
            if self.peer is None:
                self.failed[self.name] = f"{self.what} failed: {reason}"
        return self.peer

    def down(self) -> None:
        stop_systems(((self.name, self.peer),))
        self.peer = None


def kill9_kafka(peer) -> None:
    if peer.proc is not None and peer.proc.poll() is None:
        os.killpg(peer.proc.pid, signal.SIGKILL)
        peer.proc.wait(60)
    peer.proc = None


def dir_size(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file():
                total += p.stat().st_blocks * 512  # allocated bytes: preallocated files count as used
        except OSError:
            pass
    return total


# -- the run -------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Rockafka vs Apache Kafka and Apache RocketMQ")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--budget", type=float, default=36.0, help="minutes before remaining cases are skipped")
    ap.add_argument("--out", default=None, help="results file (default compat/bench/results/<date>.md)")
    ap.add_argument("--spark-pushdown-mib", type=int, default=None,
                    help="topic size of the Spark pushdown row (default: 1024 full, 16 tiny)")
    ap.add_argument("--only", default="",
                    help="comma list of sections: kafka,spark,scale,recovery,profile,native,replication,tiered")
    args = ap.parse_args(argv)
    sz = dict(SIZES[args.size])
    if args.spark_pushdown_mib:
        sz["spark_pushdown_mib"] = args.spark_pushdown_mib
    only = set(filter(None, args.only.split(",")))

    def want(section: str) -> bool:
        return not only or section in only

    budget = Budget(args.budget)
    tmp_root = BENCH / "results" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=tmp_root))
    out = Path(args.out) if args.out else BENCH / "results" / f"{dt.date.today().isoformat()}.md"

    def on_term(signum, frame):
        raise KeyboardInterrupt  # unwinds through every finally: servers are stopped

    signal.signal(signal.SIGTERM, on_term)

    tables: list[Table] = []
    profiles: list[str] = []
    notes: list[str] = []
    machine = machine_details(work)
    started = dt.datetime.now(dt.timezone.utc)
    physical = physical_references(work)
    node = kafka = None
    rocketmq: PeerForItsTurn | None = None
    try:
        from tests.support.node import RunningNode

        systems_kafka: dict[str, str] = {}  # name -> bootstrap
        systems_native: dict[str, str] = {}  # name -> NameServer address
        failed: dict[str, str] = {}  # name -> reason it never served
        node = RunningNode(work / "rockafka" / "data", settings=ROCKAFKA_SETTINGS, ready_timeout=120)
        try:
            node.start()
            systems_kafka["rockafka"] = node.kafka_bootstrap
        except Exception as e:
            failed["rockafka"] = f"rockafka serve did not start: {e}"[:500]
            node = None
        if any(want(s) for s in ("kafka", "spark", "recovery", "profile", "scale")):
            from kafka_peer import KafkaPeer

            kafka, reason = start_peer("kafka", lambda i: KafkaPeer(work / f"kafka{i}", overrides=KAFKA_OVERRIDES,
                                                                    heap="1g"))
            if kafka is not None:
                systems_kafka["kafka"] = kafka.bootstrap
            else:
                failed["kafka"] = f"Apache Kafka peer failed: {reason}"
        if want("native") or want("scale"):
            try:
                native_wl.build()
                if node is not None:
                    systems_native["rockafka"] = node.namesrv_addr
            except Exception as e:
                failed["rockafka-native"] = failed["rocketmq"] = f"native bench program not built: {e}"[:800]
            from rocketmq_peer import RocketMQPeer

            # started for the native and the scale sections' turns only (PeerForItsTurn)
            rocketmq = PeerForItsTurn("rocketmq", lambda i: RocketMQPeer(
                work / f"rocketmq{i}-{uuid.uuid4().hex[:4]}", overrides=ROCKETMQ_OVERRIDES, heap="1g"), failed,
                "Apache RocketMQ peer")
        failed.setdefault("rockafka-native", failed.get("rockafka", ""))
        if not failed["rockafka-native"]:
            del failed["rockafka-native"]
        kafka_part(sz, want, budget, systems_kafka, failed, tables, profiles, notes, node, kafka)
        if want("native"):
            native_part(sz, budget, node, systems_native, rocketmq, failed, tables)
        if want("replication"):
            # Kafka's and Rockafka's single nodes rest meanwhile; the section runs its systems one at a time
            replication_part(sz, budget, work, tables, notes)
        if want("tiered"):  # its own node and S3 server; the others rest meanwhile
            from compat.bench import tiered_bench

            tiered_bench.part(sz["tiered_mib"], sz["reps"], budget.left(), tables,
                              log=lambda text: log("tiered", text=text))
        # many-queue topics last: once created they stay, and must not weigh on the other cases
        if want("scale"):
            scale_native_part(sz, budget, node, systems_native, rocketmq, failed, tables)
            # Each protocol's scale runs on a broker without the other's thousands of queues (the
            # peers are separate brokers too): Rockafka restarts on a fresh data directory.
            if node is not None and "rockafka" in systems_kafka:
                node.stop()
                node = RunningNode(work / "rockafka-scale" / "data", settings=ROCKAFKA_SETTINGS, ready_timeout=120)
                try:
                    node.start()
                    systems_kafka["rockafka"] = node.kafka_bootstrap
                except Exception as e:
                    failed["rockafka"] = f"rockafka serve did not start again: {e}"[:500]
                    systems_kafka.pop("rockafka")
                    node = None

            def after_case(n: int) -> None:  # profile before the biggest topic exists
                if n == 4096 and want("profile") and node is not None and node.running():
                    profile_many_partitions(node, node.kafka_bootstrap, profiles, notes)

            scale_kafka_part(sz, budget, systems_kafka, failed, tables, after_case)
    except KeyboardInterrupt:
        notes.append("The run was interrupted; the tables hold what was measured until then.")
    except Exception:
        notes.append("The run stopped on an unexpected error:\n\n```\n" + traceback.format_exc()[-3000:] + "```")
        log("run_error", error=traceback.format_exc())
    finally:
        if rocketmq is not None:
            rocketmq.down()
        stop_systems((("kafka", kafka), ("rockafka", node)))
        shutil.rmtree(work, ignore_errors=True)
    write_results(out, args.size, sz, started, budget, machine, tables, profiles, notes, physical)
    log("results_written", path=out, minutes=round(budget.spent() / 60, 1))
    return 0


def fail_missing(table: Table, failed: dict[str, str], names: list[str]) -> None:
    """Cells of systems that never served get the reason instead of staying empty."""
    for name in names:
        key = "rockafka-native" if name == "rockafka" and table.peer == "rocketmq" else name
        if key in failed:
            for case in table.cases or ["(all cases)"]:
                cell = table.cells.get((case, name))
                if cell is None or not (cell.values or cell.failures):
                    table.add(case, name, Failure(failed[key]))


def kafka_part(sz, want, budget, systems, failed, tables, profiles, notes, node, kafka) -> None:
    def mark(table: Table) -> None:
        fail_missing(table, failed, ["rockafka", "kafka"])

    if want("kafka"):
        produce = Table("Kafka protocol: produce throughput (confluent-kafka, 1 partition)", "records/s",
                        "kafka", "higher")
        produce_mib = Table("Kafka protocol: produce throughput in MiB/s (same runs)", "MiB/s", "kafka", "higher")
        cases = [(size, acks, comp) for size in (1024, 100) for acks in ("1", "all") for comp in ("none", "lz4")]
        for size, acks, comp in cases:
            produce.cell(f"{size} B, acks={acks}, {comp}", "rockafka")
            produce_mib.cell(f"{size} B, acks={acks}, {comp}", "rockafka")
        for rep in range(sz["reps"]):
            for size, acks, comp in cases:
                case = f"{size} B, acks={acks}, {comp}"
                records = sz["p1k"] if size == 1024 else sz["p100"]
                for name, bs in systems.items():
                    topic = f"p{rep}-{size}-{acks}-{comp}-{uuid.uuid4().hex[:6]}"
                    r = attempt(produce, case, name,
                                lambda: (kafka_wl.create_topic(bs, topic, 1),
                                         kafka_wl.produce(bs, topic, records, size, acks=acks, compression=comp))[1],
                                budget, value=lambda r: r["records_per_s"])
                    if r is not None:
                        produce_mib.add(case, name, r["mib_per_s"])
        produce.notes.append(f"Records per run: {sz['p1k']:,} of 1 KiB, {sz['p100']:,} of 100 B; "
                             "linger.ms=5, batch.size=1 MB, idempotence off; a fresh topic per run.")
        for t in (produce, produce_mib):
            mark(t)
            tables.append(t)

        consume = Table("Kafka protocol: consume throughput from a backlog (1 KiB records, 1 partition)",
                        "records/s", "kafka", "higher")
        backlog: dict[str, str] = {}
        for name, bs in systems.items():
            topic = f"backlog-{uuid.uuid4().hex[:6]}"
            if attempt(None, "backlog", name, lambda: (kafka_wl.create_topic(bs, topic, 1),
                                                       kafka_wl.produce(bs, topic, sz["consume"], 1024)), budget):
                backlog[name] = topic
            else:
                consume.add("fresh consumer, from offset 0", name, Failure("could not write the backlog"))
        for rep in range(sz["reps"]):
            for name, topic in backlog.items():
                attempt(consume, "fresh consumer, from offset 0", name,
                        lambda: kafka_wl.consume(systems[name], topic, sz["consume"]), budget,
                        value=lambda r: r["records_per_s"])
        consume.notes.append(f"Backlog: {sz['consume']:,} records of 1 KiB; timed from assign to the last record.")
        mark(consume)
        tables.append(consume)

        lat = Table(f"Kafka protocol: end-to-end latency at {sz['lat_rate']} records/s (1 KiB, acks=1)",
                    "ms", "kafka", "lower")
        for rep in range(sz["reps"]):
            for name, bs in systems.items():
                topic = f"lat-{uuid.uuid4().hex[:6]}"

                def one(bs=bs, topic=topic):
                    kafka_wl.create_topic(bs, topic, 1)
                    return kafka_wl.latency(bs, topic, sz["lat_rate"], sz["lat_seconds"], 1024)

                r = attempt(None, "latency", name, one, budget)
                for key, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
                    lat.add(label, name, r[key] if r else Failure("latency run failed (see log)"))
        lat.notes.append(f"{sz['lat_rate'] * sz['lat_seconds']:,} records per run, linger.ms=0, consumer "
                         "fetch.wait.max.ms=100; latency = receive time - send time carried in the record.")
        mark(lat)
        tables.append(lat)

        if want("profile") and "rockafka" in systems and node is not None:
            profile_rockafka(sz, node, systems["rockafka"], backlog.get("rockafka"), profiles, notes)

    if want("spark"):
        spark_part(sz, budget, systems, mark, tables)
        spark_pushdown_part(sz, budget, tables)
    if want("recovery"):
        recovery_part(sz, budget, systems, mark, tables, node, kafka)


def scale_kafka_part(sz, budget, systems, failed, tables, after_case=lambda n: None) -> None:
    section = Budget(min(sz["scale_minutes"], budget.left() / 60))
    scale = Table("Scale, Kafka protocol: produce throughput vs partitions on one broker (1 KiB, acks=1)",
                  "records/s", "kafka", "higher")
    create = Table("Scale, Kafka protocol: time to create the topic (CreateTopics until every leader "
                   "is in Metadata; once per size)", "s", "kafka", "lower")
    for n in sz["scale_queues"]:
        case = f"{n:,} partitions"
        scale.cell(case, "rockafka")
        create.cell(case, "rockafka")
        for name, bs in systems.items():
            topic = f"scale{n}-{uuid.uuid4().hex[:6]}"
            secs = attempt(create, case, name, lambda: kafka_wl.create_topic(bs, topic, n, timeout=150), section)
            for rep in range(sz["reps"]):
                if secs is None:
                    scale.add(case, name, Failure(f"topic with {n:,} partitions not created"))
                    continue
                if attempt(scale, case, name,
                           lambda: kafka_wl.produce(bs, topic, sz["scale_records"], 1024, partitions=n, timeout=60,
                                                    seconds=sz["scale_seconds"], max_queued=2_000),
                           section, value=lambda r: r["records_per_s"]) is None:
                    break  # a run that timed out is not repeated: the time goes to the other system
        after_case(n)
    scale.notes.append(f"Up to {sz['scale_records']:,} records or {sz['scale_seconds']} s of sending per run "
                       "(then the queued rest is awaited and counted), round robin over every partition; "
                       f"this section stops after {sz['scale_minutes']} minutes (later cases: skipped).")
    for t in (scale, create):
        fail_missing(t, failed, ["rockafka", "kafka"])
        tables.append(t)


def profile_rockafka(sz, node, bs, backlog_topic, profiles, notes) -> None:
    from compat.bench.workloads.profile import Recorder

    try:
        topic = f"profile-{uuid.uuid4().hex[:6]}"
        kafka_wl.create_topic(bs, topic, 1)
        rec = Recorder(node.proc.pid, 300)
        r = kafka_wl.produce(bs, topic, sz["profile_records"], 1024)
        profiles.append(render_profile(f"Rockafka during produce ({sz['profile_records']:,} x 1 KiB, acks=1, "
                                       f"{r['records_per_s']:,.0f} records/s while sampled)", rec.finish()))
        rec = Recorder(node.proc.pid, 300)
        rates = [kafka_wl.consume(bs, topic, sz["profile_records"])["records_per_s"] for _ in range(3)]
        profiles.append(render_profile(f"Rockafka during fetch (the same {sz['profile_records']:,} records read "
                                       f"3 times by fresh consumers, {statistics.median(rates):,.0f} records/s "
                                       f"while sampled)", rec.finish()))
    except Exception as e:
        notes.append(f"Profiling failed: {type(e).__name__}: {e}")
        log("profile_failed", error=e)


def profile_many_partitions(node, bs, profiles, notes) -> None:
    """Produce round robin to 4,096 partitions under py-spy (run after the scale cases: the big
    topic must not weigh on them)."""
    from compat.bench.workloads.profile import Recorder

    try:
        topic = f"profile-many-{uuid.uuid4().hex[:6]}"
        kafka_wl.create_topic(bs, topic, 4096)
        rec = Recorder(node.proc.pid, 300)
        r = kafka_wl.produce(bs, topic, 50_000, 1024, partitions=4096, seconds=8, max_queued=2_000, timeout=60)
        profiles.append(render_profile(f"Rockafka during produce to a 4,096-partition topic ({r['records']:,} x 1 KiB "
                                       f"round robin, {r['records_per_s']:,.0f} records/s while sampled)",
                                       rec.finish()))
    except Exception as e:
        notes.append(f"Profiling (many partitions) failed: {type(e).__name__}: {e}")
        log("profile_failed", error=e)


def spark_part(sz, budget, systems, mark, tables) -> None:
    table = Table(f"Spark batch read of a {sz['spark_mib']} MiB topic (4 partitions, 1 KiB records)",
                  "rows/s", "kafka", "higher")
    rows = sz["spark_mib"] * 1024
    topics = {}
    for name, bs in systems.items():
        topic = f"spark-{uuid.uuid4().hex[:6]}"
        if attempt(None, "spark data", name, lambda: (kafka_wl.create_topic(bs, topic, 4),
                                                      kafka_wl.produce(bs, topic, rows, 1024, partitions=4)), budget):
            topics[name] = topic
        else:
            table.add("read whole topic", name, Failure("could not write the topic"))
    reader = None
    try:
        from compat.bench.workloads.spark_wl import SparkReader

        reader = SparkReader()
        for rep in range(sz["reps"]):
            for name, topic in topics.items():
                attempt(table, "read whole topic", name, lambda: reader.read(systems[name], topic, rows), budget,
                        value=lambda r: r["rows_per_s"])
    except Exception as e:
        for name in topics:
            table.add("read whole topic", name, Failure(f"Spark: {type(e).__name__}: {e}"))
    finally:
        if reader is not None:
            reader.stop()
    table.notes.append("One SparkSession (local[2], spark_examples/common.py) for all runs; the time covers "
                       "planning, fetching and aggregating every value (count and sum of lengths).")
    mark(table)
    tables.append(table)


def spark_pushdown_part(sz, budget, tables) -> None:
    """Reading 1 tag of 10 with the ``rockafka`` source (tag pushed to the broker) vs Spark's Kafka
    source filtering in Spark: same fresh node, same topic, same session (spark_pushdown_bench)."""
    from compat.bench import spark_pushdown_bench as bench

    mib = sz["spark_pushdown_mib"]
    table = Table(f"Spark reading 1 tag of 10 from a {mib:,} MiB topic: pushdown vs Kafka source",
                  "as named in the case", "Kafka source", "lower")
    reps = max(1, sz["reps"] - 1)  # a warm-up round comes first; each round reads the topic twice
    if budget.left() < 60:
        table.add("seconds", "rockafka", Failure("skipped: time budget spent"))
    else:
        try:
            result = bench.measure(mib, reps, log=lambda text: log("spark_pushdown", text=text))
            for secs, nbytes, _ in result["runs"][bench.PUSHDOWN]:
                table.add("seconds", "rockafka", secs)
                table.add("MiB served by the broker", "rockafka", nbytes / 2**20)
            for secs, nbytes, _ in result["runs"][bench.KAFKA]:
                table.add("seconds", "Kafka source", secs)
                table.add("MiB served by the broker", "Kafka source", nbytes / 2**20)
            table.notes.append(bench.render(result).splitlines()[-1])
            log("spark_pushdown", ratio=bench.render(result).splitlines()[-1])
        except Exception as e:
            table.add("seconds", "rockafka", Failure(f"{type(e).__name__}: {e}"))
    table.notes.append("Rockafka column: `spark.read.format(\"rockafka\")` with `tags = 'T3'` pushed (the "
                       "broker filters); Kafka source column: `spark.read.format(\"kafka\")` on the same node "
                       "and topic, the tag matched in Spark on the `rmq.tags` header. local[2], one warm-up "
                       "round first; served bytes from the node's `rockafka_topic_bytes_out` counters.")
    tables.append(table)


def recovery_part(sz, budget, systems, mark, tables, node, kafka) -> None:
    table = Table(f"Recovery: start to serving after kill -9 ({sz['recovery_mib']:,} MiB written)",
                  "s", "kafka", "lower")
    sizes = {}
    records = sz["recovery_mib"] * 1024
    for name, bs in systems.items():
        topic = f"recovery-{uuid.uuid4().hex[:6]}"
        ok = attempt(None, "recovery data", name, lambda: (kafka_wl.create_topic(bs, topic, 1),
                                                           kafka_wl.produce(bs, topic, records, 1024)), budget)
        if not ok:
            table.add("kill -9, restart, until the topic answers", name, Failure("could not write the log"))
            continue
        data_dir = node.data_dir if name == "rockafka" else kafka.data_dir
        sizes[name] = dir_size(data_dir)
        for rep in range(sz["recovery_reps"]):
            def cycle(name=name, topic=topic):
                if name == "rockafka":
                    node.kill()
                    t0 = time.perf_counter()
                    node.start()
                else:
                    kill9_kafka(kafka)
                    t0 = time.perf_counter()
                    kafka.start()
                kafka_wl.watermark_ready(systems[name], topic, timeout=300)
                return time.perf_counter() - t0

            attempt(table, "kill -9, restart, until the topic answers", name, cycle, budget)
    table.notes.append("Data directory size on disk before the kills: " + ", ".join(
        f"{k} {v / 2**30:.2f} GiB" for k, v in sizes.items()) + ". Timed from spawning the process to the "
        "first successful ListOffsets of the last topic written (readiness probes poll every 50-200 ms).")
    mark(table)
    tables.append(table)


def _native_turns(node, systems: dict[str, str], rocketmq: PeerForItsTurn | None):
    """(name, NameServer address) of each system in turn: Rockafka's node (always running), then
    Apache RocketMQ, started for its turn and stopped after it (the caller's ``finally`` of the
    generator)."""
    if "rockafka" in systems and node is not None and node.running():
        yield "rockafka", systems["rockafka"]
    if rocketmq is not None and rocketmq.up() is not None:
        try:
            yield "rocketmq", rocketmq.peer.namesrv_addr
        finally:
            rocketmq.down()


def native_part(sz, budget, node, systems, rocketmq, failed, tables) -> None:
    send = Table("Native protocol: send throughput (stock RocketMQ Java client 5.5.0, 1 KiB, 8 queues)",
                 "messages/s", "rocketmq", "higher")
    consume = Table("Native protocol: consume throughput (the messages just sent, from offset 0)",
                    "messages/s", "rocketmq", "higher")
    sync_lat = Table("Native protocol: sync send latency (1 thread)", "ms", "rocketmq", "lower")
    send_cases = ["sync send, 1 thread", "sync send, 4 threads", "async send, 256 in flight"]
    consume_cases = ["pull (DefaultLitePullConsumer)", "push (DefaultMQPushConsumer)"]
    all_tables = [(send, send_cases), (sync_lat, ["p50", "p99"]), (consume, consume_cases)]
    for t, cases in all_tables:
        for c in cases:
            t.cell(c, "rockafka")
    secs = sz["native_seconds"]
    for name, ns in _native_turns(node, systems, rocketmq):
        for rep in range(sz["reps"]):
            topic = f"nb{rep}_{uuid.uuid4().hex[:6]}"
            if attempt(None, "create-topic", name, lambda: native_wl.run("create-topic", ns, topic=topic,
                                                                         queues=8), budget) is None:
                for t, cases in all_tables:
                    for c in cases:
                        t.add(c, name, Failure("topic not created"))
                continue
            sent = 100 * 3  # each send case warms up with 100 sync sends
            r = attempt(send, send_cases[0], name, lambda: native_wl.run(
                "send-sync", ns, topic=topic, seconds=secs, threads=1), budget, value=lambda r: r["msgs_per_s"])
            if r:
                sent += r["messages"] + r.get("warmup_messages", 0)
                sync_lat.add("p50", name, r["p50_ms"])
                sync_lat.add("p99", name, r["p99_ms"])
            r = attempt(send, send_cases[1], name, lambda: native_wl.run(
                "send-sync", ns, topic=topic, seconds=secs, threads=4), budget, value=lambda r: r["msgs_per_s"])
            sent += r["messages"] + r.get("warmup_messages", 0) if r else 0
            r = attempt(send, send_cases[2], name, lambda: native_wl.run(
                "send-async", ns, topic=topic, seconds=secs, window=256), budget, value=lambda r: r["msgs_per_s"])
            sent += r["messages"] + r.get("warmup_messages", 0) if r else 0

            def consumed(mode, topic=topic, ns=ns, sent=sent):
                r = native_wl.run(mode, ns, topic=topic, expect=sent, idle=10, start=60)
                if r["messages"] < sent:
                    raise RuntimeError(f"{mode} got {r['messages']} of {sent} messages")
                return r

            attempt(consume, consume_cases[0], name, lambda: consumed("pull"), budget,
                    value=lambda r: r["msgs_per_s"])
            attempt(consume, consume_cases[1], name, lambda: consumed("push"), budget,
                    value=lambda r: r["msgs_per_s"])
    send.notes.append(f"{secs} s per send case after 100 warm-up sends and {native_wl.SEND_WARMUP_S} s of the "
                      "case's own load, not counted (the client's JIT); a fresh 8-queue topic per repetition; "
                      "one JVM per case; Rockafka's repetitions, then Apache RocketMQ's, started for its turn "
                      "(neither measured beside the other's broker).")
    consume.notes.append("Timed from the first to the last message received (client start-up and the first "
                         "rebalance are not counted); pull batch size 32 for both.")
    for t, _cases in all_tables:
        fail_missing(t, failed, ["rockafka", "rocketmq"])
        tables.append(t)


def replication_part(sz, budget, work, tables, notes) -> None:
    """Every write waits for one replica: Rockafka (master + slave, SYNC_MASTER; Kafka acks=all)
    against Apache RocketMQ master + slave (SYNC_MASTER) and Apache Kafka 2 brokers, RF=2."""
    from kafka_peer import KafkaCluster
    from rocketmq_peer import RocketMQPeer

    from tests.support.group import http_json, wait_until
    from tests.support.node import RunningNode

    send = Table("Replication, native protocol: send throughput to a master + slave with SYNC_MASTER "
                 "(stock RocketMQ Java client 5.5.0, 1 KiB, 8 queues)", "messages/s", "rocketmq", "higher")
    lat = Table("Replication, native protocol: sync send latency to a SYNC_MASTER group (1 thread)", "ms",
                "rocketmq", "lower")
    produce = Table("Replication, Kafka protocol: acks=all produce with one follower (Rockafka master + slave vs "
                    "Apache Kafka 2 brokers, replication.factor=2; confluent-kafka, 1 partition)", "records/s",
                    "kafka", "higher")
    send_cases = ["sync send, 1 thread", "sync send, 4 threads", "async send, 256 in flight"]
    produce_cases = ["1024 B, acks=all, none", "100 B, acks=all, none"]
    for t, cases in ((send, send_cases), (lat, ["p50", "p99"]), (produce, produce_cases)):
        for c in cases:
            t.cell(c, "rockafka")
    try:
        native_wl.build()
        built = True
    except Exception as e:
        built = False
        for t in (send, lat):
            for c in t.cases:
                for name in ("rockafka", "rocketmq"):
                    t.add(c, name, Failure(f"native bench program not built: {e}"[:400]))

    def native_reps(name: str, ns: str) -> None:
        for rep in range(sz["reps"]):
            topic = f"ha{rep}_{uuid.uuid4().hex[:6]}"
            if attempt(None, "create-topic", name, lambda: native_wl.run("create-topic", ns, topic=topic, queues=8),
                       budget) is None:
                continue
            r = attempt(send, send_cases[0], name, lambda: native_wl.run(
                "send-sync", ns, topic=topic, seconds=sz["native_seconds"], threads=1), budget,
                value=lambda r: r["msgs_per_s"])
            if r:
                lat.add("p50", name, r["p50_ms"])
                lat.add("p99", name, r["p99_ms"])
            attempt(send, send_cases[1], name, lambda: native_wl.run(
                "send-sync", ns, topic=topic, seconds=sz["native_seconds"], threads=4), budget,
                value=lambda r: r["msgs_per_s"])
            attempt(send, send_cases[2], name, lambda: native_wl.run(
                "send-async", ns, topic=topic, seconds=sz["native_seconds"], window=256), budget,
                value=lambda r: r["msgs_per_s"])

    def produce_reps(name: str, bs: str) -> None:
        for rep in range(sz["reps"]):
            for case in produce_cases:
                size = int(case.split()[0])
                records = sz["p1k"] if size == 1024 else sz["p100"]
                topic = f"ha{rep}-{size}-{uuid.uuid4().hex[:6]}"
                attempt(produce, case, name,
                        lambda: (kafka_wl.create_topic(bs, topic, 1, replication_factor=2),
                                 kafka_wl.produce(bs, topic, records, size, acks="all"))[1],
                        budget, value=lambda r: r["records_per_s"])

    # One system on the machine at a time: started, measured in every repetition, stopped before
    # the next one starts. An idle peer is not idle on 2 cores (RocketMQ's master + slave took
    # 14 % of the machine doing nothing, Kafka's two brokers 5 % more), and whichever system
    # was measured beside them paid for it.
    master = slave = None
    try:
        master = RunningNode(work / "ha-master" / "data", settings=dict(ROCKAFKA_SETTINGS, brokerRole="SYNC_MASTER"),
                             ready_timeout=120)
        master.start()
        slave = RunningNode(work / "ha-slave" / "data", ready_timeout=120, settings=dict(
            ROCKAFKA_SETTINGS, brokerRole="SLAVE", brokerId=1, namesrvAddr=master.namesrv_addr))
        slave.start()
        wait_until(lambda: http_json(f"{master.admin_url}/api/ha").get("inSyncSlaves") == 1, 60,
                   what="the Rockafka slave in sync")
    except Exception as e:
        stop_systems((("rockafka-slave", slave), ("rockafka-master", master)))
        master = slave = None
        for t in (send, lat, produce):
            for c in t.cases:
                t.add(c, "rockafka", Failure(f"Rockafka master + slave did not start: {e}"[:400]))
    if master is not None:
        try:
            if built:
                native_reps("rockafka", master.namesrv_addr)
            produce_reps("rockafka", master.kafka_bootstrap)
        finally:
            stop_systems((("rockafka-slave", slave), ("rockafka-master", master)))
    def peer_turn(label: str, system: str, make, what: str, affected: tuple, measure) -> None:
        """Start a peer, ``measure(peer)``, stop it; when it does not start, its cells say why."""
        peer, reason = start_peer(label, make)
        if peer is None:
            for t in affected:
                for c in t.cases:
                    t.add(c, system, Failure(f"{what} failed: {reason}"))
            return
        try:
            measure(peer)
        finally:
            stop_systems(((label, peer),))

    if built:
        peer_turn("rocketmq-ha", "rocketmq", lambda i: RocketMQPeer(
            work / f"rocketmq-ha{i}", overrides=dict(ROCKETMQ_OVERRIDES, brokerRole="SYNC_MASTER"), heap="1g",
            slaves=1), "Apache RocketMQ master + slave", (send, lat),
            lambda peer: native_reps("rocketmq", peer.namesrv_addr))
    peer_turn("kafka-rf2", "kafka", lambda i: KafkaCluster(
        work / f"kafka-rf2-{i}", brokers=2, heap="1g",
        overrides=dict(KAFKA_OVERRIDES, **{"default.replication.factor": 2, "offsets.topic.replication.factor": 2})),
        "Apache Kafka 2-broker cluster", (produce,), lambda peer: produce_reps("kafka", peer.bootstrap))
    send.notes.append("Only SEND_OK counts (a send answered SLAVE_NOT_AVAILABLE or FLUSH_SLAVE_TIMEOUT is an "
                      f"error); {sz['native_seconds']} s per case after 100 warm-up sends and {native_wl.SEND_WARMUP_S} s of "
                      "the case's own load, not counted (the client's JIT); Rockafka's slave and "
                      "RocketMQ's slave learn their master from the NameServer; ASYNC_FLUSH everywhere; "
                      "each system alone on the machine while measured (started, all repetitions, stopped).")
    produce.notes.append("Rockafka: brokerRole=SYNC_MASTER (acks=all waits for the in-sync slave whatever the role); "
                         "Apache Kafka: node 1 broker+controller, node 2 broker, min.insync.replicas=1 (ISR of 2, "
                         "so every write waits for the follower, as Rockafka's does); linger.ms=5, batch.size=1 MB.")
    tables += [send, lat, produce]


def scale_native_part(sz, budget, node, systems, rocketmq, failed, tables) -> None:
    turn_minutes = min(sz["scale_minutes"], budget.left() / 60) / 2  # each system's share of the section
    scale = Table("Scale, native protocol: async send throughput vs queues on one broker (1 KiB)",
                  "messages/s", "rocketmq", "higher")
    for n in sz["scale_queues"]:
        scale.cell(f"{n:,} queues", "rockafka")
    for name, ns in _native_turns(node, systems, rocketmq):
        section = Budget(turn_minutes)  # from the start of this system's turn (its start-up not counted)
        for n in sz["scale_queues"]:
            case = f"{n:,} queues"
            topic = f"nscale{n}_{uuid.uuid4().hex[:6]}"
            if section.left() <= 0:
                scale.add(case, name, Failure("skipped: time budget spent"))
                continue
            try:
                native_wl.run("create-topic", ns, topic=topic, queues=n, timeout=150)
            except Exception as e:
                log("case_failed", case=f"create {n} queues", system=name, reason=e)
                scale.add(case, name, Failure(f"topic with {n:,} queues not created: {e}"))
                continue
            for rep in range(sz["reps"]):
                attempt(scale, case, name, lambda: native_wl.run(
                    "send-async", ns, topic=topic, seconds=sz["scale_native_seconds"], window=256), section,
                    value=lambda r: r["msgs_per_s"])
    scale.notes.append(f"{sz['scale_native_seconds']} s of async sends (256 in flight) per run, after "
                       f"{native_wl.SEND_WARMUP_S} s of them not counted (the client's JIT); the producer "
                       "spreads messages over every queue round robin; topics created with the client's "
                       "createTopic (UPDATE_AND_CREATE_TOPIC to the broker); Rockafka's cases, then Apache "
                       "RocketMQ's, started for its turn, each with half of the section's minutes.")
    fail_missing(scale, failed, ["rockafka", "rocketmq"])
    tables.append(scale)


def _kafka_version() -> str:
    from kafka_peer import DEFAULT_KAFKA_VERSION

    return DEFAULT_KAFKA_VERSION


def physical_references(work: Path, mib: int = 512) -> dict | str:
    """What the machine does at all (compat/bench/physical.py), measured before any system runs."""
    from compat.bench import physical

    src = work / "physical-sendfile-source"
    try:
        src.write_bytes(os.urandom(64 << 20))
        result = {"write_no_fsync": physical.write_bandwidth(work, mib, None),
                  "write_fdatasync": physical.write_bandwidth(work, mib, 64),
                  "loopback_send_recv": physical.loopback_bandwidth(mib * 2),
                  "loopback_sendfile": physical.loopback_bandwidth(mib * 2, src)}
        log("physical", **{k: round(v) for k, v in result.items()})
        return result
    except Exception as e:  # a reference that cannot be taken is reported, the run goes on
        return f"{type(e).__name__}: {e}"
    finally:
        src.unlink(missing_ok=True)


def render_physical(physical: dict | str, tables: list[Table]) -> list[str]:
    """The references and the share of them each system's best case reaches (same run)."""
    head = ["## Physical references", "",
            "Measured by `compat/bench/physical.py` before any system started: 1 MiB sequential writes to the "
            "data directory's disk into the page cache and with fdatasync every 64 MiB; one TCP connection "
            "on 127.0.0.1 copying 1 MiB buffers (send/recv) and sending from a cached file (`sendfile`).", ""]
    if isinstance(physical, str):
        return head + [f"Not measured: {physical}", ""]
    rows = ["| reference | MiB/s |", "|---|---|"]
    rows += [f"| {label} | {physical[key]:,.0f} |" for key, label in (
        ("write_no_fsync", "sequential write, page cache"), ("write_fdatasync", "sequential write, fdatasync every 64 MiB"),
        ("loopback_send_recv", "loopback TCP, send/recv"), ("loopback_sendfile", "loopback TCP, sendfile"))]

    def median(title_start: str, case: str, system: str) -> float | None:
        for t in tables:
            if t.title.startswith(title_start):
                cell = t.cells.get((case, system))
                summary = cell.summary() if cell else None
                return summary.median if summary else None
        return None

    shares = ["", "| what reaches how much of it | Rockafka | Apache Kafka |", "|---|---|---|"]
    for label, title, case, scale, ref in (
            ("produce 1 KiB, acks=1, none (MiB/s) / page-cache write", "Kafka protocol: produce throughput in MiB/s",
             "1024 B, acks=1, none", 1.0, "write_no_fsync"),
            ("consume 1 KiB from a backlog (MiB/s) / loopback sendfile", "Kafka protocol: consume throughput",
             "fresh consumer, from offset 0", 1024 / (1 << 20), "loopback_sendfile")):
        cells = []
        for system in ("rockafka", "kafka"):
            m = median(title, case, system)
            cells.append("—" if m is None else f"{m * scale:,.0f} MiB/s = {m * scale / physical[ref]:.0%}")
        shares.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return head + rows + shares + [""]


def write_results(out, size_name, sz, started, budget, machine, tables, profiles, notes, physical=None) -> None:
    ended = dt.datetime.now(dt.timezone.utc)
    parts = [f"# Rockafka side by side with Apache Kafka and Apache RocketMQ — {started:%Y-%m-%d}", "",
             f"Run `make bench` (compat/bench/run_all.py --size {size_name}), {started:%H:%M}–{ended:%H:%M} UTC, "
             f"{budget.spent() / 60:.1f} minutes.", "", "## Machine", "", *machine, "",
             "## Settings", "",
             "- Rockafka: `rockafka serve` on 127.0.0.1, " + ", ".join(f"{k}={v}" for k, v in ROCKAFKA_SETTINGS.items())
             + " (single node, no slave).",
             f"- Apache Kafka {_kafka_version()}: single KRaft node (broker+controller) from Maven Central jars, shipped "
             "server.properties bound to 127.0.0.1, 1 GiB heap, " + ", ".join(f"{k}={v}" for k, v in
                                                                               KAFKA_OVERRIDES.items()) + ".",
             "- Apache RocketMQ 5.5.0: NameServer + one master broker from Maven Central jars, shipped broker.conf "
             "bound to 127.0.0.1, 1 GiB broker heap, " + ", ".join(f"{k}={v}" for k, v in
                                                                    ROCKETMQ_OVERRIDES.items()) + ", no slave.",
             "- Sizes used: " + ", ".join(f"{k}={v}" for k, v in sz.items()) + ".", "",
             "## Results", ""]
    for t in tables:
        parts.append(t.render())
    if physical is not None:
        parts += render_physical(physical, tables)
    parts += ["## Profiles of Rockafka", "",
              "Sampled with py-spy on the `rockafka serve` process while confluent-kafka produced to it and "
              "then fetched the same records back (separate from the measured runs). Only the thread "
              "holding the GIL is sampled, so the percentages are shares of the interpreter's CPU. "
              "Self % = samples with the function on top of the stack; total % = samples with it "
              "anywhere on the stack.", ""]
    parts += profiles or ["No profile was taken.\n"]
    if notes:
        parts += ["## Notes", "", *[n + "\n" for n in notes]]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts))
    raw = {t.title: {f"{c}|{s}": {"values": cell.values, "failures": [f.reason for f in cell.failures]}
                     for (c, s), cell in t.cells.items()} for t in tables}
    out.with_suffix(".json").write_text(json.dumps(raw, indent=1))


if __name__ == "__main__":
    sys.exit(main())
