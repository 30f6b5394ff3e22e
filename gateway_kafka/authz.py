"""Kafka requests mapped onto the one policy model (``engine.security``, docs/design/security.md).

Handlers ask here, with Kafka's operation per API (the table in the design note): the
connection's principal (SASL login, client certificate or ``User:ANONYMOUS``) and host go to
``SecurityService.authorize``. Nothing here keeps state; the decision and the ACLs are the
engine's. With authorization off every principal is allowed (except reading the internal
security topic), so these calls cost one attribute check on the hot paths.
"""

from __future__ import annotations

from typing import Any, Iterable

from engine.security import CLUSTER_NAME, Operation as Op, ResourceType as RT

__all__ = ["Op", "RT", "allowed", "cluster", "topic", "group", "txn_id", "split_topics", "enabled", "authorized_operations",
           "topic_operations", "cluster_operations", "TOPIC_OPERATIONS", "CLUSTER_OPERATIONS", "NOT_ASKED"]


def enabled(ctx: Any) -> bool:
    sec = ctx.gateway.security
    return sec.authorization_enabled or bool(sec.super_users)


def allowed(ctx: Any, op: Op, rtype: RT, name: str) -> bool:
    conn = ctx.conn
    return ctx.gateway.security.authorize(conn.principal, op, rtype, name, conn.peer_host, "kafka")


def cluster(ctx: Any, op: Op) -> bool:
    return allowed(ctx, op, RT.CLUSTER, CLUSTER_NAME)


def topic(ctx: Any, op: Op, name: str) -> bool:
    return allowed(ctx, op, RT.TOPIC, name)


def group(ctx: Any, op: Op, name: str) -> bool:
    return allowed(ctx, op, RT.GROUP, name)


def txn_id(ctx: Any, op: Op, name: str) -> bool:
    return allowed(ctx, op, RT.TRANSACTIONAL_ID, name)


def authorized_operations(ctx: Any, rtype: RT, name: str, supported: int) -> int:
    """Kafka's authorized-operations bit set: the ``supported`` operations (a bit per code) the
    caller may perform on the resource."""
    return sum(1 << op for op in Op if supported & (1 << op) and allowed(ctx, op, rtype, name))


# KIP-430: what DescribeTopics / DescribeCluster can report (Kafka's supportedOperations)
TOPIC_OPERATIONS = sum(1 << op for op in (Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE,
                                          Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
CLUSTER_OPERATIONS = sum(1 << op for op in (Op.CREATE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
                                            Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE))
NOT_ASKED = -2147483648  # Kafka's "authorized operations not requested"


def topic_operations(ctx: Any, name: str) -> int:
    return authorized_operations(ctx, RT.TOPIC, name, TOPIC_OPERATIONS)


def cluster_operations(ctx: Any) -> int:
    return authorized_operations(ctx, RT.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)


def split_topics(ctx: Any, op: Op, names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(allowed, denied) topic names for ``op``."""
    ok, denied = set(), set()
    for n in names:
        (ok if topic(ctx, op, n) else denied).add(n)
    return ok, denied


def subscription_refusal(ctx: Any, body: dict) -> dict | None:
    """KIP-848 / KIP-932 heartbeats (Kafka's KafkaApis rule): a subscription naming a topic the
    member may not DESCRIBE is refused with TOPIC_AUTHORIZATION_FAILED — it would otherwise be
    assigned the partitions of a topic it cannot see (internal topics included)."""
    names = body.get("subscribed_topic_names") or ()
    _ok, denied = split_topics(ctx, Op.DESCRIBE, names)
    if not denied:
        return None
    return {"throttle_time_ms": 0, "error_code": 29, "member_id": body.get("member_id"),
            "error_message": f"{ctx.conn.principal} is not authorized to describe topics {sorted(denied)}",
            "member_epoch": body.get("member_epoch", 0), "heartbeat_interval_ms": 0, "assignment": None}


# Requests whose whole answer depends on one resource named in the request: api key ->
# (resource type, operation, request field naming it (None = the cluster), error code). The
# listener checks these before the handler runs and answers the API's default body with the
# error (docs/design/security.md, "Kafka operations").
_GROUP_AF, _TXN_AF, _CLUSTER_AF = 30, 53, 31
REQUEST_CHECKS: dict[int, tuple[RT, Op, str | None, int]] = {
    11: (RT.GROUP, Op.READ, "group_id", _GROUP_AF),  # JoinGroup
    14: (RT.GROUP, Op.READ, "group_id", _GROUP_AF),  # SyncGroup
    12: (RT.GROUP, Op.READ, "group_id", _GROUP_AF),  # Heartbeat
    13: (RT.GROUP, Op.READ, "group_id", _GROUP_AF),  # LeaveGroup
    68: (RT.GROUP, Op.READ, "group_id", _GROUP_AF),  # ConsumerGroupHeartbeat
    25: (RT.TRANSACTIONAL_ID, Op.WRITE, "transactional_id", _TXN_AF),  # AddOffsetsToTxn
    26: (RT.TRANSACTIONAL_ID, Op.WRITE, "transactional_id", _TXN_AF),  # EndTxn
    60: (RT.CLUSTER, Op.DESCRIBE, None, _CLUSTER_AF),  # DescribeCluster
    43: (RT.CLUSTER, Op.ALTER, None, _CLUSTER_AF),  # ElectLeaders (Kafka's rule)
}


def refused(ctx: Any, api_key: int, body: dict) -> dict | None:
    """The error answer when the request's one resource is not allowed, else None."""
    check = REQUEST_CHECKS.get(api_key)
    if check is None:
        return None
    rtype, op, field, code = check
    name = CLUSTER_NAME if field is None else str(body.get(field) or "")
    if allowed(ctx, op, rtype, name):
        return None
    from gateway_kafka.protocol.codec import body_defaults

    answer = body_defaults(api_key, ctx.api_version)
    answer["error_code"] = code
    if "error_message" in answer:
        answer["error_message"] = f"{ctx.conn.principal} may not {op.name} {rtype.name} {name}"
    return answer
