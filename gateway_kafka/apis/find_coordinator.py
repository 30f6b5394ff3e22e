"""FindCoordinator (key 10), versions 0-6.

Every group and transactional id is coordinated by the node the gateway's ``ClusterView``
names: the broker group's master (for an all-in-one node, itself); COORDINATOR_NOT_AVAILABLE
while the group has no master. v4+ batches keys (``coordinator_keys``) and answers
one entry per key. An empty group id gets INVALID_REQUEST; key types other than group (0) and
transaction (1) get INVALID_REQUEST, as share groups are not offered.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


def _locate(ctx: RequestContext, key: str, key_type: int) -> dict:
    if key_type not in (0, 1):
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": E.INVALID_REQUEST,
                "error_message": f"coordinator key type {key_type} is not supported"}
    if key_type == 0 and not authz.group(ctx, authz.Op.DESCRIBE, key):
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": E.GROUP_AUTHORIZATION_FAILED,
                "error_message": f"{ctx.conn.principal} may not DESCRIBE group {key}"}
    if key_type == 1 and not authz.txn_id(ctx, authz.Op.DESCRIBE, key):
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                "error_message": f"{ctx.conn.principal} may not DESCRIBE transactional id {key}"}
    node = ctx.gateway.cluster.coordinator(key, key_type)
    if node is not None:
        node = ctx.gateway.advertised(ctx.conn.listener, node)
    if node is None:
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": E.COORDINATOR_NOT_AVAILABLE,
                "error_message": "the broker group has no master now; coordinators live on the master"}
    return {"key": key, "node_id": node.node_id, "host": node.host, "port": node.port, "error_code": E.NONE,
            "error_message": None}


@api(key=10, min=0, max=6)
async def handle(ctx: RequestContext, body: dict) -> dict:
    key_type = body.get("key_type", 0)
    if ctx.api_version >= 4:
        return {"throttle_time_ms": 0,
                "coordinators": [_locate(ctx, k, key_type) for k in body.get("coordinator_keys") or ()]}
    found = _locate(ctx, body.get("key", ""), key_type)
    return {"throttle_time_ms": 0, "error_code": found["error_code"], "error_message": found["error_message"],
            "node_id": found["node_id"], "host": found["host"], "port": found["port"]}
