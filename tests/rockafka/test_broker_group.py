"""A master and a slave as two ``rockafka serve`` processes with a standalone NameServer: the
seed's broker HA tests (Broker高可用测试) with the Python SDK, plus what the group looks like to
operators.

- master down: consumers read everything from the slave and commit progress there;
- slave down: SYNC_MASTER sends answer SLAVE_NOT_AVAILABLE and are still stored;
- slave back: it catches up, serves reads again, sends are SEND_OK again;
- master back: consumers see at most a few duplicates, nothing lost.
"""

from __future__ import annotations

import re

import pytest

from engine.message import decode_message_id
from gateway_native.client import Admin, Message, Producer
from gateway_native.client.message import SendStatus
from tests.support.group import BrokerGroup, commitlog_bytes, http_json, wait_until

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def group(tmp_path):
    g = BrokerGroup(tmp_path, role="SYNC_MASTER").start()
    yield g
    g.stop()


def send_all(namesrv: str, topic: str, bodies: list[bytes]) -> list:
    with Producer("ha-producer", namesrv, retry_times_when_send_failed=0) as p:
        return [p.send(Message(topic, b, keys=[b.decode()])) for b in bodies]


def test_sync_master_sends_are_on_the_slave_byte_for_byte(group):
    results = send_all(group.namesrv_addr, "HaBytes", [f"m{i}".encode() for i in range(40)])
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    slave = group.slaves[0]
    group.wait_caught_up(slave)
    group.stop()  # both stopped cleanly: read the files
    for r in results:
        _, phy = decode_message_id(r.offset_msg_id)
        on_master = commitlog_bytes(group.master.data_dir, phy, 64)
        assert commitlog_bytes(slave.data_dir, phy, 64) == on_master
        size = int.from_bytes(on_master[:4], "big")
        assert commitlog_bytes(slave.data_dir, phy, size) == commitlog_bytes(group.master.data_dir, phy, size)


def test_pipelined_sync_master_sends_are_answered_in_order_once_the_slave_has_them(group):
    """Many sends in flight on one connection: each is answered SEND_OK, in the order stored, and
    only once the slave holds it (right after the last answer the slave already has its bytes)."""
    with Producer("ha-pipelined", group.namesrv_addr, retry_times_when_send_failed=0) as p:
        p.send(Message("HaPipelined", b"first"))  # route known, the topic created
        queue = p.fetch_publish_queues("HaPipelined")[0]
        answered: list = []
        futures = [p.send_async(Message("HaPipelined", f"p{i}".encode()), lambda r, e: answered.append(r or e),
                                queue=queue) for i in range(200)]
        results = [f.result(60) for f in futures]
        slave_max = group.ha(group.slaves[0])["commitLogMaxOffset"]
    assert {r.status for r in results} == {SendStatus.SEND_OK}
    offsets = [r.queue_offset for r in answered]
    assert offsets == sorted(offsets) and len(set(offsets)) == 200
    last_phy = max(decode_message_id(r.offset_msg_id)[1] for r in results)
    assert slave_max > last_phy


def test_group_is_registered_with_roles_and_the_slave_learns_its_master_from_the_namesrv(group):
    def registered():
        with Admin(group.namesrv_addr) as admin:
            info = admin.cluster_info()
        master = info["brokerAddrTable"]["broker-a"]["brokerAddrs"].get("0")
        return info if (info.get("brokerExtraTable") or {}).get(master, {}).get("inSyncBrokerIds") else None
    # the master re-registers when its in-sync set changes (within a second)
    info = wait_until(registered, 10, what="the master's registration listing its in-sync slave")
    addrs = info["brokerAddrTable"]["broker-a"]["brokerAddrs"]
    assert set(addrs) == {"0", "1"}
    assert addrs["0"] == group.master.broker_addr and addrs["1"] == group.slaves[0].broker_addr
    extras = info["brokerExtraTable"]
    assert extras[addrs["0"]]["brokerRole"] == "SYNC_MASTER" and extras[addrs["1"]]["brokerRole"] == "SLAVE"
    assert extras[addrs["0"]]["inSyncBrokerIds"] == [1]
    slave_ha = group.ha(group.slaves[0])
    assert slave_ha["masterAddress"] == f"127.0.0.1:{group.master.ha_port}"  # no haMasterAddress was set
    master_ha = group.ha(group.master)
    assert master_ha["slaves"][0]["brokerId"] == 1 and master_ha["slaves"][0]["inSync"]
    metrics = urllib_text(f"{group.master.admin_url}/metrics")
    assert 'rockafka_ha_role{role="SYNC_MASTER"} 1' in metrics and "rockafka_ha_in_sync_slaves 1" in metrics
    assert 'rockafka_ha_role{role="SLAVE"} 1' in urllib_text(f"{group.slaves[0].admin_url}/metrics")


def test_mqadmin_ha_status_of_master_and_slave(group, tmp_path):
    """``mqadmin haStatus`` (GET_BROKER_HA_STATUS): the master lists its slave with the offset it
    acknowledged, the slave names its master and its own commitlog end."""
    from tests.compat.mqadmin import MQAdmin

    send_all(group.namesrv_addr, "HaStatus", [f"s{i}".encode() for i in range(20)])
    slave = group.slaves[0]
    group.wait_caught_up(slave)
    end = group.ha(group.master)["commitLogMaxOffset"]
    mqadmin = MQAdmin.built(group.namesrv_addr, tmp_path)
    out = mqadmin.many({"master": ["haStatus", "-b", group.master.broker_addr],
                        "slave": ["haStatus", "-b", slave.broker_addr]})
    master_out = out["master"]
    assert f"#MasterAddr\t{group.master.broker_addr}" in master_out, master_out
    # the log may have grown meanwhile (the POP revive service commits its offsets every few seconds)
    found = re.search(r"#MasterCommitLogMaxOffset\t(\d+)", master_out)
    assert found and int(found.group(1)) >= end and "#SlaveNum\t1" in master_out, master_out
    master_end = int(found.group(1))
    assert "#InSyncSlaveNum\t1" in master_out, master_out
    rows = [line.split() for line in master_out.splitlines() if line.startswith("127.0.0.1:")]
    assert len(rows) == 1 and int(rows[0][1]) >= end and int(rows[0][1]) + int(rows[0][2]) == master_end, \
        master_out  # ack offset + diff = the master's end
    slave_out = out["slave"]
    assert f"127.0.0.1:{group.master.ha_port}" in slave_out, slave_out
    assert any(int(n) >= end for n in re.findall(r"\b\d+\b", slave_out)), slave_out  # its own commitlog end


def urllib_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def test_slave_down_then_back(group):
    """slave下线: SLAVE_NOT_AVAILABLE, sends still stored; slave重新上线: it catches up and serves."""
    topic = "HaSlaveDown"
    first = send_all(group.namesrv_addr, topic, [b"before"])
    assert first[0].status is SendStatus.SEND_OK
    slave = group.slaves[0]
    slave.kill()
    group.wait_in_sync(0)
    down = send_all(group.namesrv_addr, topic, [f"down{i}".encode() for i in range(10)])
    assert {r.status for r in down} == {SendStatus.SLAVE_NOT_AVAILABLE}
    # still stored on the master: it serves them
    got = pull_from_broker(group.master.broker_addr, topic)
    assert sorted(got) == sorted([b"before"] + [f"down{i}".encode() for i in range(10)])
    slave.start()
    group.wait_in_sync()
    group.wait_caught_up(slave)
    back = send_all(group.namesrv_addr, topic, [b"after"])
    assert back[0].status is SendStatus.SEND_OK
    # the slave serves everything, also what was sent while it was down
    served = pull_from_broker(slave.broker_addr, topic)
    assert sorted(served) == sorted([b"before", b"after"] + [f"down{i}".encode() for i in range(10)])


def pull_from_broker(addr: str, topic: str, group_name: str = "ha-direct") -> list[bytes]:
    """Pull every queue of ``topic`` from one broker address (PULL_MESSAGE straight to it)."""
    import asyncio

    from gateway_native.remoting.codes import PULL_FLAG_SUBSCRIPTION, RequestCode as RC, ResponseCode as R
    from gateway_native.remoting.command import RemotingCommand
    from gateway_native.remoting.message_codec import decode_units
    from gateway_native.transport import open_connection

    async def run() -> list[bytes]:
        conn = await open_connection(addr)
        out: list[bytes] = []
        try:
            for qid in range(8):
                offset = 0
                while True:
                    cmd = RemotingCommand.request(RC.PULL_MESSAGE, {
                        "consumerGroup": group_name, "topic": topic, "queueId": qid, "queueOffset": offset,
                        "maxMsgNums": 32, "sysFlag": PULL_FLAG_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
                        "subscription": "*", "subVersion": 0, "expressionType": "TAG"})
                    resp = await conn.invoke(cmd, 5)
                    if resp.code != R.SUCCESS:
                        break
                    msgs = decode_units(bytes(resp.body))
                    out += [m.body for m in msgs]
                    offset = int(resp.get_int("nextBeginOffset"))
        finally:
            conn.close()
        return out
    return asyncio.run(run())


def test_master_down_consumers_read_everything_from_the_slave_then_master_back(group):
    """一台master下线: consumers read from the slave, nothing lost, progress kept there;
    master重新上线: consumers go back to it and see at most a few duplicates."""
    from collections import Counter

    from gateway_native.client import PushConsumer
    from tests.gateway_native.helpers import FAST, Collector

    topic = "HaMasterDown"
    first = [f"a{i}".encode() for i in range(60)]
    assert {r.status for r in send_all(group.namesrv_addr, topic, first)} == {SendStatus.SEND_OK}
    group.master.kill()  # the master dies; what it acknowledged is on the slave
    col = Collector()
    c = PushConsumer("ha-consumers", group.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **FAST)
    c.subscribe(topic, "*")
    c.register_message_listener(col)
    c.start()
    try:
        wait_until(lambda: set(col.bodies()) >= set(first), 60, what="every message consumed from the slave")
        # progress is committed to the slave while the master is away
        slave_offsets = lambda: http_json(f"{group.slaves[0].admin_url}/api/groups/ha-consumers")
        wait_until(lambda: sum(q["committed_offset"] for q in slave_offsets()["queues"]) == len(first), 30,
                   what="offsets committed on the slave")
        group.master.start()  # back, same data, a new epoch
        group.wait_in_sync()
        second = [f"b{i}".encode() for i in range(40)]
        # producers write to the master again (the route lists it once it re-registered)
        assert {r.status for r in send_all(group.namesrv_addr, topic, second)} == {SendStatus.SEND_OK}
        wait_until(lambda: set(col.bodies()) >= set(first + second), 60, what="new messages consumed from the master")
    finally:
        c.shutdown()
    counts = Counter(col.bodies())
    assert set(counts) == set(first + second)  # nothing lost
    duplicates = sum(n - 1 for n in counts.values())
    assert duplicates <= 10, f"{duplicates} duplicates: {[b for b, n in counts.items() if n > 1]}"


def test_rockafka_admin_cluster_shows_the_group_with_roles(group):
    import json
    import subprocess

    from tests.support.node import ROOT, rockafka_command

    def rows():
        out = subprocess.run(rockafka_command() + ["admin", "--namesrv", group.namesrv_addr, "--json", "cluster"],
                             capture_output=True, text=True, timeout=60, cwd=str(ROOT))
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        return data if len(data) == 2 and data[1]["inSync"] == "yes" else None
    data = wait_until(rows, 30, what="both members listed, the slave in sync")
    assert [(r["brokerName"], r["brokerId"], r["role"]) for r in data] == [("broker-a", 0, "SYNC_MASTER"),
                                                                          ("broker-a", 1, "SLAVE")]
    assert data[0]["addr"] == group.master.broker_addr and data[1]["lagBytes"] == 0
    assert data[0]["epoch"] >= 1 and str(group.master.kafka_port) in data[0]["kafka"]
    table = subprocess.run(rockafka_command() + ["admin", "--namesrv", group.namesrv_addr, "cluster"],
                           capture_output=True, text=True, timeout=60, cwd=str(ROOT)).stdout
    assert "SYNC_MASTER" in table and "SLAVE" in table
    # the slave's own admin page shows its role
    assert http_json(f"{group.slaves[0].admin_url}/api/ha")["brokerRole"] == "SLAVE"
    assert "Replication" in urllib_text(f"{group.slaves[0].admin_url}/")


def raw_pull(addr: str, topic: str, queue_id: int, offset: int, group_name: str = "redirect-g"):
    import asyncio

    from gateway_native.remoting.codes import PULL_FLAG_SUBSCRIPTION, RequestCode as RC
    from gateway_native.remoting.command import RemotingCommand
    from gateway_native.transport import open_connection

    async def run():
        conn = await open_connection(addr)
        try:
            return await conn.invoke(RemotingCommand.request(RC.PULL_MESSAGE, {
                "consumerGroup": group_name, "topic": topic, "queueId": queue_id, "queueOffset": offset,
                "maxMsgNums": 4, "sysFlag": PULL_FLAG_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
                "subscription": "*", "subVersion": 0, "expressionType": "TAG"}), 5)
        finally:
            conn.close()
    return asyncio.run(run())


def test_slave_read_enable_redirects_readers_that_fell_behind(tmp_path):
    """RocketMQ's rule: with slaveReadEnable, a pull further behind the log's end than
    accessMessageInMemoryMaxRatio of RAM is told to go to brokerId 1; the slave serves it."""
    from gateway_native.remoting.codes import ResponseCode as R

    with BrokerGroup(tmp_path / "a", role="ASYNC_MASTER",
                     master_settings={"slaveReadEnable": "true", "accessMessageInMemoryMaxRatio": 0}) as g:
        with Producer("redirect-p", g.namesrv_addr) as p:
            sent = [p.send(Message("Redirect", f"m{i}".encode()), ) for i in range(8)]
        qid = sent[0].message_queue.queue_id
        resp = raw_pull(g.master.broker_addr, "Redirect", qid, 0)
        assert resp.code == R.SUCCESS and int(resp.get_int("suggestWhichBrokerId")) == 1
        g.wait_caught_up(g.slaves[0])
        served = raw_pull(g.slaves[0].broker_addr, "Redirect", qid, 0)
        assert served.code == R.SUCCESS and served.body
    with BrokerGroup(tmp_path / "b", role="ASYNC_MASTER", master_settings={"accessMessageInMemoryMaxRatio": 0}) as g:
        with Producer("redirect-p", g.namesrv_addr) as p:
            sent = p.send(Message("Redirect", b"m"))
        resp = raw_pull(g.master.broker_addr, "Redirect", sent.message_queue.queue_id, 0)
        assert resp.code == R.SUCCESS and int(resp.get_int("suggestWhichBrokerId")) == 0  # slaveReadEnable off
