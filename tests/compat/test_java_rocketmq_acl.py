"""RocketMQ ACL on a secured node: the stock Java client with ``AclClientRPCHook`` sends and
consumes where its user is allowed and gets NO_PERMISSION where not; a bogus signature, an
unsigned request and an authenticated-but-unauthorized one are refused, each for the operations
anonymous clients could do before (create/delete topic, overwrite another group's offsets,
reset offsets, register a broker). Users and permissions go through RocketMQ's own
updateAclConfig request, signed with the node's inner credentials (a super user)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.compat import java_runner
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(300)

INNER = ("rockafka-node", "node-secret-1")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    base = tmp_path_factory.mktemp("rmq-acl")
    node = RunningNode(base / "data", settings={
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}",
        "connection.failed.authentication.delay.ms": "20",
    })
    with node:
        yield node


def admin(node, credentials=INNER):
    from gateway_native.client import Admin

    return Admin(node.namesrv_addr, timeout_ms=10_000, credentials=credentials)


def raw_request(node, addr: str, code: int, fields: dict, body: bytes = b"", credentials=None):
    """One request on a fresh connection (signed with ``credentials`` = (ak, sk) when given)."""
    from gateway_native.remoting import acl
    from gateway_native.remoting.command import RemotingCommand
    from gateway_native.transport import open_connection

    async def go():
        conn = await open_connection(addr, None, timeout=5, signer=acl.signer(*credentials) if credentials else None)
        try:
            return await conn.invoke(RemotingCommand.request(code, fields, body, language=0), 10)
        finally:
            conn.close()
    return asyncio.run(go())


@pytest.fixture(scope="module")
def app_user(secured):
    """User ``app``: PUB|SUB on topic rw, SUB on topic ro, SUB on its group."""
    rw, ro, group = unique("T_rw"), unique("T_ro"), unique("C_app")
    with admin(secured) as a:
        a.create_topic(rw, 4)
        a.create_topic(ro, 4)
        a.update_acl_config("app", "app-secret", topic_perms=f"{rw}=PUB|SUB,{ro}=SUB", group_perms=f"{group}=SUB")
    return {"rw": rw, "ro": ro, "group": group}


@pytest.mark.parametrize("client", ["4.9", "5.x"])
def test_java_client_with_acl_hook_sends_and_consumes(secured, app_user, client, tmp_path):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    cmd = java_runner.rocketmq_command(client, secured.namesrv_addr, "JSON", ["acl-send-consume"], tmp_path) + [
        "--access-key", "app", "--secret-key", "app-secret", "--topic", app_user["rw"], "--group", app_user["group"],
        "--messages", "20"]
    java_runner.run(cmd, timeout=240).assert_passed("acl-send-consume", 2)


def test_java_client_gets_no_permission_on_a_read_only_topic(secured, app_user, tmp_path):
    java_runner.build(java_runner.ROCKETMQ_DIR)
    cmd = java_runner.rocketmq_command("5.x", secured.namesrv_addr, "JSON", ["acl-send-denied"], tmp_path) + [
        "--access-key", "app", "--secret-key", "app-secret", "--topic", app_user["ro"]]
    java_runner.run(cmd, timeout=240).assert_passed("acl-send-denied", 1)


def test_bogus_signature_is_refused(secured, app_user):
    from gateway_native.remoting.codes import RequestCode as RC

    resp = raw_request(secured, secured.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": app_user["rw"]},
                       credentials=("app", "not-the-secret"))
    assert resp.code == 16 and "signature check failed" in (resp.remark or ""), (resp.code, resp.remark)
    resp = raw_request(secured, secured.namesrv_addr, RC.GET_ROUTEINFO_BY_TOPIC, {"topic": app_user["rw"]},
                       credentials=("app", "app-secret"))
    assert resp.code == 0


# each operation anonymous clients could do before: refused unsigned and refused for a user
# without the right, and (for the ones that change state) shown unchanged afterwards
def _refused(node, addr, code, fields, body=b""):
    for creds in (None, ("app", "app-secret")):
        resp = raw_request(node, addr, code, fields, body, credentials=creds)
        assert resp.code == 16, (creds, resp.code, resp.remark)
        assert resp.remark, "a refusal says why"


def test_create_topic_is_refused(secured, app_user):
    from gateway_native.remoting.codes import RequestCode as RC

    topic = unique("T_evil")
    _refused(secured, secured.broker_addr, RC.UPDATE_AND_CREATE_TOPIC,
             {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False})
    with admin(secured) as a:
        assert a.topic_route(topic) is None


def test_delete_topic_is_refused(secured, app_user):
    from gateway_native.remoting.codes import RequestCode as RC

    _refused(secured, secured.broker_addr, RC.DELETE_TOPIC_IN_BROKER, {"topic": app_user["rw"]})
    with admin(secured) as a:
        assert a.topic_route(app_user["rw"]) is not None


def test_offset_overwrite_for_another_group_is_refused(secured, app_user):
    from gateway_native.remoting.codes import RequestCode as RC

    victim = unique("C_victim")
    _refused(secured, secured.broker_addr, RC.UPDATE_CONSUMER_OFFSET,
             {"consumerGroup": victim, "topic": app_user["rw"], "queueId": 0, "commitOffset": 1000})
    resp = raw_request(secured, secured.broker_addr, RC.QUERY_CONSUMER_OFFSET,
                       {"consumerGroup": victim, "topic": app_user["rw"], "queueId": 0}, credentials=INNER)
    assert resp.code != 0 or int(resp.ext_fields.get("offset", -1)) != 1000


def test_reset_offset_is_refused(secured, app_user):
    from gateway_native.remoting.codes import RequestCode as RC

    _refused(secured, secured.broker_addr, RC.INVOKE_BROKER_TO_RESET_OFFSET,
             {"group": unique("C_victim"), "topic": app_user["rw"], "timestamp": 0, "isForce": True})


def test_register_broker_needs_an_authenticated_broker(secured, app_user):
    import json
    import zlib

    from gateway_native.remoting.codes import RequestCode as RC

    body = json.dumps({"topicConfigSerializeWrapper": {"topicConfigTable": {}, "dataVersion": {}}}).encode()
    fields = {"brokerAddr": "10.9.9.9:10911", "brokerId": 0, "brokerName": "broker-a", "clusterName": "DefaultCluster",
              "haServerAddr": "10.9.9.9:10912", "compressed": False, "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
    _refused(secured, secured.namesrv_addr, RC.REGISTER_BROKER, fields, body)
    with admin(secured) as a:
        addrs = a.cluster_info()["brokerAddrTable"]["broker-a"]["brokerAddrs"]
    assert "10.9.9.9:10911" not in addrs.values()


def test_rockafka_admin_authenticates_like_any_client(secured, tmp_path):
    import subprocess

    from tests.support.node import ROOT, rockafka_command

    def admin_cli(*args: str, creds=None):
        extra = ["--access-key", creds[0], "--secret-key", creds[1]] if creds else []
        return subprocess.run(rockafka_command() + ["admin", "--namesrv", secured.namesrv_addr, *extra, *args],
                              capture_output=True, text=True, timeout=60, cwd=str(ROOT))

    topic = unique("T_cli")
    refused = admin_cli("topics", "create", topic, "--queues", "2")
    assert refused.returncode == 1 and "request not signed" in refused.stderr, refused.stderr
    ok = admin_cli("topics", "create", topic, "--queues", "2", creds=INNER)
    assert ok.returncode == 0, ok.stderr
    ok = admin_cli("acl", "set-user", "cli-user", "cli-secret", "--topic-perms", f"{topic}=SUB", creds=INNER)
    assert ok.returncode == 0, ok.stderr
    listed = admin_cli("topics", "list", creds=("cli-user", "cli-secret"))
    assert listed.returncode == 1, "listing every topic is a cluster DESCRIBE the user was not given"
    wrong = admin_cli("topics", "list", creds=("cli-user", "guess"))
    assert wrong.returncode == 1 and "signature check failed" in wrong.stderr, wrong.stderr
