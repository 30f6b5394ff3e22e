"""Kafka-protocol throughput over TLS next to plaintext, Rockafka and Apache Kafka side by side.

    python compat/bench/tls_bench.py [--records N] [--size B] [--reps R] [--out compat/bench/results/DATE-tls]

One run starts a ``rockafka serve`` and a single-node Apache Kafka (KRaft, Maven Central jars,
``compat/bench/peers/kafka_peer.py``), each with two listeners on loopback: PLAINTEXT and SSL
(the same test CA and server certificate, made with openssl). For each server and listener,
``--reps`` times: produce ``--records`` records of ``--size`` bytes (confluent-kafka, acks=1,
linger 5 ms) to a fresh one-partition topic, then read them back with a fresh consumer. Prints
and writes medians (min–max) in records/s and the ratios TLS / plaintext per server and
Rockafka / Kafka per listener. Bounded: each phase has a deadline.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "compat" / "bench" / "peers"))  # the peers import their siblings

from compat.bench.kafka_bench import consume_throughput, produce_throughput  # noqa: E402


def _med(values: list[float]) -> dict:
    return {"median": round(statistics.median(values)), "min": round(min(values)), "max": round(max(values)),
            "n": len(values)}


def run_case(bs: str, conf: dict, records: int, size: int, reps: int, warmup: int = 1) -> dict:
    """``warmup`` untimed repetitions first (a JVM peer compiles its hot paths meanwhile, so the
    listener measured first is not penalised)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    produce, consume = [], []
    admin = AdminClient({"bootstrap.servers": bs, **conf})
    for rep in range(warmup + reps):
        topic = f"tls-bench-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
        p = produce_throughput(bs, topic, records, size, conf)["records_per_s"]
        c = consume_throughput(bs, topic, records, size, conf)["records_per_s"]
        if rep >= warmup:
            produce.append(p)
            consume.append(c)
    return {"produce": _med(produce), "consume": _med(consume)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", help="write <out>.json and <out>.md")
    args = ap.parse_args()

    from kafka_peer import KafkaPeer
    from tests.support.certs import make_pki
    from tests.support.node import RunningNode, free_port

    started = time.time()
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    tmp = Path(tempfile.mkdtemp(prefix="tls-bench-"))
    pki = make_pki(tmp / "pki")
    server_pem = tmp / "server.pem"
    server_pem.write_text(pki.server_key.read_text() + pki.server_cert.read_text())
    ssl_client = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    results: dict[str, dict] = {}

    node = RunningNode(tmp / "rockafka")
    ssl_port = free_port()
    node.settings.update({"listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},SSL://127.0.0.1:{ssl_port}",
                          "tlsServerCertPath": pki.server_cert, "tlsServerKeyPath": pki.server_key})
    with node:
        results["rockafka"] = {
            "PLAINTEXT": run_case(node.kafka_bootstrap, {}, args.records, args.size, args.reps),
            "SSL": run_case(f"127.0.0.1:{ssl_port}", ssl_client, args.records, args.size, args.reps)}

    kport, kssl = free_port(), free_port()
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:{kport},SSL://127.0.0.1:{kssl},CONTROLLER://127.0.0.1:{free_port()}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{kport},SSL://127.0.0.1:{kssl}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(server_pem),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)}
    peer = KafkaPeer(tmp / "kafka", port=kport, overrides=overrides)
    peer.controller_port = int(overrides["listeners"].rsplit(":", 1)[1])
    with peer:
        results["kafka"] = {
            "PLAINTEXT": run_case(peer.bootstrap, {}, args.records, args.size, args.reps),
            "SSL": run_case(f"127.0.0.1:{kssl}", ssl_client, args.records, args.size, args.reps)}

    def ratio(a: dict, b: dict) -> float:
        return round(a["median"] / b["median"], 2) if b["median"] else 0.0

    ratios = {}
    for phase in ("produce", "consume"):
        r, k = results["rockafka"], results["kafka"]
        ratios[phase] = {"rockafka_tls_vs_plain": ratio(r["SSL"][phase], r["PLAINTEXT"][phase]),
                         "kafka_tls_vs_plain": ratio(k["SSL"][phase], k["PLAINTEXT"][phase]),
                         "rockafka_vs_kafka_plain": ratio(r["PLAINTEXT"][phase], k["PLAINTEXT"][phase]),
                         "rockafka_vs_kafka_tls": ratio(r["SSL"][phase], k["SSL"][phase])}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=ROOT).stdout.strip()
    except OSError:
        commit = "?"
    doc = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "seconds": round(time.time() - started),
           "load_average_at_start": load, "machine": platform.platform(), "commit": commit,
           "records": args.records, "record_bytes": args.size, "reps": args.reps, "results": results, "ratios": ratios}
    print(json.dumps(doc, indent=2))
    if args.out:
        Path(args.out + ".json").write_text(json.dumps(doc, indent=2) + "\n")
        Path(args.out + ".md").write_text(markdown(doc))
    return 0


def markdown(doc: dict) -> str:
    r, k, q = doc["results"]["rockafka"], doc["results"]["kafka"], doc["ratios"]

    def cell(x: dict) -> str:
        return f"{x['median']:,} ({x['min']:,}–{x['max']:,}, n={x['n']})"

    lines = [f"# Kafka protocol over TLS, Rockafka and Apache Kafka — {doc['date'][:10]}", "",
             f"`python compat/bench/tls_bench.py` at {doc['date']}, {doc['seconds']} s, load average at start "
             f"{doc['load_average_at_start']} (2 shared cores: noisy; compare within the run). Commit {doc['commit']}.",
             "", f"confluent-kafka, one partition, {doc['records']:,} records of {doc['record_bytes']} B per repetition, "
             "acks=1, linger 5 ms; one untimed warm-up repetition per listener first; each server with a PLAINTEXT and an SSL listener on 127.0.0.1 (same test CA and "
             "server certificate; no client certificate). Apache Kafka 4.1.1 single KRaft node, 1 GiB heap. "
             "Unit: records/s, median (min–max); higher is better.", "",
             "| phase | listener | Rockafka | Apache Kafka | Rockafka / Kafka |", "|---|---|---|---|---|"]
    for phase in ("produce", "consume"):
        for lst, key in (("PLAINTEXT", "rockafka_vs_kafka_plain"), ("SSL", "rockafka_vs_kafka_tls")):
            lines.append(f"| {phase} | {lst} | {cell(r[lst][phase])} | {cell(k[lst][phase])} | {q[phase][key]} |")
    lines += ["", "| phase | Rockafka TLS / plaintext | Apache Kafka TLS / plaintext |", "|---|---|---|"]
    for phase in ("produce", "consume"):
        lines.append(f"| {phase} | {q[phase]['rockafka_tls_vs_plain']} | {q[phase]['kafka_tls_vs_plain']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
