"""gRPC benchmark: the official Java 5 gRPC client (rocketmq-client-java, the runner's ``bench``
scenario) sending and then receiving + acking 512-byte messages through Rockafka's gRPC front and
through Apache RocketMQ 5.5's proxy (cluster mode, in front of its NameServer and broker), one
after the other on the same machine, over plaintext and over TLS.

Run: ``.venv/bin/python compat/bench/grpc_bench.py [--messages N]`` (a few minutes). Apache's
proxy binds every interface, so after building and fetching, the run continues inside a private
network namespace (``peers/netns.py``) where both systems listen on its loopback. Prints one JSON
line per (system, transport) with send and receive msgs/s, then one ratio line per transport
(rockafka / rocketmq). Not a test: nothing is asserted beyond every message arriving.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "compat" / "bench" / "peers"))

from netns import reexec_in_private_netns  # noqa: E402
from rocketmq_peer import RocketMQPeer, ensure_ha_service, ensure_jars  # noqa: E402

from tests.compat import grpc_java  # noqa: E402
from tests.compat.mqadmin import TOOLS_DIR, MQAdmin  # noqa: E402
from tests.support.node import RunningNode  # noqa: E402


def run_case(endpoint: str, namesrv: str, tls: bool, messages: int, work: Path) -> dict[str, object]:
    work.mkdir(parents=True, exist_ok=True)
    run_id = grpc_java.new_run_id()
    mqadmin = MQAdmin(namesrv, work)
    out = mqadmin("updateTopic", "-c", "DefaultCluster", "-t", f"grpc-bench-{run_id}", "-r", "8", "-w", "8",
                  "-a", "+message.type=NORMAL")
    if "success" not in out:
        raise RuntimeError(f"topic creation failed: {out[-500:]}")
    cmd = grpc_java.command(endpoint, run_id, ["bench"], tls, work) + ["--messages", str(messages), "--timeout-s", "600"]
    result = grpc_java.java_runner.run(cmd, 900)
    if result.failures("bench") or "send_msgs_per_s" not in result.info:
        raise RuntimeError(result.explain("bench"))
    return {"send_msgs_per_s": float(result.info["send_msgs_per_s"]),
            "receive_msgs_per_s": float(result.info["receive_msgs_per_s"])}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="gRPC send/receive: Rockafka vs Apache RocketMQ 5.5 proxy")
    ap.add_argument("--messages", type=int, default=20000)
    args = ap.parse_args(argv)
    ensure_jars()
    ensure_ha_service()
    grpc_java.build()
    subprocess.run(["bash", str(TOOLS_DIR / "build.sh")], check=True)
    reexec_in_private_netns()

    work = Path(tempfile.mkdtemp(prefix="grpc-bench-"))
    rates: dict[tuple[str, str], dict[str, object]] = {}
    with RunningNode(work / "rockafka") as node:
        for tls in (False, True):
            r = run_case(node.grpc_endpoint, node.namesrv_addr, tls, args.messages, work / f"rk-{tls}")
            rates[("rockafka", "tls" if tls else "plaintext")] = r
            print(json.dumps({"system": "rockafka", "transport": "tls" if tls else "plaintext",
                              "messages": args.messages, **r}), flush=True)
    with RocketMQPeer(work / "rocketmq", proxy=True) as peer:
        for tls in (False, True):
            r = run_case(peer.grpc_endpoint, peer.namesrv_addr, tls, args.messages, work / f"rmq-{tls}")
            rates[("rocketmq", "tls" if tls else "plaintext")] = r
            print(json.dumps({"system": "rocketmq-5.5-proxy", "transport": "tls" if tls else "plaintext",
                              "messages": args.messages, **r}), flush=True)
    for transport in ("plaintext", "tls"):
        a, b = rates[("rockafka", transport)], rates[("rocketmq", transport)]
        print(json.dumps({"ratio": "rockafka/rocketmq", "transport": transport,
                          "send": round(a["send_msgs_per_s"] / b["send_msgs_per_s"], 2),
                          "receive": round(a["receive_msgs_per_s"] / b["receive_msgs_per_s"], 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
