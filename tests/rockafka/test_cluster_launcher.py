"""``rockafka cluster up|status|down`` with real processes: two broker groups of a SYNC_MASTER and
a slave each plus a NameServer, started through the command as a user types it; confluent-kafka
produces to and consumes from a master; status shows every process, its role and replication;
bad input is refused before anything starts; down leaves nothing running and every port free."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from rockafka.cluster_launcher import STATE_FILE, alive, plan_cluster, port_free, start_ticks, stop_members
from tests.gateway_kafka.kafka_helpers import wait_for
from tests.support.node import _ISSUED_PORTS, _bindable, _ephemeral_range, rockafka_command


def cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(rockafka_command() + ["cluster", *args], capture_output=True, text=True, timeout=timeout)


def plan_ports(base: int, groups: int = 2, replicas: int = 2) -> list[int]:
    state = plan_cluster(Path("unused"), groups=groups, replicas=replicas, namesrvs=1, role="SYNC_MASTER",
                         host="127.0.0.1", base_port=base, cluster_name="c", config_file=None, settings=[],
                         command=["rockafka"])
    return [p for m in state["members"] for p in m["ports"].values()]


def pick_base_port() -> int:
    """A base port whose whole plan is free and below the ephemeral range (as free_port picks)."""
    low, _ = _ephemeral_range()
    rng = random.Random()
    for _ in range(500):
        base = rng.randrange(10000, max(10001, low - 1100))
        ports = plan_ports(base)
        if not _ISSUED_PORTS.intersection(ports) and all(_bindable(p) for p in ports):
            _ISSUED_PORTS.update(ports)
            return base
    raise RuntimeError("no free range of ports for the cluster plan")


def status(directory: Path) -> tuple[int, dict]:
    out = cli("status", "--dir", str(directory), "--json", timeout=60)
    return out.returncode, json.loads(out.stdout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    directory = tmp_path_factory.mktemp("cluster")
    for _attempt in range(3):
        base = pick_base_port()
        up = cli("up", "--dir", str(directory), "--groups", "2", "--replicas", "2", "--namesrvs", "1",
                 "--role", "SYNC_MASTER", "--base-port", str(base), "--set", "mappedFileSizeCommitLog=67108864")
        if up.returncode == 2 and "already in use" in up.stderr:  # another run took a port meanwhile
            continue
        break
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield directory, base, up.stdout, json.loads((directory / STATE_FILE).read_text())
    finally:
        cli("down", "--dir", str(directory), timeout=120)


def member(state: dict, name: str) -> dict:
    return next(m for m in state["members"] if m["name"] == name)


def test_bad_input_is_refused_before_anything_starts(tmp_path):
    cases = [
        (["--groups", "0"], "--groups must be 1..10, got 0"),
        (["--replicas", "5"], "--replicas must be 1..4, got 5"),
        (["--namesrvs", "6"], "--namesrvs must be 1..5, got 6"),
        (["--base-port", "65000"], "--base-port must be 1024..64499"),
        (["--set", "flushDiskTyp=SYNC_FLUSH"], "did you mean flushDiskType?"),
        (["--set", "brokerRole=SLAVE"], "the launcher sets this key"),
        (["--set", "flushDiskType=SOMETIMES"], "flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH"),
    ]
    for args, message in cases:
        out = cli("up", "--dir", str(tmp_path / "c"), *args, timeout=60)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
    assert not (tmp_path / "c").exists()  # nothing planned, nothing started
    out = cli("status", "--dir", str(tmp_path / "c"), timeout=60)
    assert out.returncode == 2 and "no cluster in" in out.stderr


def test_up_prints_and_stores_the_port_plan(cluster):
    directory, base, stdout, state = cluster
    assert state["state"] == "up"
    assert [m["name"] for m in state["members"]] == ["namesrv-0", "broker-a-0", "broker-a-1", "broker-b-0",
                                                     "broker-b-1"]
    assert state["namesrvAddr"] == f"127.0.0.1:{base}"
    assert state["kafkaBootstrap"] == f"127.0.0.1:{base + 100},127.0.0.1:{base + 200}"
    assert member(state, "broker-b-1")["ports"] == {"kafka": base + 210, "broker": base + 211, "ha": base + 212,
                                                     "admin": base + 213, "grpc": base + 214, "namesrv": base + 215}
    for m in state["members"]:
        assert alive(m), m["name"]
        assert m["name"] in stdout and str(next(iter(m["ports"].values()))) in stdout
        ready = "namesrv_ready" if m["kind"] == "namesrv" else "node_ready"
        assert ready in Path(m["log"]).read_text()
        assert Path(m["dataDir"]).is_dir()


def test_kafka_clients_produce_and_consume_through_a_master(cluster):
    directory, base, _, state = cluster
    bootstrap = f"127.0.0.1:{member(state, 'broker-b-0')['ports']['kafka']}"
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    sent = [f"record-{i}".encode() for i in range(50)]
    for value in sent:
        producer.produce("launcher-orders", value)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "launcher-readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["launcher-orders"])
    got: list[bytes] = []
    errors: list[str] = []  # what the consumer was told, for the failure message
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            elif msg is not None:
                errors.append(str(msg.error()))
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent), (len(got), errors[-5:])

    # each group's slave has every byte its master acknowledged (SYNC_MASTER, acks=all); the topic
    # lives on one of the two groups (the one that auto-creates its name)
    def replicated():
        _, doc = status(directory)
        rows = {r["name"]: r["replication"] for r in doc["members"]}
        pairs = [(rows[f"broker-{g}-0"], rows[f"broker-{g}-1"]) for g in "ab"]
        return (any(master["commitLogMaxOffset"] > 0 for master, _ in pairs)
                and all(slave["commitLogMaxOffset"] == master["commitLogMaxOffset"] for master, slave in pairs))
    wait_for(replicated, timeout=30, interval=0.2, what="each slave holding its master's commitlog")


def test_status_shows_each_process_role_ports_and_replication(cluster):
    directory, base, _, state = cluster
    rc, doc = status(directory)
    assert rc == 0 and doc["state"] == "up"
    rows = {r["name"]: r for r in doc["members"]}
    assert all(r["alive"] and r["pid"] for r in rows.values())
    assert {n: r["role"] for n, r in rows.items()} == {"namesrv-0": "NAMESRV", "broker-a-0": "SYNC_MASTER",
                                                       "broker-a-1": "SLAVE", "broker-b-0": "SYNC_MASTER",
                                                       "broker-b-1": "SLAVE"}
    for group, block in (("a", base + 100), ("b", base + 200)):
        master, slave = rows[f"broker-{group}-0"], rows[f"broker-{group}-1"]
        assert master["ports"]["kafka"] == block and slave["ports"]["kafka"] == block + 10
        assert master["replication"]["haConnections"] == 1
        assert slave["replication"]["masterAddress"] == f"127.0.0.1:{block + 2}"
        assert slave["replication"]["connected"] is True
    table = cli("status", "--dir", str(directory), timeout=60)
    assert table.returncode == 0
    assert f"following 127.0.0.1:{base + 102}" in table.stdout and "1 slave(s) connected" in table.stdout


def test_a_second_cluster_is_refused_in_the_same_directory_and_on_taken_ports(cluster, tmp_path):
    directory, base, _, state = cluster
    again = cli("up", "--dir", str(directory), "--base-port", str(base), timeout=60)
    assert again.returncode == 2
    assert f"a cluster is already up in {directory}" in again.stderr and "rockafka cluster down" in again.stderr
    other = cli("up", "--dir", str(tmp_path / "other"), "--base-port", str(base), timeout=60)
    assert other.returncode == 2
    assert f"ports of the plan already in use: {base} (namesrv-0 namesrv)" in other.stderr
    assert not (tmp_path / "other" / STATE_FILE).exists()
    assert all(alive(m) for m in state["members"])  # the running cluster is untouched


def test_status_reports_a_member_that_died(cluster):
    directory, base, _, state = cluster
    os.kill(member(state, "broker-a-1")["pid"], signal.SIGKILL)
    wait_for(lambda: not alive(member(state, "broker-a-1")), what="broker-a-1 gone")

    def master_noticed():
        rc, doc = status(directory)
        rows = {r["name"]: r for r in doc["members"]}
        return (rc, rows) if rows["broker-a-0"]["replication"]["haConnections"] == 0 else None
    rc, rows = wait_for(master_noticed, timeout=30, interval=0.2, what="broker-a-0 noticing it lost its slave")
    assert rc == 3  # as `systemctl status`: something that should run does not
    assert rows["broker-a-1"]["alive"] is False and rows["broker-a-1"]["summary"] == "not running"
    assert rows["broker-b-1"]["alive"] is True


def test_down_stops_every_process_and_frees_every_port(cluster):
    directory, base, _, state = cluster
    out = cli("down", "--dir", str(directory), timeout=120)
    assert out.returncode == 0, out.stderr
    assert "broker-b-0: stopped" in out.stdout and "namesrv-0: stopped" in out.stdout
    assert not any(alive(m) for m in state["members"])
    assert all(port_free("127.0.0.1", p) for p in plan_ports(base))  # as a listener binds (TIME_WAIT is free)
    rc, doc = status(directory)
    assert rc == 3 and doc["state"] == "down" and not any(r["alive"] for r in doc["members"])
    for m in state["members"]:
        if m["kind"] == "broker" and m["name"] != "broker-a-1":  # a clean stop removes the abort file
            assert not (Path(m["dataDir"]) / "abort").exists(), m["name"]


def test_down_kills_a_process_that_ignores_sigterm_after_the_bound():
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        stubborn = {"name": "stubborn", "pid": proc.pid, "startTicks": start_ticks(proc.pid)}
        outcome = stop_members([stubborn], timeout=0.5)
        assert outcome["stubborn"].startswith("killed (SIGKILL)")
        assert not alive(stubborn)
        assert proc.wait(10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
