"""DescribeShareGroupOffsets (key 90), versions 0-1 — ``kafka-share-groups --describe``: per
partition the share-partition start offset (lowest offset not yet finished) and (v1) its lag.
Topics null = every partition the group has state for. A partition the group never read answers
start offset -1. A group that is another kind of group answers GROUP_ID_NOT_FOUND; one the caller
may not DESCRIBE, GROUP_AUTHORIZATION_FAILED (see ``gateway_kafka.share_groups``).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import share_groups
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import find_topic, topic_id
from gateway_kafka.consumer_groups import SHARE


@api(key=90, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    out = []
    for g in body.get("groups") or ():
        gid = g.get("group_id") or ""
        entry = {"group_id": gid, "topics": [], "error_code": E.NONE, "error_message": None}
        out.append(entry)
        if not authz.group(ctx, authz.Op.DESCRIBE, gid):
            entry["error_code"] = E.GROUP_AUTHORIZATION_FAILED
            continue
        gtype = gw.modern_groups.group_type(gid)
        if gtype is not None and gtype != SHARE or gtype is None and gid in gw.coordinator.groups:
            entry.update(error_code=E.GROUP_ID_NOT_FOUND, error_message=f"Group {gid} is not a share group.")
            continue
        wanted = g.get("topics")
        if wanted is None:
            topics = share_groups.offset_topics(gw, gid).items()
        else:
            topics = [(t.get("topic_name") or "", t.get("partitions") or []) for t in wanted]
        for name, parts in topics:
            if find_topic(gw, name) is None:
                rows = [{"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1,
                         "error_code": E.UNKNOWN_TOPIC_OR_PARTITION, "error_message": None} for p in parts]
            else:
                rows = [share_groups.partition_offsets(gw, gid, name, p) for p in parts]
            entry["topics"].append({"topic_name": name, "topic_id": topic_id(name), "partitions": rows})
    return {"throttle_time_ms": 0, "groups": out}
