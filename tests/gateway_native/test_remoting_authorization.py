"""Every remoting code the broker and the NameServer answer (and every other code of
RocketMQ's RequestCode this project knows), sent by a signed user with no grants, on a node with authorization on (docs/design/security.md, "Remoting operations"):
each is refused with NO_PERMISSION naming the user and the rule, except HEART_BEAT, which
names no group and no topic here and so reveals nothing. The design note's table of codes is
the code's (``gateway_native.security.rule_of``), row by row."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path

import pytest

import gateway_native.controller  # noqa: F401  (registers the controller's codes on the NameServer table)
from gateway_native.namesrv import NAMESRV_PROCESSORS
from gateway_native.processors import BROKER_PROCESSORS
from gateway_native.remoting import acl
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from gateway_native.remoting.command import RemotingCommand
from gateway_native.security import rule_of
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(240)

INNER = ("rockafka-node", "node-secret-1")
NOBODY = ("nobody", "nobody-secret-1")
DOC = Path(__file__).resolve().parents[2] / "docs" / "design" / "security.md"


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    n = RunningNode(tmp_path_factory.mktemp("remoting-authz") / "data", settings={
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}",
        "connection.failed.authentication.delay.ms": "10",
    })
    with n:
        yield n


@pytest.fixture(scope="module")
def world(node):
    from gateway_native.client import Admin, Message, Producer

    topic, group = f"T_{uuid.uuid4().hex[:8]}", f"C_{uuid.uuid4().hex[:8]}"
    with Admin(node.namesrv_addr, timeout_ms=10_000, credentials=INNER) as a:
        a.create_topic(topic, 1)
        a.update_acl_config(*NOBODY)  # a secret, and no permission at all
    with Producer(f"P_{uuid.uuid4().hex[:6]}", node.namesrv_addr, credentials=INNER) as p:
        sent = p.send(Message(topic, b"not for nobody", keys="k1"))
    return {"topic": topic, "group": group, "offset": int(sent.offset_msg_id[-16:], 16)}


def call_all(addr: str, requests: list[RemotingCommand]) -> list[RemotingCommand]:
    from gateway_native.transport import open_connection

    async def run() -> list[RemotingCommand]:
        conn = await open_connection(addr)
        try:
            out = []
            for cmd in requests:
                acl.sign(cmd, *NOBODY)
                out.append(await conn.invoke(cmd, 10))
            return out
        finally:
            conn.close()
    return asyncio.run(run())


def request(code: int, world: dict) -> RemotingCommand:
    """A well-formed request of ``code`` naming the test's topic and group wherever one is read."""
    t, g = world["topic"], world["group"]
    fields = {"topic": t, "consumerGroup": g, "group": g, "groupName": g, "producerGroup": g, "queueId": "0",
              "queueOffset": "0", "maxMsgNums": "8", "sysFlag": "0", "commitOffset": "0", "offset": str(world["offset"]),
              "key": t, "namespace": "ORDER_TOPIC_CONFIG", "timestamp": "0", "maxNum": "8", "beginTimestamp": "0",
              "endTimestamp": str(1 << 62), "clientId": "c1", "brokerName": "broker-a", "clusterName": "DefaultCluster",
              "username": "nobody", "subject": "User:nobody", "accessKey": "nobody2", "secretKey": "x" * 8,
              "invisibleTime": "60000", "pollTime": "0", "bornTime": "0", "initMode": "0", "expType": "TAG", "exp": "*"}
    body = b""
    if code in (RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ):
        body = json.dumps({"consumerGroup": g, "clientId": "c1",
                           "mqSet": [{"topic": t, "brokerName": "broker-a", "queueId": 0}]}).encode()
    elif code == RC.HEART_BEAT:
        body = json.dumps({"clientID": "c1", "producerDataSet": [], "consumerDataSet": []}).encode()
    return RemotingCommand.request(code, fields, body)


# what a user without grants still gets: nothing that names a group, a topic or the cluster
OPEN_CODES = {RC.HEART_BEAT}


@pytest.mark.parametrize("server", ["broker", "namesrv"])
def test_a_user_without_grants_gets_nothing_from_any_code(node, world, server):
    table, addr = (BROKER_PROCESSORS, node.broker_addr) if server == "broker" else (NAMESRV_PROCESSORS, node.namesrv_addr)
    # what this server answers, and every other code a RocketMQ client knows (answered
    # REQUEST_CODE_NOT_SUPPORTED to those who may ask; a user without grants may not even learn that)
    codes = sorted(set(table.codes()) | {int(c) for c in RC})
    assert len(set(table.codes())) > (60 if server == "broker" else 20) and len(codes) > 100
    answers = call_all(addr, [request(c, world) for c in codes])
    wrong = []
    answered = set(table.codes())
    for code, resp in zip(codes, answers):
        if code not in answered and resp.code == R.REQUEST_CODE_NOT_SUPPORTED and not resp.body:
            continue  # a code this server does not answer: nothing revealed either way
        if code in OPEN_CODES:
            if resp.code != R.SUCCESS:
                wrong.append((code, resp.code, resp.remark))
            continue
        if resp.code != R.NO_PERMISSION or not (resp.remark or "").startswith("User:nobody may not ") or resp.body:
            wrong.append((code, resp.code, resp.remark))
    assert not wrong, f"codes answered to a user without grants: {wrong}"


def test_the_message_read_by_id_is_checked_against_its_topic(node, world):
    """The reported hole: VIEW_MESSAGE_BY_ID answered any signed user."""
    (resp,) = call_all(node.broker_addr, [RemotingCommand.request(RC.VIEW_MESSAGE_BY_ID, {"offset": str(world["offset"])})])
    assert resp.code == R.NO_PERMISSION and f"READ TOPIC {world['topic']}" in resp.remark and not resp.body


def _doc_rows(marker: str) -> list[list[str]]:
    text = DOC.read_text()
    block = re.search(rf"<!-- {marker}:begin -->\n(.*?)<!-- {marker}:end -->", text, re.S)
    assert block, f"{marker} table missing from {DOC}"
    lines = [ln for ln in block.group(1).splitlines() if ln.startswith("|")][2:]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]


def test_design_note_lists_every_code_with_its_rule():
    documented = {int(code): rule for code, _name, _where, rule in _doc_rows("remoting-codes")}
    answered = set(BROKER_PROCESSORS.codes()) | set(NAMESRV_PROCESSORS.codes())
    assert set(documented) == answered
    assert {c: rule_of(c) for c in answered} == documented


def test_design_note_lists_every_read_path():
    from engine.security.reads import READ_PATHS

    assert [(p, r, c) for p, r, c in _doc_rows("read-paths")] == [(x.protocol, x.request, x.checked) for x in READ_PATHS]


def _call_as(addr: str, creds: tuple[str, str], code: int, fields: dict) -> RemotingCommand:
    from gateway_native.transport import open_connection

    async def run() -> RemotingCommand:
        conn = await open_connection(addr)
        try:
            cmd = RemotingCommand.request(code, {k: str(v) for k, v in fields.items()})
            acl.sign(cmd, *creds)
            return await conn.invoke(cmd, 10)
        finally:
            conn.close()
    return asyncio.run(run())


def test_end_transaction_needs_write_on_the_half_messages_topic(node, world):
    """END_TRANSACTION names no topic: the half message's real topic, found in the log, is checked."""
    sent = _call_as(node.broker_addr, INNER, RC.SEND_MESSAGE, {
        "producerGroup": "pg_txn", "topic": world["topic"], "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 0, "sysFlag": 4, "bornTimestamp": 0, "flag": 0, "reconsumeTimes": 0,
        "properties": "TRAN_MSG\x01true\x02PGROUP\x01pg_txn\x02"})
    assert sent.code == R.SUCCESS, sent.remark
    end = {"producerGroup": "pg_txn", "tranStateTableOffset": sent.ext_fields["queueOffset"],
           "commitLogOffset": int(sent.ext_fields["msgId"][-16:], 16), "commitOrRollback": 8,
           "fromTransactionCheck": "false"}
    refused = _call_as(node.broker_addr, NOBODY, RC.END_TRANSACTION, end)
    assert refused.code == R.NO_PERMISSION and f"User:nobody may not WRITE TOPIC {world['topic']}" in refused.remark
    assert _call_as(node.broker_addr, INNER, RC.END_TRANSACTION, end).code == R.SUCCESS  # the request was sound
