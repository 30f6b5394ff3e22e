"""Native gateway benchmark: SDK send throughput (sync, async) and pull throughput, 1 KiB bodies.

Run: ``.venv/bin/python compat/bench/native_bench.py`` (about a minute). Starts a real
``rockafka serve`` on free loopback ports (or uses ``--namesrv HOST:PORT``), then:

- sync: one producer thread sends for ``--seconds``, waiting for each answer;
- async: ``send_async`` with ``--window`` requests in flight for ``--seconds``;
- pull: a LitePullConsumer assigned to every queue reads everything sent back.

Prints one JSON line per case (messages, seconds, msgs/s, MiB/s, p50/p99 latency for sync).
With ``--peer`` the same cases then run, with the same SDK, against Apache RocketMQ 5.x
(``compat/bench/peers/rocketmq_peer.py``, NameServer + broker on loopback) in the same run, and
one more line per case gives the ratio rockafka / rocketmq. Not a test: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gateway_native.client import Admin, LitePullConsumer, Message, Producer  # noqa: E402


def emit(**kw) -> None:
    print(json.dumps(kw), flush=True)


def bench(namesrv: str, seconds: float, window: int, size: int, queues: int, target: str = "rockafka") -> dict[str, float]:
    rates: dict[str, float] = {}

    def emit(**kw) -> None:
        kw["target"] = target
        if "msgs_per_s" in kw:
            rates[kw["case"]] = kw["msgs_per_s"]
        print(json.dumps(kw), flush=True)

    topic = f"bench_{uuid.uuid4().hex[:8]}"
    with Admin(namesrv) as admin:
        admin.create_topic(topic, queues)
    body = b"x" * size
    total = 0
    with Producer("bench_producer", namesrv, compress_msg_body_over_howmuch=1 << 30) as p:
        for _ in range(200):  # warm up routes and connections
            p.send(Message(topic, body))
        total += 200
        lat = []
        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            s = time.perf_counter()
            p.send(Message(topic, body))
            lat.append(time.perf_counter() - s)
            n += 1
        dt = time.perf_counter() - t0
        total += n
        q = statistics.quantiles(lat, n=100)
        emit(case="send_sync", size=size, messages=n, seconds=round(dt, 2), msgs_per_s=round(n / dt),
             mib_per_s=round(n * size / dt / 2**20, 2), p50_ms=round(q[49] * 1000, 3), p99_ms=round(q[98] * 1000, 3))

        sem = threading.Semaphore(window)
        done = [0]
        errors = [0]
        lock = threading.Lock()

        def cb(result, exc):
            with lock:
                done[0] += 1
                if exc is not None:
                    errors[0] += 1
            sem.release()

        n = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            sem.acquire()
            p.send_async(Message(topic, body), cb)
            n += 1
        for _ in range(window):
            sem.acquire()
        dt = time.perf_counter() - t0
        total += n
        emit(case="send_async", size=size, window=window, messages=n, errors=errors[0], seconds=round(dt, 2),
             msgs_per_s=round(n / dt), mib_per_s=round(n * size / dt / 2**20, 2))

    with LitePullConsumer(f"bench_{uuid.uuid4().hex[:6]}", namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False, pull_batch_size=32) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got = 0
        t0 = time.perf_counter()
        deadline = t0 + max(60.0, seconds * 4)
        while got < total and time.perf_counter() < deadline:
            got += len(lp.poll(1000))
        dt = time.perf_counter() - t0
        emit(case="pull", size=size, messages=got, expected=total, seconds=round(dt, 2), msgs_per_s=round(got / dt),
             mib_per_s=round(got * size / dt / 2**20, 2))
    return rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--namesrv", help="use a running NameServer instead of starting a node")
    ap.add_argument("--seconds", type=float, default=15.0, help="duration of each send case (default 15)")
    ap.add_argument("--window", type=int, default=256, help="async requests in flight (default 256)")
    ap.add_argument("--size", type=int, default=1024, help="body size in bytes (default 1024)")
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--peer", action="store_true", help="also run against Apache RocketMQ 5.x and print ratios")
    args = ap.parse_args()
    if args.namesrv:
        bench(args.namesrv, args.seconds, args.window, args.size, args.queues)
        return 0
    from tests.support.node import RunningNode

    with tempfile.TemporaryDirectory() as d, RunningNode(Path(d) / "data") as node:
        emit(case="node", namesrv=node.namesrv_addr, broker=node.broker_addr)
        ours = bench(node.namesrv_addr, args.seconds, args.window, args.size, args.queues)
    if args.peer:
        sys.path.insert(0, str(Path(__file__).resolve().parent / "peers"))
        from rocketmq_peer import RocketMQPeer

        with tempfile.TemporaryDirectory() as d, RocketMQPeer(Path(d) / "peer") as peer:
            theirs = bench(peer.namesrv_addr, args.seconds, args.window, args.size, args.queues, target="rocketmq")
        for case, rate in ours.items():
            if theirs.get(case):
                emit(case=case, ratio_rockafka_over_rocketmq=round(rate / theirs[case], 3))
    return 0


if __name__ == "__main__":
    sys.exit(main())
