"""LeaveGroup (key 13), versions 0-5.

v0-2 name one member; v3+ (KIP-345) a batch of members, by member id and/or group instance id,
each with its own error (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID). Removing members starts a
rebalance for the rest; see ``gateway_kafka.coordinator``.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=13, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    coord = ctx.gateway.coordinator
    group_id = body.get("group_id", "")
    if ctx.api_version < 3:
        top, results = coord.leave_group(group_id, [(body.get("member_id", ""), None)])
        code = results[0]["error_code"] if results and top == 0 else top
        return {"throttle_time_ms": 0, "error_code": code}
    leaving = [(m.get("member_id", ""), m.get("group_instance_id")) for m in body.get("members") or ()]
    top, results = coord.leave_group(group_id, leaving)
    return {"throttle_time_ms": 0, "error_code": top, "members": results}
