"""DeleteShareGroupOffsets (key 92), version 0 — ``kafka-share-groups --delete-offsets``: the
group forgets its share-partitions of each topic (next read starts per
``share.auto.offset.reset``). Same refusals as AlterShareGroupOffsets (NON_EMPTY_GROUP,
GROUP_ID_NOT_FOUND); per topic UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from engine import pop
from engine.pop import PopError
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import share_groups
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, find_topic, topic_id
from gateway_kafka.apis.alter_share_group_offsets import refusal


@api(key=92, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    gid = body.get("group_id") or ""
    resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "responses": []}
    refused = refusal(ctx, gid, authz.Op.DELETE)
    if refused:
        resp.update(refused)
        return resp
    svc = pop.for_store(gw.store)
    held = share_groups.offset_topics(gw, gid)
    for t in body.get("topics") or ():
        name = t.get("topic_name") or ""
        row = {"topic_name": name, "topic_id": topic_id(name), "error_code": E.NONE, "error_message": None}
        resp["responses"].append(row)
        if find_topic(gw, name) is None:
            row["error_code"] = E.UNKNOWN_TOPIC_OR_PARTITION
            continue
        try:
            for queue in held.get(name, ()):
                await blocking(svc.share_reset, gid, name, queue, None)
        except PopError as exc:
            row.update(error_code=E.KAFKA_STORAGE_ERROR, error_message=str(exc))
    return resp
