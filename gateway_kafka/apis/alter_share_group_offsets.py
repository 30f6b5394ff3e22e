"""AlterShareGroupOffsets (key 91), version 0 — ``kafka-share-groups --reset-offsets --execute``:
each listed share-partition starts again at the given offset, its available records and delivery
counts forgotten; stored in ``__consumer_offsets`` before the answer. Only while the group has no
members (NON_EMPTY_GROUP otherwise, as Kafka); GROUP_ID_NOT_FOUND for a group of another kind;
per partition UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (an offset below the log start or past
its end), KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from engine import pop
from engine.pop import PopError
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, local_queue, topic_id
from gateway_kafka.consumer_groups import SHARE


def refusal(ctx: RequestContext, gid: str, op: authz.Op) -> dict:
    """The error part of an answer when the share group's offsets may not change now, else {}."""
    gw = ctx.gateway
    if not authz.group(ctx, op, gid):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "error_message": None}
    gtype = gw.modern_groups.group_type(gid)
    if gtype is not None and gtype != SHARE or gtype is None and gid in gw.coordinator.groups:
        return {"error_code": E.GROUP_ID_NOT_FOUND, "error_message": f"Group {gid} is not a share group."}
    g = gw.modern_groups.groups.get(gid)
    if g is not None and g.members:
        return {"error_code": E.NON_EMPTY_GROUP, "error_message": f"Share group {gid} has active members."}
    return {}


@api(key=91, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    gid = body.get("group_id") or ""
    resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "responses": []}
    refused = refusal(ctx, gid, authz.Op.READ)
    if refused:
        resp.update(refused)
        return resp
    svc = pop.for_store(gw.store)
    for t in body.get("topics") or ():
        name = t.get("topic_name") or ""
        rows = []
        for p in t.get("partitions") or ():
            index, offset = p.get("partition_index", -1), p.get("start_offset", -1)
            row = {"partition_index": index, "error_code": E.NONE, "error_message": None}
            rows.append(row)
            queue, qcode = local_queue(gw, name, index)
            if queue is None:
                row["error_code"] = qcode
                continue
            if not authz.topic(ctx, authz.Op.READ, name):
                row["error_code"] = E.TOPIC_AUTHORIZATION_FAILED
                continue
            lo, hi = gw.store.get_min_offset_in_queue(name, queue), gw.store.get_max_offset_in_queue(name, queue)
            if not lo <= offset <= hi:
                row.update(error_code=E.INVALID_REQUEST, error_message=f"offset {offset} is outside {lo}..{hi}")
                continue
            try:
                await blocking(svc.share_reset, gid, name, queue, offset)
            except PopError as exc:
                row.update(error_code=E.KAFKA_STORAGE_ERROR, error_message=str(exc))
        resp["responses"].append({"topic_name": name, "topic_id": topic_id(name), "partitions": rows})
    return resp
