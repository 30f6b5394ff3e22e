"""StreamsGroupHeartbeat (key 88), version 0 — KIP-1071 streams group membership.

A Kafka Streams client joins with epoch 0, its topology and process id, then heartbeats every
``heartbeat_interval_ms`` reporting the tasks it owns; the broker creates the topology's
internal topics, assigns tasks and reconciles (``gateway_kafka.streams_groups``,
docs/design/streams-groups.md). Epoch -1 leaves.

Errors as Kafka: INVALID_REQUEST, UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH, GROUP_ID_NOT_FOUND (the
id belongs to a group of another type), STREAMS_INVALID_TOPOLOGY, STREAMS_INVALID_TOPOLOGY_EPOCH,
GROUP_AUTHORIZATION_FAILED, COORDINATOR_NOT_AVAILABLE (the group could not be stored).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=88, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gid = body.get("group_id") or ""
    if "streams" not in getattr(ctx.gateway.settings, "rebalance_protocols", {"streams"}):
        return {"throttle_time_ms": 0, "error_code": E.UNSUPPORTED_VERSION,
                "error_message": "The streams rebalance protocol is not enabled "
                                 "(group.coordinator.rebalance.protocols)", "member_id": body.get("member_id") or "",
                "member_epoch": 0, "heartbeat_interval_ms": 0, "acceptable_recovery_lag": 0,
                "task_offset_interval_ms": 0}
    if not authz.group(ctx, authz.Op.READ, gid):
        return {"throttle_time_ms": 0, "error_code": E.GROUP_AUTHORIZATION_FAILED,
                "error_message": f"{ctx.conn.principal} may not READ group {gid}",
                "member_id": body.get("member_id") or "", "member_epoch": 0, "heartbeat_interval_ms": 0,
                "acceptable_recovery_lag": 0, "task_offset_interval_ms": 0}
    return await ctx.gateway.streams_groups.heartbeat(body, ctx.client_id or "", "/" + ctx.conn.peer_host)
