"""A node listening on every interface (``--host 0.0.0.0``, the default) must tell remote
clients an address they can reach: the machine's own, never 127.0.0.1. The test runs the node
in a network namespace it creates, whose only non-loopback address is 10.99.0.5 (a veth end),
so the expected answer is known and no traffic leaves the namespace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = "10.99.0.5"

PROGRAM = textwrap.dedent(f"""
    import json, subprocess, sys
    for cmd in ("ip link set lo up", "ip link add veth0 type veth peer name veth1",
                "ip addr add {ADDRESS}/24 dev veth0", "ip link set veth0 up"):
        subprocess.run(cmd.split(), check=True)
    sys.path.insert(0, {str(ROOT)!r})
    from tests.support.node import RunningNode
    from gateway_native.client import Admin, Message, Producer
    from gateway_native.remoting.message_codec import decode_offset_msg_id
    from confluent_kafka.admin import AdminClient

    node = RunningNode(sys.argv[1])
    plain_args = node.args
    node.args = lambda: ["0.0.0.0" if a == "127.0.0.1" else a for a in plain_args()]
    with node:
        with Admin(node.namesrv_addr) as admin:
            cluster = admin.cluster_info()
            admin.create_topic("where", 1)
        with Producer("where-pg", node.namesrv_addr) as p:
            sent = p.send(Message("where", b"x"))
        brokers = AdminClient({{"bootstrap.servers": node.kafka_bootstrap}}).list_topics(timeout=20).brokers
        print(json.dumps({{"broker_addrs": [a for bd in cluster["brokerAddrTable"].values()
                                            for a in bd["brokerAddrs"].values()],
                           "msg_id_host": decode_offset_msg_id(sent.offset_msg_id)[0],
                           "kafka_hosts": [b.host for b in brokers.values()]}}))
""")


def test_node_on_all_interfaces_advertises_the_machine_address(tmp_path):
    proc = subprocess.run(["unshare", "--net", "--", sys.executable, "-c", PROGRAM, str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, env=dict(os.environ))
    assert proc.returncode == 0, (
        "needs root (network namespaces, as `make test` states): " + proc.stderr[-3000:])
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [a.split(":")[0] for a in seen["broker_addrs"]] == [ADDRESS]  # the NameServer route
    assert seen["msg_id_host"] == ADDRESS  # message ids lead `query id` to this machine
    assert seen["kafka_hosts"] == [ADDRESS]  # Kafka metadata
