"""Client x scenario matrix of the stock Java clients, against Rockafka or against the real peers.

Runs every scenario of both Java runners (``compat/java``: kafka-clients; ``compat/rocketmq-java``:
rocketmq-client 4.9.x and 5.x, each with JSON and ROCKETMQ remoting headers) and prints a
Markdown table per runner: one row per scenario, one column per client build, each cell
``passed/total`` checks, followed by every failed check with its detail. ``compat/README.md``
quotes its output.

    python compat/java/matrix.py --target rockafka   # a fresh `rockafka serve` on free ports
    python compat/java/matrix.py --target peers      # Apache Kafka 4.1 and Apache RocketMQ 5.5

Every server it starts is stopped before it exits, also on failure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
KAFKA_JAR = ROOT / "compat" / "java" / "target" / "kafka-runner.jar"
ROCKETMQ_JARS = {"4.9": ROOT / "compat" / "rocketmq-java" / "target" / "rmq4" / "rocketmq-runner.jar",
                 "5.x": ROOT / "compat" / "rocketmq-java" / "target" / "rmq5" / "rocketmq-runner.jar"}


def run(cmd: list[str], timeout: float = 600) -> tuple[list[dict], dict[str, str], str]:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, err = proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = f"timed out after {timeout}s"
    checks, info = [], {}
    for line in out.splitlines():
        if not line.startswith("{"):
            continue
        obj = json.loads(line)
        if obj.get("type") == "check":
            checks.append(obj)
        elif obj.get("type") == "info":
            info[obj["key"]] = obj["value"]
    return checks, info, err


def table(title: str, columns: dict[str, list[dict]], errors: dict[str, str] | None = None) -> str:
    scenarios: list[str] = []
    for checks in columns.values():
        for c in checks:
            if c["scenario"] not in scenarios:
                scenarios.append(c["scenario"])
    lines = [f"### {title}", "", "| scenario | " + " | ".join(columns) + " |",
             "|---|" + "---|" * len(columns)]
    failures = []
    for s in scenarios:
        cells = []
        for col, checks in columns.items():
            mine = [c for c in checks if c["scenario"] == s]
            ok = sum(1 for c in mine if c["ok"])
            cells.append(f"{ok}/{len(mine)}" + ("" if mine and ok == len(mine) else " **FAIL**"))
            failures += [f"- {col} {s}/{c['check']}: {c['detail'].splitlines()[0][:300]}" for c in mine if not c["ok"]]
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    for col, err in (errors or {}).items():
        if not columns.get(col):
            failures.append(f"- {col}: the runner reported nothing: {err.strip()[-300:]}")
    if failures:
        lines += ["", "Failed checks:", ""] + failures
    return "\n".join(lines) + "\n"


# what the pytest drivers run; the runner has more (delays, retries, DLQ) that need a node
# configured with short delay levels
ROCKETMQ_SCENARIOS = ("producer-sync,producer-async,producer-batch,query-message,push-tags,push-sql,push-broadcast,"
                      "lite-pull-subscribe,lite-pull-assign,push-orderly,transaction")
# short transaction check-back intervals, as the pytest drivers use
ROCKAFKA_SETTINGS = {"transactionTimeOut": 1000, "transactionCheckInterval": 500}


def matrix(kafka_bootstrap: str, namesrv: str, work: Path, rocketmq_scenarios: str = ROCKETMQ_SCENARIOS) -> str:
    out = []
    checks, _, err = run(["java", "-jar", str(KAFKA_JAR), "--bootstrap", kafka_bootstrap])
    out.append(table("Kafka protocol: kafka-clients 4.4.0", {"kafka-clients 4.4.0": checks}, {"kafka-clients 4.4.0": err}))
    columns, errors = {}, {}
    for client, jar in ROCKETMQ_JARS.items():
        for serialize in ("JSON", "ROCKETMQ"):
            checks, info, err = run(["java", "-jar", str(jar), "--namesrv", namesrv, "--serialize", serialize,
                                     "--work-dir", str(work / f"{client}-{serialize}"),
                                     "--scenarios", rocketmq_scenarios])
            name = f"{info.get('client_version', client)} {serialize}"
            columns[name], errors[name] = checks, err
    out.append(table("RocketMQ remoting protocol: rocketmq-client", columns, errors))
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=["rockafka", "peers"], default="rockafka")
    ap.add_argument("--rocketmq-scenarios", default=ROCKETMQ_SCENARIOS, help="comma-separated runner scenarios")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "compat" / "bench" / "peers"))
    for d in ("compat/java", "compat/rocketmq-java"):
        subprocess.run(["bash", str(ROOT / d / "build.sh")], check=True)
    with tempfile.TemporaryDirectory(prefix="java-matrix-") as tmp, contextlib.ExitStack() as stack:
        work = Path(tmp)
        if args.target == "rockafka":
            from tests.support.node import RunningNode

            node = stack.enter_context(RunningNode(work / "node" / "data", settings=ROCKAFKA_SETTINGS))
            kafka, namesrv = node.kafka_bootstrap, node.namesrv_addr
        else:
            from kafka_peer import KafkaPeer
            from rocketmq_peer import RocketMQPeer

            kafka = stack.enter_context(KafkaPeer()).bootstrap
            namesrv = stack.enter_context(RocketMQPeer()).namesrv_addr
        print(matrix(kafka, namesrv, work, args.rocketmq_scenarios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
