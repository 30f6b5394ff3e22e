"""The client scenarios of the compatibility tests, run against Apache RocketMQ 5.5 (NameServer,
broker and gRPC proxy from Maven Central, ``compat/bench/peers/rocketmq_peer.py``) instead of
Rockafka: the Java 5 gRPC client runner's scenarios (over TLS, the client's default), the
stock Java remoting client's POP scenario, and the official Python client's scenarios
(tests/gateway_grpc/test_python_client.py, plaintext, run by pytest with the peer's endpoints;
its Kafka crossing is Rockafka's own and left out). ``make compat-peer`` runs it; it is not part of
``make test`` (three JVM servers and a long run).

The proxy binds every interface, so after everything that needs the network is fetched and built,
the run continues inside a private network namespace (``compat/bench/peers/netns.py``).
Prints one line per scenario (PASS/FAIL with the failed checks) and exits 1 when any failed.

    python -m tests.compat.peer_scenarios [--scenarios a,b] [--no-python]   (--scenarios '': Python only)
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.compat import grpc_java, java_runner
from tests.compat.mqadmin import TOOLS_DIR, MQAdmin

sys.path.insert(0, str(java_runner.ROOT / "compat" / "bench" / "peers"))
from netns import reexec_in_private_netns  # noqa: E402
from rocketmq_peer import RocketMQPeer, ensure_ha_service, ensure_jars  # noqa: E402

REMOTING_SCENARIOS = ["push-pop"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenarios", default=",".join(grpc_java.SCENARIOS))
    ap.add_argument("--no-python", action="store_true", help="skip the official Python client's scenarios")
    ap.add_argument("--python-k", default="", help="only the Python client's tests matching this pytest -k expression")
    args = ap.parse_args(argv)
    scenarios = [s for s in args.scenarios.split(",") if s]
    # outside the namespace: everything that needs Maven
    ensure_jars()
    ensure_ha_service()
    grpc_java.build()
    java_runner.build(java_runner.ROCKETMQ_DIR)
    subprocess.run(["bash", str(TOOLS_DIR / "build.sh")], check=True)
    reexec_in_private_netns()

    work = Path(tempfile.mkdtemp(prefix="peer-scenarios-"))
    failed = 0
    # proxy: what tests/gateway_grpc/test_python_client.py sets on the node (push consumer
    # renewals), and invisible times from 1 s (Apache's default minimum is 10 s)
    # (Apache's renewal pass runs every renewSchedulePeriodMillis, 5 s by default: longer than
    # that 4 s invisible time)
    # The broker asks a producer to check a transaction only through a channel the proxy has
    # registered by its producer heartbeat (every transactionHeartbeatPeriodSecond, 20 s by
    # default), and gives a half message up after transactionCheckMax (15) failed checks: with a
    # 1 s check the heartbeat could come too late ("Check transaction failed, channel is null").
    proxy = {"defaultInvisibleTimeMills": 4000, "renewAheadTimeMillis": 3000, "renewSchedulePeriodMillis": 1000,
             "minInvisibleTimeMillsForRecv": 1000, "transactionHeartbeatPeriodSecond": 1}
    with RocketMQPeer(work / "peer", proxy=True, proxy_overrides=proxy,
                      overrides={"transactionTimeOut": 1000, "transactionCheckInterval": 1000, "transactionCheckMax": 60,
                                 "recallMessageEnable": "true"}) as peer:
        print(f"Apache RocketMQ 5.5: namesrv {peer.namesrv_addr}, gRPC proxy {peer.grpc_endpoint}", flush=True)
        (work / "home").mkdir()
        mqadmin = MQAdmin(peer.namesrv_addr, work / "home")
        if scenarios:  # --scenarios '' runs the Python client's only
            run_id = grpc_java.new_run_id()
            grpc_java.prepare(mqadmin, run_id)
            result = grpc_java.run(peer.grpc_endpoint, run_id, scenarios, True, work / "grpc")
            print(f"rocketmq-client-java {result.info.get('client_version')} over TLS:", flush=True)
            failed += report(result, scenarios, grpc_java.MIN_CHECKS)
            if "simple-dlq" in scenarios:
                problems = grpc_java.dead_letter_problems(peer.namesrv_addr, run_id, exactly_once=False)
                failed += bool(problems)
                print(f"  {'FAIL' if problems else 'PASS'} simple-dlq's dead letter in %DLQ%<group>"
                      f"{': ' + '; '.join(problems) if problems else ''}", flush=True)
            remoting = java_runner.run(java_runner.rocketmq_command("5.x", peer.namesrv_addr, "JSON",
                                                                    REMOTING_SCENARIOS, work / "remoting"), 300)
            print(f"rocketmq-client {remoting.info.get('client_version')} (remoting):", flush=True)
            failed += report(remoting, REMOTING_SCENARIOS, {"push-pop": 6})
        if not args.no_python:
            failed += python_client(peer, args.python_k)
    print(f"{failed} scenario(s) failed against Apache RocketMQ 5.5" if failed else
          "every scenario passed against Apache RocketMQ 5.5")
    return 1 if failed else 0


def python_client(peer: RocketMQPeer, only: str = "") -> int:
    """tests/gateway_grpc/test_python_client.py against the peer's proxy; one line per test."""
    env = dict(os.environ, ROCKAFKA_PEER_GRPC=peer.grpc_endpoint, ROCKAFKA_PEER_NAMESRV=peer.namesrv_addr)
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests/gateway_grpc/test_python_client.py", "-rA", "-q",
                           "-p", "no:cacheprovider", "-k", f"not cross_protocols{f' and ({only})' if only else ''}"],
                          cwd=java_runner.ROOT, env=env, capture_output=True, text=True, timeout=900)
    from importlib.metadata import version  # the official client's version, for the report
    print(f"rocketmq-python-client {version('rocketmq-python-client')} (gRPC, plaintext):", flush=True)
    failed = 0
    for line in proc.stdout.splitlines():
        m = re.match(r"^(PASSED|FAILED|ERROR) tests/gateway_grpc/test_python_client\.py::(\S+)(.*)$", line)
        if m:
            ok = m.group(1) == "PASSED"
            failed += not ok
            print(f"  {'PASS' if ok else 'FAIL'} {m.group(2)}{'' if ok else m.group(3)[:600]}", flush=True)
    if proc.returncode != 0:
        log = Path(peer.data_dir) / "python-client.log"
        log.write_text(proc.stdout + proc.stderr)
        print(f"  pytest exited {proc.returncode}; its output: {log}\n{proc.stdout[-4000:]}", flush=True)
        failed = max(failed, 1)
    return failed


def report(result: java_runner.RunResult, scenarios: list[str], min_checks: dict[str, int]) -> int:
    failed = 0
    for s in scenarios:
        checks = result.of(s)
        bad = result.failures(s)
        ok = len(checks) >= min_checks.get(s, 1) and not bad
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'} {s} ({len(checks)} checks)", flush=True)
        for c in bad or ([] if ok else [{"check": "-", "detail": result.explain(s)[-1500:]}]):
            print(f"       {c['check']}: {str(c['detail'])[:600]}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
