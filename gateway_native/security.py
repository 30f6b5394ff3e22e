"""Remoting requests mapped onto the one policy model (``engine.security``, docs/design/security.md).

``RemotingGate`` runs before a request's processor on the NameServer and broker listeners:

1. who: a request carrying ``AccessKey`` must carry a valid ``Signature`` (the Java client's
   ``AclClientRPCHook``, ``remoting/acl.py``) — checked whether or not authentication is
   required, so a wrong secret is never silently accepted; the principal is ``User:<AccessKey>``.
   Without one: a verified client certificate's principal (TLS), else ``User:ANONYMOUS`` — refused
   outright when ``authenticationEnabled``. A failed check answers NO_PERMISSION with a remark
   saying why, after ``connection.failed.authentication.delay.ms``, and is counted.
2. may it: the request code's checks (``_checks``: RocketMQ PUB = WRITE topic, SUB = READ topic
   and READ group, operator requests on the cluster) go to ``SecurityService.authorize``; a
   refusal is NO_PERMISSION naming principal, operation and resource.

Requests this side of the wire answers for others (responses) are never gated.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from engine.security import ANONYMOUS, CLUSTER_NAME, SECURITY_TOPIC, Operation as Op, ResourceType as RT, principal_of
from engine.security.reads import read_resource

from .remoting import acl
from .remoting.codes import RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"

_READ_TOPIC_AND_GROUP = {RC.PULL_MESSAGE, RC.LITE_PULL_MESSAGE, RC.QUERY_CONSUMER_OFFSET, RC.UPDATE_CONSUMER_OFFSET,
                         RC.POP_MESSAGE, RC.ACK_MESSAGE, RC.CHANGE_MESSAGE_INVISIBLETIME, RC.PEEK_MESSAGE,
                         RC.INVOKE_BROKER_TO_RESET_OFFSET, RC.RESET_CONSUMER_CLIENT_OFFSET, RC.QUERY_ASSIGNMENT,
                         RC.SET_MESSAGE_REQUEST_MODE, RC.POLLING_INFO, RC.NOTIFICATION}
_WRITE_TOPIC = {RC.SEND_MESSAGE, RC.SEND_MESSAGE_V2, RC.SEND_BATCH_MESSAGE, RC.END_TRANSACTION}
_DESCRIBE_TOPIC = {RC.GET_ROUTEINFO_BY_TOPIC, RC.GET_MAX_OFFSET, RC.GET_MIN_OFFSET, RC.SEARCH_OFFSET_BY_TIMESTAMP,
                   RC.GET_EARLIEST_MSG_STORETIME, RC.GET_TOPIC_STATS_INFO, RC.QUERY_TOPIC_CONSUME_BY_WHO,
                   RC.GET_TOPIC_CONFIG, RC.QUERY_CONSUME_QUEUE}
_READ_TOPIC = {RC.QUERY_MESSAGE}
_READ_GROUP = {RC.CONSUMER_SEND_MSG_BACK, RC.UNREGISTER_CLIENT, RC.GET_CONSUMER_LIST_BY_GROUP, RC.CHECK_CLIENT_CONFIG,
               RC.BATCH_ACK_MESSAGE}
_DESCRIBE_GROUP = {RC.GET_CONSUMER_CONNECTION_LIST, RC.GET_CONSUME_STATS, RC.QUERY_TOPICS_BY_CONSUMER,
                   RC.GET_CONSUMER_RUNNING_INFO, RC.GET_CONSUMER_STATUS_FROM_CLIENT,
                   RC.INVOKE_BROKER_TO_GET_CONSUMER_STATUS}
# what only brokers (inner credentials) and super users send: registrations, and the failover
# controller's broker requests (docs/design/failover.md); its two read-only views need DESCRIBE
_CLUSTER_ACTION = {RC.AUTH_CHECK_FOR_NAMESRV, RC.REGISTER_BROKER, RC.UNREGISTER_BROKER, RC.BROKER_HEARTBEAT, RC.CONTROLLER_REGISTER_BROKER,
                   RC.CONTROLLER_GET_REPLICA_INFO, RC.CONTROLLER_ALTER_SYNC_STATE_SET, RC.CONTROLLER_ELECT_MASTER}
_ALTER_CLUSTER = {RC.UPDATE_BROKER_CONFIG, RC.WIPE_WRITE_PERM_OF_BROKER, RC.ADD_WRITE_PERM_OF_BROKER,
                  RC.UPDATE_NAMESRV_CONFIG, RC.PUT_KV_CONFIG, RC.DELETE_KV_CONFIG, RC.CLEAN_EXPIRED_CONSUMEQUEUE,
                  RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, RC.CONSUME_MESSAGE_DIRECTLY}
UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG, GET_BROKER_CLUSTER_ACL_INFO = 50, 51, 52
_ALTER_CLUSTER |= {UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG}
_ALTER_CLUSTER |= {RC.AUTH_CREATE_USER, RC.AUTH_UPDATE_USER, RC.AUTH_DELETE_USER, RC.AUTH_CREATE_ACL,
                   RC.AUTH_UPDATE_ACL, RC.AUTH_DELETE_ACL, RC.UPDATE_CONTROLLER_CONFIG, RC.CLEAN_BROKER_DATA}
# a user's record carries its remoting secret (getUser shows it, as RocketMQ): who may read it
# could sign as that user, so reading users is an administrator's, not an operator's
_ALTER_CLUSTER |= {RC.AUTH_GET_USER, RC.AUTH_LIST_USER}
# what any authenticated client may ask: nothing here reveals data (a heartbeat's consumer
# groups and subscriptions are checked from its body, see heartbeat_checks)
_ANY_PRINCIPAL = {RC.HEART_BEAT}
# authenticated here, authorized by the processor once it knows the resource: a message read by
# id is checked against the topic the message is in (processors/query.py), never the request's
_CHECKED_BY_PROCESSOR = {RC.VIEW_MESSAGE_BY_ID}
ORDER_TOPIC_NAMESPACE = "ORDER_TOPIC_CONFIG"


_BODY_CHECKED = frozenset({RC.HEART_BEAT, RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ})
# codes whose checks name only the request's topic field (as a topic, or a retry / DLQ topic's
# group) and its group: without authorization each of them passes unless that topic is the
# security records (``SecurityService.authorize``), so the gate decides them from the one field
_TOPIC_FIELD_ONLY = frozenset(_WRITE_TOPIC | _READ_TOPIC_AND_GROUP | _DESCRIBE_TOPIC | _READ_TOPIC)


def _topic_of(cmd: RemotingCommand) -> str:
    f = cmd.ext_fields
    return f.get("topic") or f.get("b") or ""  # SEND_MESSAGE_V2 abbreviates its header fields


def _group_of(cmd: RemotingCommand) -> str:
    f = cmd.ext_fields
    return f.get("consumerGroup") or f.get("group") or f.get("groupName") or ""


def _topic_check(op: Op, topic: str) -> tuple[Op, RT, str]:
    """A retry / DLQ topic belongs to its group: using it is using the group (RocketMQ's rule,
    ``engine.security.reads.read_resource``)."""
    if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return read_resource(topic)
    return op, RT.TOPIC, topic


def _checks(cmd: RemotingCommand) -> list[tuple[Op, RT, str]]:
    code = cmd.code
    out: list[tuple[Op, RT, str]] = []
    if code in _WRITE_TOPIC:
        topic = _topic_of(cmd)
        if topic:
            out.append(_topic_check(Op.WRITE, topic))
    elif code in _READ_TOPIC_AND_GROUP:
        topic, group = _topic_of(cmd), _group_of(cmd)
        out.append(_topic_check(Op.READ, topic))  # a request naming no topic reads none: refused
        if group:
            out.append((Op.READ, RT.GROUP, group))
    elif code in _DESCRIBE_TOPIC:
        topic = _topic_of(cmd)
        out.append(_topic_check(Op.DESCRIBE, topic) if not topic.startswith((RETRY_PREFIX, DLQ_PREFIX))
                   else (Op.DESCRIBE, RT.GROUP, topic.split("%", 2)[-1]))
    elif code in _READ_TOPIC:
        out.append(_topic_check(Op.READ, _topic_of(cmd)))
    elif code in _READ_GROUP:
        group = _group_of(cmd)
        if group:
            out.append((Op.READ, RT.GROUP, group))
    elif code in _DESCRIBE_GROUP:
        out.append((Op.DESCRIBE, RT.GROUP, _group_of(cmd)))
    elif code == RC.UPDATE_AND_CREATE_TOPIC:
        out.append((Op.CREATE, RT.TOPIC, _topic_of(cmd)))  # or CREATE on the cluster: see _allowed
    elif code in (RC.DELETE_TOPIC_IN_BROKER, RC.DELETE_TOPIC_IN_NAMESRV):
        out.append((Op.DELETE, RT.TOPIC, _topic_of(cmd)))
    elif code == RC.DELETE_SUBSCRIPTIONGROUP:
        out.append((Op.DELETE, RT.GROUP, _group_of(cmd)))
    elif code in (RC.LOCK_BATCH_MQ, RC.UNLOCK_BATCH_MQ):
        try:
            body = json.loads(bytes(cmd.body or b"{}"))
        except ValueError:
            body = {}
        group = str(body.get("consumerGroup") or "")
        out.append((Op.READ, RT.GROUP, group))
        for mq in body.get("mqSet") or ():
            if isinstance(mq, dict) and mq.get("topic"):
                out.append(_topic_check(Op.READ, str(mq["topic"])))
    elif code == RC.GET_KV_CONFIG and cmd.ext_fields.get("namespace") == ORDER_TOPIC_NAMESPACE:
        out.append((Op.DESCRIBE, RT.TOPIC, str(cmd.ext_fields.get("key") or "")))  # a topic's order config
    elif code in _CLUSTER_ACTION:
        out.append((Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME))
    elif code in _ALTER_CLUSTER:
        out.append((Op.ALTER, RT.CLUSTER, CLUSTER_NAME))
    elif code not in _ANY_PRINCIPAL and code not in _CHECKED_BY_PROCESSOR:
        out.append((Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME))  # other operator reads
    return out


def rule_of(code: int) -> str:
    """The rule a request code is authorized by, as docs/design/security.md's table names it."""
    if code == RC.CONSUMER_SEND_MSG_BACK:
        return "READ group; READ on the message's topic"
    if code == RC.END_TRANSACTION:
        return "WRITE on the half message's real topic"
    for rule, codes in (("WRITE topic", _WRITE_TOPIC), ("READ topic and group", _READ_TOPIC_AND_GROUP),
                        ("DESCRIBE topic", _DESCRIBE_TOPIC), ("READ topic", _READ_TOPIC),
                        ("READ group", _READ_GROUP), ("DESCRIBE group", _DESCRIBE_GROUP),
                        ("CLUSTER_ACTION cluster", _CLUSTER_ACTION), ("ALTER cluster", _ALTER_CLUSTER),
                        ("READ each announced group and topic", _ANY_PRINCIPAL),
                        ("READ on the message's topic", _CHECKED_BY_PROCESSOR)):
        if code in codes:
            return rule
    special = {RC.UPDATE_AND_CREATE_TOPIC: "CREATE cluster or topic", RC.DELETE_TOPIC_IN_BROKER: "DELETE topic",
               RC.DELETE_TOPIC_IN_NAMESRV: "DELETE topic", RC.DELETE_SUBSCRIPTIONGROUP: "DELETE group",
               RC.LOCK_BATCH_MQ: "READ group and each topic", RC.UNLOCK_BATCH_MQ: "READ group and each topic",
               RC.GET_KV_CONFIG: "DESCRIBE topic (order config) or cluster"}
    return special.get(code, "DESCRIBE cluster")


def processor_check(broker: Any, conn: Any, cmd: RemotingCommand, topic: str, op: Op = Op.READ) -> str | None:
    """For processors that find a message's topic in the log (VIEW_MESSAGE_BY_ID, the message a
    CONSUMER_SEND_MSG_BACK copies, the half message END_TRANSACTION resolves): None when the
    request's principal may ``op`` (READ: read, by ``read_resource``) that topic, else the
    NO_PERMISSION remark. The principal is the request's own (its signature, already verified
    by the gate), never a connection-wide value another request could have set. None on a
    broker whose listener has no gate (no security)."""
    gate = getattr(getattr(broker, "server", None), "gate", None)
    if gate is None:
        return None
    principal, _reason, remark = gate.principal(conn, cmd)
    if principal is None:
        return remark
    host = conn.remote_addr.rsplit(":", 1)[0] if getattr(conn, "remote_addr", None) else "*"
    op, rtype, name = read_resource(topic) if op == Op.READ else _topic_check(op, topic)
    if gate.security.authorize(principal, op, rtype, name, host, gate.listener):
        return None
    return f"{principal} may not {op.name} {rtype.name} {name} (request code {cmd.code}); grant it with an ACL"


def heartbeat_checks(body: bytes) -> list[tuple[Op, RT, str]]:
    """HEART_BEAT announces consumer groups and their subscriptions: READ on each."""
    try:
        doc = json.loads(bytes(body or b"{}"))
    except ValueError:
        return []
    out = []
    for c in doc.get("consumerDataSet") or ():
        if isinstance(c, dict) and c.get("groupName"):
            out.append((Op.READ, RT.GROUP, str(c["groupName"])))
            for s in c.get("subscriptionDataSet") or ():
                topic = str(s.get("topic") or "") if isinstance(s, dict) else ""
                if topic and not topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                    out.append((Op.READ, RT.TOPIC, topic))
    return out


class RemotingGate:
    """Authentication and authorization of remoting requests on one listener."""

    def __init__(self, security: Any, listener: str):
        self.security = security
        self.listener = listener
        # a NameServer without users of its own: async (conn, cmd) -> (principal, remark), the
        # signature and the request's rights checked by a broker (namesrv.BrokerAuthDelegate)
        self.delegate: Any = None

    def principal(self, conn: Any, cmd: RemotingCommand) -> tuple[str | None, str, str]:
        """(principal, failure reason, remark): principal None when the request is refused."""
        sec = self.security
        ak = cmd.ext_fields.get(acl.ACCESS_KEY)
        if ak:
            wait = sec.throttled(ak, getattr(conn, "remote_addr", None))  # engine.security.throttle
            if wait:
                return None, "throttled", (f"too many failed authentications for AccessKey {ak} or this address; "
                                           f"retry after {max(1, int(wait * 1000))} ms")
            secret = sec.secret_of(ak)
            if secret is None:
                return None, "unknown_user", f"signature check failed: unknown AccessKey {ak}"
            if not acl.verify(cmd, secret):
                return None, "bad_signature", (f"signature check failed for AccessKey {ak}: the Signature does not "
                                               "match the request (wrong secret key?)")
            return principal_of(ak), "", ""
        cert = conn.attrs.get("cert_principal") if hasattr(conn, "attrs") else None
        if cert:
            return cert, "", ""
        if sec.authentication_enabled:
            return None, "not_authenticated", ("request not signed: this node requires authentication "
                                               "(AccessKey and Signature, e.g. the client's AclClientRPCHook)")
        return ANONYMOUS, "", ""

    async def check(self, conn: Any, cmd: RemotingCommand) -> RemotingCommand | None:
        """None when the request may go on; else the NO_PERMISSION answer."""
        sec = self.security
        principal, reason, remark = self.principal(conn, cmd)
        if principal is None and reason == "unknown_user" and self.delegate is not None:
            delegated, why = await self.delegate(conn, cmd)
            if delegated is not None:
                conn.attrs["principal"] = delegated
                return None  # a broker checked the signature and every right the request needs
            remark = why or remark
        if principal is None:
            delay = sec.failed(self.listener, reason, conn.remote_addr, cmd.ext_fields.get(acl.ACCESS_KEY),
                               code=cmd.code)
            if delay > 0:
                await asyncio.sleep(delay)
            return cmd.response(R.NO_PERMISSION, remark)
        if not sec.authorization_enabled:
            code = cmd.code
            if code in _BODY_CHECKED:
                return None  # everyone may; and these name no topic whose reading is always refused
            if code in _TOPIC_FIELD_ONLY and _topic_of(cmd) != SECURITY_TOPIC:
                conn.attrs["principal"] = principal  # what _checks + _allowed would decide, per request
                return None
        host = conn.remote_addr.rsplit(":", 1)[0]
        checks = _checks(cmd) if cmd.code != RC.HEART_BEAT else heartbeat_checks(cmd.body)
        for op, rtype, name in checks:
            if self._allowed(principal, op, rtype, name, host, cmd.code):
                continue
            return cmd.response(R.NO_PERMISSION, f"{principal} may not {op.name} {rtype.name} {name} "
                                                 f"(request code {cmd.code}); grant it with an ACL")
        conn.attrs["principal"] = principal
        return None

    def _allowed(self, principal: str, op: Op, rtype: RT, name: str, host: str, code: int) -> bool:
        sec = self.security
        if op == Op.CREATE and rtype == RT.TOPIC and sec.authorize(principal, Op.CREATE, RT.CLUSTER, CLUSTER_NAME, host):
            return True
        return sec.authorize(principal, op, rtype, name, host, self.listener)


def node_client_options(config: Any) -> dict[str, Any]:
    """How this node connects to other nodes (broker -> NameServer): signed with the inner
    credentials, over TLS when ``tlsEnable``."""
    from engine.security import parse_pair
    from broker.tls import client_context

    inner = parse_pair(config.security.inner_client_authentication_credentials, "accessKey", "secretKey")
    return {"signer": acl.signer(*inner) if inner else None,
            "ssl_context": client_context(config) if config.security.tls_enable else None}


def secure_server(server: Any, security: Any, config: Any) -> None:
    """Put a remoting server (NameServer or broker) under the node's security: the gate, and
    TLS as ``tlsServerMode`` says (permissive, the default as in RocketMQ, takes both)."""
    from broker.listener_limits import ListenerTls
    from broker import tls as sec_tls

    server.gate = RemotingGate(security, server.name)
    mode = sec_tls.tls_mode(config)
    if mode != "disabled":
        host = config.broker.broker_ip1 or config.host
        ctx = sec_tls.server_context(config, host)
        server.tls = ListenerTls(ctx, mode, on_failure=lambda listener, peer, reason: security.failed(
            listener, "tls_handshake", peer, error=reason),
            first_byte_timeout=float(config.limits.server_channel_max_idle_time_seconds))
        server.principal_mapper = sec_tls.PrincipalMapper(config.security.ssl_principal_mapping_rules)
