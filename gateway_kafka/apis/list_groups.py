"""ListGroups (key 16), versions 0-5.

Lists the groups the coordinator holds plus every group with committed offsets (as "Empty",
protocol type ""), which includes RocketMQ consumer groups: both protocols share the offset
store. v4+ filters by state, v5+ by group type: "classic", "consumer" (KIP-848) or "share"
(KIP-932); a group known only by offsets is "classic", as Kafka lists it.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=16, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    rows = {gid: (ptype, state, "classic") for gid, ptype, state in gw.coordinator.listing()}
    for gid, ptype, state, gtype in gw.modern_groups.listing():
        rows[gid] = (ptype, state, gtype)
    for gid, ptype, state, gtype in gw.streams_groups.listing():
        rows[gid] = (ptype, state, gtype)
    for gid in gw.store.consumer_offsets.groups():
        rows.setdefault(gid, ("", "Empty", "classic"))
    states = {s.lower() for s in body.get("states_filter") or ()}
    types = {s.lower() for s in body.get("types_filter") or ()}
    groups = []
    see_all = authz.cluster(ctx, authz.Op.DESCRIBE)  # else only the groups it may DESCRIBE (Kafka)
    for gid, (ptype, state, gtype) in sorted(rows.items()):
        if not see_all and not authz.group(ctx, authz.Op.DESCRIBE, gid):
            continue
        if states and state.lower() not in states:
            continue
        if types and gtype not in types:
            continue
        if ctx.api_version < 5 and gtype in ("share", "streams"):
            continue  # clients that cannot tell group types apart do not see share groups (as Kafka)
        groups.append({"group_id": gid, "protocol_type": ptype, "group_state": state, "group_type": gtype})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "groups": groups}
