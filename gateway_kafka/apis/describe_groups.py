"""DescribeGroups (key 15), versions 0-5.

Membership comes from the group coordinator; a group known only by its committed offsets
(a standalone consumer, a RocketMQ group, or a Kafka group after a restart) is "Empty" with
no protocol type; an unknown group is "Dead", as Kafka answers. Member assignments are shown
once the group is Stable. Authorized operations are not computed (no ACLs).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=15, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    known = None
    out = []
    for gid in body.get("groups") or ():
        desc = gw.coordinator.describe(gid)
        if desc is None:
            if known is None:
                known = gw.store.consumer_offsets.groups()
            state = "Empty" if gid in known else "Dead"
            desc = {"group_id": gid, "group_state": state, "protocol_type": "", "protocol_data": "", "members": []}
        entry = {"error_code": E.NONE if gid else E.INVALID_GROUP_ID, **desc}
        if gid and not authz.group(ctx, authz.Op.DESCRIBE, gid):
            entry = {"error_code": E.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": []}
        out.append(entry)
    return {"throttle_time_ms": 0, "groups": out}
