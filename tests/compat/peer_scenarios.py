"""The client scenarios of the compatibility tests, run against Apache RocketMQ 5.5 (NameServer,
broker and gRPC proxy from Maven Central, ``compat/bench/peers/rocketmq_peer.py``) instead of
Rockafka: the Java 5 gRPC client runner's scenarios (over TLS, the client's default) and the
stock Java remoting client's POP scenario. ``make compat-peer`` runs it; it is not part of
``make test`` (three JVM servers and a long run).

The proxy binds every interface, so after everything that needs the network is fetched and built,
the run continues inside a private network namespace (``compat/bench/peers/netns.py``).
Prints one line per scenario (PASS/FAIL with the failed checks) and exits 1 when any failed.

    python -m tests.compat.peer_scenarios [--scenarios a,b]
"""

from __future__ import annotations

import argparse
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
    with RocketMQPeer(work / "peer", proxy=True, overrides={"transactionTimeOut": 1000,
                                                              "transactionCheckInterval": 1000,
                                                              "recallMessageEnable": "true"}) as peer:
        print(f"Apache RocketMQ 5.5: namesrv {peer.namesrv_addr}, gRPC proxy {peer.grpc_endpoint}", flush=True)
        (work / "home").mkdir()
        mqadmin = MQAdmin(peer.namesrv_addr, work / "home")
        run_id = grpc_java.new_run_id()
        grpc_java.prepare(mqadmin, run_id)
        result = grpc_java.run(peer.grpc_endpoint, run_id, scenarios, True, work / "grpc")
        print(f"rocketmq-client-java {result.info.get('client_version')} over TLS:", flush=True)
        failed += report(result, scenarios, grpc_java.MIN_CHECKS)
        remoting = java_runner.run(java_runner.rocketmq_command("5.x", peer.namesrv_addr, "JSON", REMOTING_SCENARIOS,
                                                                work / "remoting"), 300)
        print(f"rocketmq-client {remoting.info.get('client_version')} (remoting):", flush=True)
        failed += report(remoting, REMOTING_SCENARIOS, {"push-pop": 6})
    print(f"{failed} scenario(s) failed against Apache RocketMQ 5.5" if failed else
          "every scenario passed against Apache RocketMQ 5.5")
    return 1 if failed else 0


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
