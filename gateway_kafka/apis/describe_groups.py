"""DescribeGroups (key 15), versions 0-6.

Membership comes from the group coordinator; a group known only by its committed offsets
(a standalone consumer, a RocketMQ group, or a Kafka group after a restart) is "Empty" with
no protocol type; an unknown group is "Dead", as Kafka answers. Member assignments are shown
once the group is Stable. A KIP-848 consumer group is shown as Kafka shows it to this API
(protocol type "consumer", its state, members with their subscription and current assignment in
the consumer protocol's encoding); a share group likewise (protocol type "share"). Authorized
operations (v3+, when asked): the group operations the caller's ACLs allow.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import GROUP_OPERATIONS, NOT_ASKED


@api(key=15, min=0, max=6)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    known = None
    out = []
    for gid in body.get("groups") or ():
        if gw.streams_groups.owns(gid):  # Kafka: DescribeGroups describes classic groups only
            out.append({"error_code": E.GROUP_ID_NOT_FOUND, "error_message": f"Group {gid} is not a classic group.",
                        "group_id": gid, "group_state": "Dead", "protocol_type": "", "protocol_data": "",
                        "members": [], "authorized_operations": NOT_ASKED})
            continue
        desc = gw.modern_groups.classic_view(gid) or gw.coordinator.describe(gid)
        if desc is None:
            if known is None:
                known = gw.store.consumer_offsets.groups()
            state = "Empty" if gid in known else "Dead"
            desc = {"group_id": gid, "group_state": state, "protocol_type": "", "protocol_data": "", "members": []}
        entry = {"error_code": E.NONE if gid else E.INVALID_GROUP_ID, **desc,
                 "authorized_operations": authz.authorized_operations(ctx, authz.RT.GROUP, gid, GROUP_OPERATIONS)
                 if body.get("include_authorized_operations") else NOT_ASKED}
        if ctx.api_version >= 6 and desc["group_state"] == "Dead":
            entry.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {gid} not found.")
        if gid and not authz.group(ctx, authz.Op.DESCRIBE, gid):
            entry = {"error_code": E.GROUP_AUTHORIZATION_FAILED, "group_id": gid, "group_state": "",
                     "protocol_type": "", "protocol_data": "", "members": [], "authorized_operations": NOT_ASKED}
        out.append(entry)
    return {"throttle_time_ms": 0, "groups": out}
