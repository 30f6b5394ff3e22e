"""StreamsGroupDescribe (key 89), version 0: topology, epochs, members and their current and
target task assignments of streams groups (``gateway_kafka.streams_groups``).

A group that is not a streams group answers GROUP_ID_NOT_FOUND; one the principal may not
DESCRIBE answers GROUP_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import GROUP_OPERATIONS, NOT_ASKED


@api(key=89, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    groups = []
    for gid in body.get("group_ids") or ():
        if not authz.group(ctx, authz.Op.DESCRIBE, gid):
            groups.append({"error_code": E.GROUP_AUTHORIZATION_FAILED, "error_message": None, "group_id": gid,
                           "group_state": "", "group_epoch": 0, "assignment_epoch": 0, "topology": None,
                           "members": [], "authorized_operations": NOT_ASKED})
            continue
        entry = ctx.gateway.streams_groups.describe(gid)
        entry["authorized_operations"] = authz.authorized_operations(ctx, authz.RT.GROUP, gid, GROUP_OPERATIONS) \
            if body.get("include_authorized_operations") else NOT_ASKED
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
