"""ConsumerGroupHeartbeat (key 68), versions 0-1 — the KIP-848 consumer group protocol.

A member joins with epoch 0 (its subscription: topic names and/or a regular expression, the
server assignor it wants, the partitions it owns), then heartbeats every
``heartbeat_interval_ms``; the broker computes the group's target assignment (``uniform`` or
``range``) and hands each member its partitions as soon as nobody else owns them, revoking
first where the target moved them. Epoch -1 leaves, -2 leaves a static member for a restart.
v1 members generate their own id (KIP-1082); v0 members without one get one from the broker.
See ``gateway_kafka.consumer_groups`` and docs/design/consumer-groups.md.

Errors as Kafka: INVALID_REQUEST (missing fields), UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED,
INVALID_REGULAR_EXPRESSION, GROUP_ID_NOT_FOUND (a classic group that cannot convert),
COORDINATOR_NOT_AVAILABLE (the group's state could not be stored), TOPIC_AUTHORIZATION_FAILED
(a subscribed topic name the member may not DESCRIBE, as Kafka).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=68, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gid = body.get("group_id") or ""
    if ctx.gateway.streams_groups.owns(gid):  # a streams group's id (KIP-1071): not a consumer group
        return {"throttle_time_ms": 0, "error_code": E.GROUP_ID_NOT_FOUND,
                "error_message": f"Group {gid} is not a consumer group.", "member_id": body.get("member_id"),
                "member_epoch": body.get("member_epoch", 0), "heartbeat_interval_ms": 0, "assignment": None}
    refusal = authz.subscription_refusal(ctx, body)
    if refusal is not None:
        return refusal
    return await ctx.gateway.modern_groups.consumer_heartbeat(body, ctx.client_id or "", "/" + ctx.conn.peer_host,
                                                              ctx.api_version)
