"""NameServer behaviour through the wire: registration, routes in both JSON forms, cluster info,
KV config, expiry of silent brokers, several independent NameServers."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import sys
import time

import pytest

from gateway_native.client import Admin, Message, Producer
from gateway_native.namesrv import decode_route_json
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R, V4_9_4
from gateway_native.remoting.command import FrameDecoder, RemotingCommand, encode
from gateway_native.transport import open_connection
from tests.gateway_native.helpers import wait_until
from tests.support.node import StandaloneNamesrv


def call(addr: str, code: int, fields=None, body: bytes = b"", version: int = 441, serialize_type: int = 0) -> RemotingCommand:
    async def run():
        conn = await open_connection(addr)
        try:
            cmd = RemotingCommand.request(code, fields, body, version=version, serialize_type=serialize_type)
            return await conn.invoke(cmd, 5)
        finally:
            conn.close()
    return asyncio.run(run())


def test_route_in_standard_and_legacy_json(node):
    with Producer("nsp", node.namesrv_addr) as p:
        p.send(Message("NsRouteTopic", b"x"))
    std = call(node.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsRouteTopic"}, version=V4_9_4)
    assert std.code == R.SUCCESS
    route = json.loads(std.body)  # plain JSON
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": node.broker_addr}
    assert route["queueDatas"][0]["brokerName"] == "broker-a" and route["queueDatas"][0]["perm"] == 6
    legacy = call(node.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsRouteTopic"}, version=V4_9_4 - 1)
    assert re.search(rb'"brokerAddrs":\{0:"', legacy.body), legacy.body  # fastjson's integer keys
    assert decode_route_json(legacy.body) == route
    opted_in = call(node.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NsRouteTopic", "acceptStandardJsonOnly": True},
                    version=100, serialize_type=1)
    assert json.loads(opted_in.body) == route
    missing = call(node.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic"})
    assert missing.code == R.TOPIC_NOT_EXIST and "NoSuchTopic" in missing.remark


def test_cluster_info_topic_list_and_kv_config(node):
    info = json.loads(call(node.namesrv_addr, RC.GET_BROKER_CLUSTER_INFO).body)
    assert info["clusterAddrTable"] == {"DefaultCluster": ["broker-a"]}
    assert info["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {"0": node.broker_addr}
    topics = json.loads(call(node.namesrv_addr, RC.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)["topicList"]
    assert "TBW102" in topics
    assert call(node.namesrv_addr, RC.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == R.QUERY_NOT_FOUND
    assert call(node.namesrv_addr, RC.PUT_KV_CONFIG, {"namespace": "ns", "key": "k", "value": "v1"}).code == R.SUCCESS
    assert call(node.namesrv_addr, RC.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).get_str("value") == "v1"
    assert json.loads(call(node.namesrv_addr, RC.GET_KVLIST_BY_NAMESPACE, {"namespace": "ns"}).body) == {"table": {"k": "v1"}}
    assert call(node.namesrv_addr, RC.DELETE_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == R.SUCCESS
    assert call(node.namesrv_addr, RC.GET_KV_CONFIG, {"namespace": "ns", "key": "k"}).code == R.QUERY_NOT_FOUND
    bad = call(node.namesrv_addr, RC.GET_KV_CONFIG, {"namespace": "ns"})
    assert bad.code == R.SYSTEM_ERROR and "key" in bad.remark


def test_silent_broker_expires(tmp_path):
    ns = StandaloneNamesrv(tmp_path, expired_ms=1500)
    try:
        body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {"ExpTopic": {
            "topicName": "ExpTopic", "readQueueNums": 2, "writeQueueNums": 2, "perm": 6}}, "dataVersion": {"counter": 1}},
            "filterServerList": []}).encode()

        sock = socket.create_connection(("127.0.0.1", ns.port), timeout=5)  # stays open: only silence expires it
        req = RemotingCommand.request(RC.REGISTER_BROKER, {"brokerAddr": "127.0.0.1:1", "brokerId": 0,
                                                           "brokerName": "ghost", "clusterName": "C"}, body)
        sock.sendall(encode(req))
        dec = FrameDecoder()
        resp = []
        while not resp:
            resp = dec.feed(sock.recv(65536))
        assert resp[0].code == R.SUCCESS
        assert call(ns.addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "ExpTopic"}).code == R.SUCCESS
        wait_until(lambda: call(ns.addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "ExpTopic"}).code == R.TOPIC_NOT_EXIST,
                   what="the silent broker's routes to expire")
        assert json.loads(call(ns.addr, RC.GET_BROKER_CLUSTER_INFO).body)["brokerAddrTable"] == {}
        sock.close()
    finally:
        ns.stop()


def test_broker_registers_with_every_namesrv(make_node, tmp_path):
    a, b = StandaloneNamesrv(tmp_path), StandaloneNamesrv(tmp_path)
    try:
        n = make_node({"namesrvAddr": f"{a.addr};{b.addr}", "brokerName": "broker-x", "registerNameServerPeriod": 500})
        for ns in (a, b):
            wait_until(lambda ns=ns: json.loads(call(ns.addr, RC.GET_BROKER_CLUSTER_INFO).body)["brokerAddrTable"],
                       what="registration")
            info = json.loads(call(ns.addr, RC.GET_BROKER_CLUSTER_INFO).body)
            assert info["brokerAddrTable"]["broker-x"]["brokerAddrs"] == {"0": n.broker_addr}
        # clients fail over between NameServers: one is down, sends still find the route
        a.stop()
        with Producer("fo", f"{a.addr};{b.addr}") as p:
            assert p.send(Message("FailoverTopic", b"x")).status.name == "SEND_OK"
        n.stop()
        wait_until(lambda: not json.loads(call(b.addr, RC.GET_BROKER_CLUSTER_INFO).body)["brokerAddrTable"],
                   what="unregistration on shutdown")
    finally:
        for ns in (a, b):
            if ns.proc.poll() is None:
                ns.stop()
