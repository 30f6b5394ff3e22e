"""SyncGroup (key 14), versions 0-5 — see ``gateway_kafka.coordinator``.

The leader's request carries every member's assignment; followers park until it arrives (or a
new rebalance starts: REBALANCE_IN_PROGRESS). Assignments are opaque bytes handed out as
given, so any assignor works. v5 checks protocol type and name against the group's.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=14, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    assignments = [(a.get("member_id", ""), bytes(a.get("assignment") or b"")) for a in body.get("assignments") or ()]
    args = dict(group_id=body.get("group_id", ""), generation_id=body.get("generation_id", -1),
                member_id=body.get("member_id", ""), group_instance_id=body.get("group_instance_id"),
                protocol_type=body.get("protocol_type"), protocol_name=body.get("protocol_name"))
    resp = await ctx.gateway.modern_groups.classic_sync(**args)  # None: a classic group
    if resp is None:
        resp = await ctx.gateway.coordinator.sync_group(assignments=assignments, **args)
    resp = dict(resp)
    resp["throttle_time_ms"] = 0
    return resp
