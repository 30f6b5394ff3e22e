"""Heartbeat (key 12), versions 0-4 — keeps a member's session alive and tells it about a
rebalance (REBALANCE_IN_PROGRESS) or a stale generation (ILLEGAL_GENERATION); see
``gateway_kafka.coordinator``."""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=12, min=0, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    args = dict(group_id=body.get("group_id", ""), member_id=body.get("member_id", ""),
                generation_id=body.get("generation_id", -1), group_instance_id=body.get("group_instance_id"))
    code = ctx.gateway.modern_groups.classic_heartbeat(**args)  # None: a classic group
    if code is None:
        code = ctx.gateway.coordinator.heartbeat(**args)
    return {"throttle_time_ms": 0, "error_code": code}
