"""`make bench-quick`: a regression benchmark to run before and after a hot-path change (< 3 min).

One Rockafka node (ASYNC_FLUSH, as in `make bench`), and by default its peers side by side in the
same run (Apache Kafka for the Kafka-protocol rows, Apache RocketMQ for the native row), so the
ratios are fair on a shared machine. The cases:

- Kafka protocol, confluent-kafka: produce 1 KiB and 100 B records (acks=1, no compression,
  1 partition) and consume a 1 KiB backlog from offset 0;
- native protocol, the stock RocketMQ Java client: sync send of 1 KiB, 1 thread, 8 queues.

Each case runs ``--reps`` times (median printed) in records/s. The run is compared with
``--baseline`` (default compat/bench/results/quick-baseline.json, rec/s per case from an earlier
run; ``--save-baseline`` writes it) and with the peers when they ran. ``--peers none`` skips the
peers (about a minute); ``--profile produce|fetch`` samples Rockafka with py-spy during that case
and prints the top functions. ``--case native`` (one ASYNC_MASTER node) and ``--case sync-master``
(a SYNC_MASTER master + slave) run only the native sync send, no peers, and print each broker's
CPU microseconds per message (less load-dependent than rec/s); ``--native-profile FILE`` adds a
``py-spy --native`` profile of the first rep. ``--case e2e`` runs only the Kafka end-to-end
latency case of `make bench` (confluent-kafka, 1 KiB at 500 records/s, acks=1) against one node
and Apache Kafka in the same run (``--peers none``: the node alone; ``--before REF``: a node of
that tree too), with the same ``--native-profile``.

Nothing here asserts anything; it only measures (tests never run it).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH / "peers"))

from compat.bench.run_all import (KAFKA_OVERRIDES, ROCKAFKA_SETTINGS, ROCKETMQ_OVERRIDES,  # noqa: E402
                                  interpreter_seconds, start_peer, stop_systems)
from compat.bench.workloads import kafka_wl, native_wl  # noqa: E402
from compat.bench.workloads import threads as thread_cpu  # noqa: E402
from compat.bench.workloads.stats import render_profile  # noqa: E402

DEFAULT_BASELINE = BENCH / "results" / "quick-baseline.json"
CASES = ("produce 1 KiB", "produce 100 B", "consume 1 KiB", "native sync send")
PEER_OF = {"produce 1 KiB": "kafka", "produce 100 B": "kafka", "consume 1 KiB": "kafka",
           "native sync send": "rocketmq"}


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (all its threads), from /proc."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kafka_cases(systems: dict[str, str], reps: int, n1k: int, n100: int, profile_pid: int | None,
                profile: str, pids: dict[str, int], cpu: dict,
                threads: dict | None = None) -> dict[str, dict[str, list[float]]]:
    """rec/s lists per system and Kafka-protocol case; the systems take turns case by case so a
    burst of load from elsewhere on the machine falls on both. ``cpu[name][case]`` collects the
    broker process's CPU microseconds per record (for the systems in ``pids``): unlike rec/s it
    hardly depends on what else the machine runs. ``threads`` (when given) collects, for
    "rockafka", the per-thread split of that CPU per case (workloads/threads.py)."""
    out = {name: {c: [] for c in CASES[:3]} for name in systems}

    def timed(name: str, case: str, records: int, fn):
        before = cpu_seconds(pids.get(name))
        split = threads is not None and name == "rockafka"
        tb = thread_cpu.snapshot(pids[name]) if split else None
        r = fn()
        if name in pids:
            cpu.setdefault(name, {}).setdefault(case, []).append((cpu_seconds(pids[name]) - before) * 1e6 / records)
        if split:
            ta = thread_cpu.snapshot(pids[name])
            threads.setdefault(case, []).append((tb, ta, records))
        return r

    backlog = {}
    for name, bs in systems.items():  # warm-up: first connections, first segment files mapped
        warm = f"qb-warm-{uuid.uuid4().hex[:6]}"
        kafka_wl.create_topic(bs, warm, 1)
        kafka_wl.produce(bs, warm, n1k // 4, 1024)
        backlog[name] = f"qb-backlog-{uuid.uuid4().hex[:6]}"
        kafka_wl.create_topic(bs, backlog[name], 1)
        kafka_wl.produce(bs, backlog[name], n1k, 1024)
    for rep in range(reps):
        for case, size, n in (("produce 1 KiB", 1024, n1k), ("produce 100 B", 100, n100)):
            for name, bs in systems.items():
                topic = f"qb-{size}-{rep}-{uuid.uuid4().hex[:6]}"
                kafka_wl.create_topic(bs, topic, 1)
                sample = name == "rockafka" and profile == "produce" and size == 1024 and rep == 0
                rec = _recorder(profile_pid) if sample else None
                r = timed(name, case, n, lambda: kafka_wl.produce(bs, topic, n, size, acks="1", compression="none"))
                _print_profile(rec, f"produce {n:,} x 1 KiB, {r['records_per_s']:,.0f} rec/s while sampled")
                out[name][case].append(r["records_per_s"])
        for name, bs in systems.items():
            rec = _recorder(profile_pid) if name == "rockafka" and profile == "fetch" and rep == 0 else None
            r = timed(name, "consume 1 KiB", n1k, lambda: kafka_wl.consume(bs, backlog[name], n1k))
            _print_profile(rec, f"fetch {n1k:,} x 1 KiB, {r['records_per_s']:,.0f} rec/s while sampled")
            out[name]["consume 1 KiB"].append(r["records_per_s"])
    return out


def native_topic(ns: str) -> str:
    topic = f"qb_{uuid.uuid4().hex[:6]}"
    native_wl.run("create-topic", ns, topic=topic, queues=8)
    return topic


def _recorder(pid: int | None):
    if pid is None:
        return None
    from compat.bench.workloads.profile import Recorder

    return Recorder(pid, 120)


def _print_profile(rec, title: str) -> None:
    if rec is not None:
        print(render_profile(f"Rockafka during {title}", rec.finish(), n=20), flush=True)


def export_source(ref: str, dest: Path) -> Path:
    """The tree of ``ref`` (git archive) plus the generated files a checkout does not hold."""
    dest.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    for generated in ("gateway_grpc/proto", "rockafka/console/static/htmx.min.js"):
        src, dst = ROOT / generated, dest / generated
        if src.is_dir():
            shutil.copytree(src, dst, dirs_exist_ok=True)
        elif src.is_file() and not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    return dest


def _before_node(ref: str, work: Path):
    """A started node of the tree at git ``ref`` (``--before``), beside the node under test."""
    from tests.support.node import RunningNode

    node = RunningNode(work / "before" / "data", settings=ROCKAFKA_SETTINGS, ready_timeout=120)
    node.command_prefix = ["env", f"PYTHONPATH={export_source(ref, work / 'before-src')}"]
    node.start()
    return node


def _kafka_peer(work: Path):
    """A started Apache Kafka peer, or None (logged) when it would not start."""
    from kafka_peer import KafkaPeer

    kafka, reason = start_peer("kafka", lambda i: KafkaPeer(work / f"kafka{i}", overrides=KAFKA_OVERRIDES,
                                                            heap="1g"))
    if kafka is None:
        log(f"Apache Kafka did not start: {reason}")
    return kafka


def _native_profiler(pid: int, seconds: float, out: str) -> subprocess.Popen:
    """``py-spy record --native --gil`` of ``pid`` for ``seconds`` into ``out`` (raw collapsed
    stacks); SIGINT ends it early. --native cannot sample --nonblocking: py-spy pauses the
    process for each sample; --gil: only the thread holding the interpreter (idle threads
    waiting on locks look busy to a native sampler)."""
    from compat.bench.workloads.profile import py_spy

    exe = py_spy()
    if exe is None:
        raise SystemExit("--native-profile needs py-spy (`make bench-quick` installs it; or pip install py-spy)")
    return subprocess.Popen([exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate",
                             "100", "--native", "--gil", "--format", "raw", "--output", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def native_only(args) -> int:
    """``--case native`` / ``--case sync-master``: the native sync send alone (1 thread, 1 KiB, 8 queues)
    against one ASYNC_MASTER node or a SYNC_MASTER master + slave, with each broker's CPU per message."""
    from tests.support.group import http_json, wait_until
    from tests.support.node import RunningNode

    tmp_root = BENCH / "results" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="quick-", dir=tmp_root))
    load_at_start = os.getloadavg()[0]
    master = slave = None
    rates: list[float] = []
    p50s: list[float] = []
    cpu: dict[str, list[float]] = {"master": [], "slave": []}
    splits: dict[str, list] = {}
    tid_names: dict[str, dict[int, str]] = {}
    try:
        role = "SYNC_MASTER" if args.case == "sync-master" else "ASYNC_MASTER"
        master = RunningNode(work / "master" / "data", settings=dict(ROCKAFKA_SETTINGS, brokerRole=role),
                             ready_timeout=120)
        master.start()
        if args.case == "sync-master":
            slave = RunningNode(work / "slave" / "data", ready_timeout=120, settings=dict(
                ROCKAFKA_SETTINGS, brokerRole="SLAVE", brokerId=1, namesrvAddr=master.namesrv_addr))
            slave.start()
            wait_until(lambda: http_json(f"{master.admin_url}/api/ha").get("inSyncSlaves") == 1, 60,
                       what="the slave in sync")
        native_wl.build()
        topic = native_topic(master.namesrv_addr)
        native_wl.run("send-sync", master.namesrv_addr, topic=topic, seconds=1, threads=1, warmup=0)  # broker warm
        for rep in range(args.reps):
            prof: list[subprocess.Popen] = []
            before: dict[str, float] = {}
            tbefore: dict[str, dict] = {}

            def measuring() -> None:  # called within this iteration: no late-binding trap
                """After the client's warm-up: sample the brokers' CPU, start the profilers."""
                if rep == 0 and args.native_profile:
                    prof.extend(_native_profiler(p.proc.pid, args.native_seconds + 1, out)
                                for p, out in ((master, args.native_profile), (slave, args.native_profile + ".slave"))
                                if p is not None)
                before.update({n: cpu_seconds(p.proc.pid) for n, p in (("master", master), ("slave", slave)) if p})
                tbefore.update({n: thread_cpu.snapshot(p.proc.pid) for n, p in (("master", master), ("slave", slave))
                                if p and args.threads})
            if args.async_window:
                r = native_wl.run("send-async", master.namesrv_addr, topic=topic, seconds=args.native_seconds,
                                  window=args.async_window, on_measure=measuring)
            else:
                r = native_wl.run("send-sync", master.namesrv_addr, topic=topic, seconds=args.native_seconds,
                                  threads=args.send_threads, on_measure=measuring)
            # the brokers' CPU from the start of the counted part to the client's result, which
            # comes right after its end (the client's shutdown costs the brokers next to nothing)
            n = r.get("sent") or r.get("messages") or r["msgs_per_s"] * args.native_seconds
            for name, p in (("master", master), ("slave", slave)):
                if p:
                    cpu[name].append((cpu_seconds(p.proc.pid) - before[name]) * 1e6 / n)
                    if args.threads:
                        splits.setdefault(name, []).append((tbefore[name], thread_cpu.snapshot(p.proc.pid), n))
            rates.append(r["msgs_per_s"])
            p50s.append(r.get("p50_ms", 0.0))
            for pr in prof or ():
                pr.send_signal(2)
                pr.wait(60)
        if args.threads:
            tid_names = {n: thread_cpu.names(p.proc.pid) for n, p in (("master", master), ("slave", slave)) if p}
    finally:
        stop_systems((("rockafka-slave", slave), ("rockafka", master)))
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nbench-quick --case {args.case}, median of {args.reps}; load average {load_at_start:.1f} at start; "
          f"a Python loop of 20 M additions takes {interpreter_seconds():.2f} s")
    what = (f"async send, {args.async_window} in flight" if args.async_window
            else f"sync send, {args.send_threads} thread(s)")
    print(f"native {what}: {statistics.median(rates):,.0f} msg/s (runs: "
          + ", ".join(f"{x:,.0f}" for x in rates) + f"), p50 {statistics.median(p50s):.3f} ms")
    for name, v in cpu.items():
        if v:
            print(f"broker CPU per message ({name}): {statistics.median(v):.1f} us (runs: "
                  + ", ".join(f"{x:.1f}" for x in v) + ")")
    for name, runs in splits.items():
        print(thread_cpu.render(f"\n{name} broker CPU by thread, us per message (median rep)",
                                _median_split(runs, tid_names.get(name, {}))))
    for what, out in (("master", args.native_profile), ("slave", args.native_profile + ".slave")):
        if out and Path(out).exists():
            print(render_profile(f"{what} broker, py-spy --native --gil (the thread holding the GIL)", Path(out).read_text(), n=25))
    return 0


def latency_only(args) -> int:
    """``--case e2e``: end-to-end latency (a producer at 500 records/s, a consumer long-polling)
    against one Rockafka node and, unless ``--peers`` leaves it out, Apache Kafka in the same run
    (``--before REF``: also a node of that tree), the systems taking turns rep by rep; p50/p99/
    p99.9 per rep, Rockafka's CPU per record, and with ``--native-profile`` a ``py-spy
    --native`` profile of its first rep."""
    from tests.support.node import RunningNode

    tmp_root = BENCH / "results" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="quick-", dir=tmp_root))
    load_at_start = os.getloadavg()[0]
    rate, seconds = 500, max(args.native_seconds, 3)
    peers = set() if args.peers == "none" else set(filter(None, args.peers.split(",")))
    runs: dict[str, list[dict]] = {}
    cpu: dict[str, list[float]] = {}
    node = before = kafka = None
    try:
        node = RunningNode(work / "rockafka" / "data", settings=ROCKAFKA_SETTINGS, ready_timeout=120)
        node.start()
        systems = {"rockafka": (node.kafka_bootstrap, node.proc.pid)}
        if args.before:
            before = _before_node(args.before, work)
            systems["before"] = (before.kafka_bootstrap, before.proc.pid)
        if "kafka" in peers:
            kafka = _kafka_peer(work)
            if kafka is not None:
                systems["kafka"] = (kafka.bootstrap, None)
        for rep in range(args.reps):
            for name, (bs, pid) in systems.items():
                topic = f"qb-lat-{rep}-{uuid.uuid4().hex[:6]}"
                kafka_wl.create_topic(bs, topic, 1)
                prof = None
                if rep == 0 and args.native_profile and name == "rockafka":
                    prof = _native_profiler(pid, seconds + 3, args.native_profile)
                    time.sleep(1.5)
                before_cpu = cpu_seconds(pid) if pid else 0.0
                r = kafka_wl.latency(bs, topic, rate, seconds, 1024)
                if pid:
                    cpu.setdefault(name, []).append((cpu_seconds(pid) - before_cpu) * 1e6 / r["records"])
                runs.setdefault(name, []).append(r)
                if prof is not None:
                    prof.send_signal(2)
                    prof.wait(60)
    finally:
        stop_systems((("kafka", kafka), ("rockafka-before", before), ("rockafka", node)))
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nbench-quick --case e2e, {rate} records/s for {seconds} s, median of {args.reps}; "
          f"load average {load_at_start:.1f} at start (lower is better; 'vs kafka' > 1 is slower)")
    peer = runs.get("kafka")
    for name, rs in runs.items():
        print(f"{name}:")
        for key in ("p50_ms", "p99_ms", "p999_ms"):
            vals = [r[key] for r in rs]
            med = statistics.median(vals)
            ratio = ""
            if peer and name != "kafka":
                ratio = f"  {med / statistics.median([r[key] for r in peer]):.2f}x vs kafka"
            print(f"  {key[:-3]}: {med:.3f} ms (runs: " + ", ".join(f"{v:.3f}" for v in vals) + f"){ratio}")
        if cpu.get(name):
            print(f"  broker CPU per record: {statistics.median(cpu[name]):.1f} us (runs: "
                  + ", ".join(f"{x:.1f}" for x in cpu[name]) + ")")
    if args.native_profile and Path(args.native_profile).exists():
        print(render_profile("rockafka, py-spy --native --gil (the thread holding the GIL)",
                             Path(args.native_profile).read_text(), n=25))
    return 0


def _median_split(runs: list, tid_names: dict[int, str]) -> dict[str, float]:
    """Per thread kind, the median over reps of microseconds per unit."""
    per_rep = [thread_cpu.split(b, a, tid_names, n) for b, a, n in runs]
    keys = {k for rep in per_rep for k in rep}
    med = {k: statistics.median([rep.get(k, 0.0) for rep in per_rep]) for k in keys}
    return dict(sorted(med.items(), key=lambda kv: -kv[1]))


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="quick regression benchmark of Rockafka's hot paths")
    ap.add_argument("--peers", default="kafka,rocketmq", help="comma list of kafka,rocketmq, or none")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--records", type=int, default=300_000, help="1 KiB records per produce/consume run")
    ap.add_argument("--native-seconds", type=int, default=2)
    ap.add_argument("--no-native", action="store_true", help="skip the RocketMQ Java client case")
    ap.add_argument("--baseline", type=Path, default=DEFAULT_BASELINE)
    ap.add_argument("--save-baseline", action="store_true", help="write this run's medians as the baseline")
    ap.add_argument("--profile", choices=("", "produce", "fetch"), default="")
    ap.add_argument("--before", default="", metavar="GIT_REF",
                    help="also run a node of this commit (e.g. main) side by side: before/after in one run")
    ap.add_argument("--json", type=Path, default=None, help="also write the medians here")
    ap.add_argument("--case", choices=("all", "native", "sync-master", "e2e"), default="all",
                    help="native: only the native sync send case; sync-master: only a native sync send to a "
                         "SYNC_MASTER master + slave (no peers); both print broker CPU microseconds per message; "
                         "e2e: only the Kafka end-to-end latency case, with Apache Kafka unless --peers leaves it out")
    ap.add_argument("--send-threads", type=int, default=1, help="--case native/sync-master: sender threads")
    ap.add_argument("--async-window", type=int, default=0,
                    help="--case native/sync-master: async sends with this many in flight instead of sync sends")
    ap.add_argument("--native-profile", default="", metavar="FILE",
                    help="with --case native|sync-master|e2e: py-spy --native collapsed stacks of the (master) "
                         "broker during the first rep, written to FILE, top frames printed")
    ap.add_argument("--threads", action="store_true",
                    help="also print how each broker's CPU splits over its threads per case (/proc/PID/task)")
    args = ap.parse_args(argv)
    if args.case == "e2e":
        return latency_only(args)
    if args.case != "all":
        return native_only(args)
    peers = set() if args.peers == "none" else set(filter(None, args.peers.split(",")))
    if args.no_native:
        peers.discard("rocketmq")

    from tests.support.node import RunningNode

    started = time.monotonic()
    load_at_start = os.getloadavg()[0]
    tmp_root = BENCH / "results" / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="quick-", dir=tmp_root))
    results: dict[str, dict[str, list[float]]] = {}
    cpu: dict[str, dict[str, list[float]]] = {}
    threads: dict[str, list] | None = {} if args.threads else None
    tid_names: dict[int, str] = {}
    node = before = kafka = rocketmq = None
    try:
        node = RunningNode(work / "rockafka" / "data", settings=ROCKAFKA_SETTINGS, ready_timeout=120)
        node.start()
        if args.before:
            before = _before_node(args.before, work)
        if "kafka" in peers:
            kafka = _kafka_peer(work)
        if not args.no_native:
            native_wl.build()
            if "rocketmq" in peers:
                from rocketmq_peer import RocketMQPeer

                rocketmq, reason = start_peer("rocketmq", lambda i: RocketMQPeer(
                    work / f"rocketmq{i}", overrides=ROCKETMQ_OVERRIDES, heap="1g"))
                if rocketmq is None:
                    log(f"Apache RocketMQ did not start: {reason}")
        nodes = {"rockafka": node, **({"before": before} if before is not None else {})}
        kafka_systems = {name: n.kafka_bootstrap for name, n in nodes.items()}
        if kafka is not None:
            kafka_systems["kafka"] = kafka.bootstrap
        log("kafka-protocol cases on " + ", ".join(kafka_systems))
        pids = {name: n.proc.pid for name, n in nodes.items()}
        results.update(kafka_cases(kafka_systems, args.reps, args.records, args.records * 3,
                                   node.proc.pid if args.profile else None, args.profile, pids, cpu, threads))
        if threads is not None:
            tid_names = thread_cpu.names(node.proc.pid)
        if not args.no_native:
            native = {name: n.namesrv_addr for name, n in nodes.items()}
            if rocketmq is not None:
                native["rocketmq"] = rocketmq.namesrv_addr
            log("native case on " + ", ".join(native))
            topics = {name: native_topic(ns) for name, ns in native.items()}
            for _rep in range(args.reps):
                for name, ns in native.items():
                    r = native_wl.run("send-sync", ns, topic=topics[name], seconds=args.native_seconds, threads=1)
                    results.setdefault(name, {}).setdefault("native sync send", []).append(r["msgs_per_s"])
    finally:
        stop_systems((("rocketmq", rocketmq), ("kafka", kafka), ("rockafka-before", before), ("rockafka", node)))
        shutil.rmtree(work, ignore_errors=True)

    medians = {name: {c: statistics.median(v) for c, v in cases.items() if v} for name, cases in results.items()}
    baseline = {}
    if args.baseline.exists():
        baseline = json.loads(args.baseline.read_text()).get("rockafka", {})
    print(f"\nbench-quick, {time.monotonic() - started:.0f} s, median of {args.reps} (records/s); load average "
          f"{load_at_start:.1f} on {os.cpu_count()} cores at start: on a shared machine trust the peer ratios "
          "(same run) more than the baseline")
    if args.before:
        baseline = medians.get("before", {})
        print(f"'baseline' = a node of {args.before} in this run")
    print(f"{'case':<18} {'rockafka':>10} {'baseline':>10} {'vs base':>8} {'peer':>10} {'vs peer':>8}")
    ours = medians.get("rockafka", {})
    for case in CASES:
        if case not in ours:
            continue
        base = baseline.get(case)
        peer = medians.get(PEER_OF[case], {}).get(case)
        print(f"{case:<18} {fmt(ours[case]):>10} {fmt(base):>10} "
              f"{(f'{ours[case] / base:.2f}x' if base else '-'):>8} {fmt(peer):>10} "
              f"{(f'{ours[case] / peer:.2f}x' if peer else '-'):>8}"
              + (f"  ({PEER_OF[case]})" if peer else ""))
    cpu_medians = {name: {c: statistics.median(v) for c, v in cases.items()} for name, cases in cpu.items()}
    if cpu_medians:
        print("\nbroker CPU per record (user + system, all threads; lower is better), microseconds")
        names = list(cpu_medians)
        print(f"{'case':<18} " + " ".join(f"{n:>10}" for n in names))
        for case in CASES[:3]:
            print(f"{case:<18} " + " ".join(f"{cpu_medians[n].get(case, 0):>10.2f}" for n in names))
    for case, runs in (threads or {}).items():
        print(thread_cpu.render(f"\nrockafka CPU by thread during {case}, us per record (median rep)",
                                _median_split(runs, tid_names)))
    doc = {"written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cores": os.cpu_count(),
           "load_average_at_start": round(load_at_start, 2), "medians_records_per_s": medians,
           "broker_cpu_us_per_record": cpu_medians,
           "rockafka": ours}
    if args.save_baseline:
        args.baseline.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"baseline written to {args.baseline}")
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
