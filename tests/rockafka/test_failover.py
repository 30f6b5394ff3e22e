"""Automatic failover with real processes on loopback (docs/design/failover.md): a 3-node
controller quorum and a SYNC_MASTER group of three brokers under native and idempotent Kafka
load. A few cycles of ``compat/chaos/failover.py`` (``make chaos`` runs 50+), and the zombie
master: stopped past its lease while a request waits on it, it answers with an error, never a
SEND_OK, then steps down."""

from __future__ import annotations

import os
import signal
import threading
import urllib.request

import pytest

from compat.chaos import failover
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until

pytestmark = pytest.mark.timeout(900)


def test_kill_9_sigstop_and_a_controller_kill_lose_nothing_acknowledged(tmp_path):
    report = failover.run(tmp_path, cycles=3, faults=["kill", "stop", "controller"], seed=13)
    assert report["problems"] == [], report["problems"][:20]
    assert report["kafka_fatal"] is None  # no OUT_OF_ORDER_SEQUENCE_NUMBER or other fatal error
    assert report["duplicates"]["kafka"] == 0, report  # the idempotent producer wrote each record once
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER" not in report["kafka_statuses"]
    assert report["native_acked"] > 0 and report["kafka_acked"] > 0
    kill, stop, controller = report["cycle_log"]
    assert kill["new_master"] != kill["master"] and stop["new_master"] != stop["master"]
    # both protocols kept being acknowledged after every fault (the clients carried on)
    assert all(c["first_ack_after_s"] is not None for c in report["cycle_log"]), report["cycle_log"]


def test_a_stopped_master_past_its_lease_does_not_acknowledge_and_steps_down(tmp_path):
    from gateway_native.client import Message, Producer
    from gateway_native.client.producer import MQBrokerError, MQClientError

    with FailoverGroup(tmp_path) as group:
        master = group.wait_settled()
        with Producer("zombie-check", group.namesrv_addr, retry_times_when_send_failed=0,
                      send_msg_timeout=30_000) as producer:
            first = producer.send(Message("ZombieTopic", b"before"))
            assert first.status.name == "SEND_OK"
            os.killpg(master.proc.pid, signal.SIGSTOP)
            try:
                new = group.wait_master(not_=master)
                outcome: dict = {}

                def send() -> None:  # the producer's cached route still names the stopped master
                    try:
                        outcome["result"] = producer.send(Message("ZombieTopic", b"to-the-zombie"))
                    except (MQBrokerError, MQClientError) as exc:
                        outcome["error"] = exc
                sender = threading.Thread(target=send)
                sender.start()
                wait_until(lambda: _request_waiting(master), 10, what="the request to wait at the stopped master")
            finally:
                os.killpg(master.proc.pid, signal.SIGCONT)
            sender.join(60)
            result = outcome.get("result")
            if result is not None and result.status.name == "SEND_OK":
                # the zombie refused it before storing and the SDK sent it again to the master the
                # route names now: acknowledged by the new master, never by the zombie
                assert _store_port(result.offset_msg_id) == new.broker_port, (result, master.broker_port)
            elif result is None:
                error = str(outcome.get("error"))
                assert "master lease expired" in error or "not the master" in error, error
        # it learns the new master at its next heartbeat, follows it, and counted the expiry
        wait_until(lambda: group.ha(master)["brokerRole"] == "SLAVE" and group.ha(master).get("connected"), 30,
                   what="the old master following the new one")
        assert group.master() is new
        metrics = urllib.request.urlopen(f"{master.admin_url}/metrics", timeout=5).read().decode()
        assert "rockafka_failover_lease_expired_total 1.0" in metrics
        assert 'rockafka_failover_role_changes_total{role="slave"} 1.0' in metrics


def _store_port(offset_msg_id: str) -> int:
    """The store host's port in a RocketMQ offset message id (ip 4 + port 4 + offset 8 bytes, hex)."""
    return int(offset_msg_id[8:16], 16)


def _request_waiting(node) -> bool:
    """Bytes wait unread in a connection to the node's broker port (the stopped process has not
    read the request the kernel already received for it)."""
    port = f"{node.broker_port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[1].endswith(":" + port) and cols[3] == "01" and int(cols[4].split(":")[1], 16) > 0:
                return True
    return False
