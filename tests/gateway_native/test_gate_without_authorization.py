"""The remoting gate on a node without authorization (the default): every request passes except
those naming the security records (``rmq_sys_SECURITY``), which no client reads or writes
whatever the configuration. The gate decides the topic-and-group codes from the request's topic
field alone there; these tests hold that shortcut to the full rule (``_checks`` + ``_allowed``),
code by code, and to a real node answering real frames."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from engine.config import NodeConfig
from engine.security import ANONYMOUS, SECURITY_TOPIC, SecurityService
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from gateway_native.remoting.command import RemotingCommand
from gateway_native.security import _BODY_CHECKED, RemotingGate, _checks
from tests.support.node import RunningNode

TOPICS = ["orders", SECURITY_TOPIC, "%RETRY%g1", "%DLQ%g1", f"%RETRY%{SECURITY_TOPIC}", "", "__consumer_offsets"]


class _Conn:
    remote_addr = "127.0.0.1:40000"

    def __init__(self) -> None:
        self.attrs: dict = {}


def _request(code: int, topic: str, field: str) -> RemotingCommand:
    fields = {field: topic, "consumerGroup": "g1", "group": "g1", "key": topic, "namespace": "ORDER_TOPIC_CONFIG"}
    return RemotingCommand.request(code, fields)


@pytest.mark.parametrize("field", ["topic", "b"])  # SEND_MESSAGE_V2 names the topic "b"
def test_every_code_is_decided_as_the_full_rule_decides_it(field):
    cfg = NodeConfig()
    cfg.security.authorization_enabled = False
    gate = RemotingGate(SecurityService(None, cfg), "broker")
    codes = sorted({int(c) for c in RC} - {int(c) for c in _BODY_CHECKED})
    refused_security = 0
    for code in codes:
        for topic in TOPICS:
            cmd, conn = _request(code, topic, field), _Conn()
            rule = all(gate._allowed(ANONYMOUS, op, rt, name, "127.0.0.1", code) for op, rt, name in _checks(cmd))
            answer = asyncio.run(gate.check(conn, cmd))
            assert (answer is None) == rule, (code, topic, field, answer)
            if answer is None:
                assert conn.attrs["principal"] == ANONYMOUS
            else:
                assert answer.code == R.NO_PERMISSION and SECURITY_TOPIC in answer.remark
                refused_security += topic == SECURITY_TOPIC
    # the security records are refused to the send, pull and describe codes alike
    assert refused_security >= len({RC.SEND_MESSAGE_V2, RC.PULL_MESSAGE, RC.GET_MAX_OFFSET, RC.QUERY_MESSAGE})


def _call(addr: str, cmds: list[RemotingCommand]) -> list[RemotingCommand]:
    from gateway_native.transport import open_connection

    async def run() -> list[RemotingCommand]:
        conn = await open_connection(addr)
        try:
            return [await conn.invoke(cmd, 10) for cmd in cmds]
        finally:
            conn.close()
    return asyncio.run(run())


def test_a_node_without_authorization_serves_topics_but_never_the_security_records(tmp_path):
    from gateway_native.client import Admin

    topic = f"T_{uuid.uuid4().hex[:8]}"
    with RunningNode(tmp_path / "data") as node:
        with Admin(node.namesrv_addr, timeout_ms=10_000) as admin:
            admin.create_topic(topic, 1)
        props = "UNIQ_KEY\x01K1\x02WAIT\x01true\x02"

        def requests(t: str) -> list[RemotingCommand]:
            send = RemotingCommand.request(RC.SEND_MESSAGE_V2, {
                "a": "P1", "b": t, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "i": props,
                "j": "0", "k": "false", "m": "false"}, b"payload")
            pull = RemotingCommand.request(RC.PULL_MESSAGE, {
                "consumerGroup": "G1", "topic": t, "queueId": "0", "queueOffset": "0", "maxMsgNums": "8",
                "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subscription": "*",
                "subVersion": "0"})
            high = RemotingCommand.request(RC.GET_MAX_OFFSET, {"topic": t, "queueId": "0"})
            return [send, pull, high]  # the pull carries its subscription (sysFlag 4)

        own = _call(node.broker_addr, requests(topic))
        assert [c.code for c in own] == [R.SUCCESS, R.SUCCESS, R.SUCCESS], [(c.code, c.remark) for c in own]
        assert json.loads(own[2].ext_fields["offset"]) == 1  # the message sent is there to read
        refused = _call(node.broker_addr, requests(SECURITY_TOPIC))
        assert [c.code for c in refused] == [R.NO_PERMISSION] * 3, [(c.code, c.remark) for c in refused]
        assert all(SECURITY_TOPIC in c.remark for c in refused)
