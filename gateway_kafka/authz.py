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

__all__ = ["Op", "RT", "allowed", "cluster", "topic", "group", "txn_id", "split_topics", "enabled"]


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


def split_topics(ctx: Any, op: Op, names: Iterable[str]) -> tuple[set[str], set[str]]:
    """(allowed, denied) topic names for ``op``."""
    ok, denied = set(), set()
    for n in names:
        (ok if topic(ctx, op, n) else denied).add(n)
    return ok, denied
