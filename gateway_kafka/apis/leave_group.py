"""LeaveGroup (key 13), versions 0-5.

v0-2 name one member; v3+ (KIP-345) a batch of members, by member id and/or group instance id,
each with its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Removing members starts a
rebalance for the rest; see ``gateway_kafka.coordinator``.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=13, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group_id = body.get("group_id", "")
    if ctx.api_version < 3:
        leaving = [(body.get("member_id", ""), None)]
    else:
        leaving = [(m.get("member_id", ""), m.get("group_instance_id")) for m in body.get("members") or ()]
    answer = await gw.modern_groups.classic_leave(group_id, leaving)  # None: a classic group
    top, results = answer if answer is not None else gw.coordinator.leave_group(group_id, leaving)
    if ctx.api_version < 3:
        code = results[0]["error_code"] if results and top == 0 else top
        return {"throttle_time_ms": 0, "error_code": code}
    return {"throttle_time_ms": 0, "error_code": top, "members": results}
