"""ShareGroupHeartbeat (key 76), version 1 — KIP-932 share group membership.

A member joins with epoch 0 and its subscribed topic names, then heartbeats every
``heartbeat_interval_ms``; the broker's ``simple`` assignor gives every subscribed partition to at
least one member, sharing partitions when members outnumber them. Epoch -1 leaves: the records
the member holds are released (``gateway_kafka.share_groups``). Membership is
``gateway_kafka.consumer_groups``; see docs/design/share-groups.md.

Errors as Kafka: INVALID_REQUEST (missing fields), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
GROUP_MAX_SIZE_REACHED, GROUP_ID_NOT_FOUND (a classic group with members),
GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED (a subscribed topic the member may not
DESCRIBE, as Kafka), COORDINATOR_NOT_AVAILABLE (the group could not be stored).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import share_groups
from gateway_kafka.apis import RequestContext, api


@api(key=76, min=1, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gid = body.get("group_id") or ""
    if not authz.group(ctx, authz.Op.READ, gid):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED, "error_message": None,
                "member_id": None, "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}
    refusal = authz.subscription_refusal(ctx, body)  # a topic it may not see is not assigned to it
    if refusal is not None:
        return refusal
    share_groups.for_gateway(ctx.gateway)  # listens for members leaving from the first heartbeat on
    return await ctx.gateway.modern_groups.share_heartbeat(body, ctx.client_id or "", "/" + ctx.conn.peer_host)
