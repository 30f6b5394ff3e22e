"""DeleteRecords (key 21), versions 0-2.

Moves a partition's log start offset forward (``store.delete_records``; persisted, records
before it are no longer readable and ListOffsets earliest answers the new start). Offset -1
means the high watermark. An offset above the high watermark or below -1 is
OFFSET_OUT_OF_RANGE; unknown partitions UNKNOWN_TOPIC_OR_PARTITION; the internal topics
INVALID_TOPIC_EXCEPTION (Kafka's answer). Answers the new low
watermark.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, is_internal, local_queue


@api(key=21, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    store = gw.store
    topics = []
    for t in body.get("topics") or ():
        name = t.get("name")
        parts = []
        if not authz.topic(ctx, authz.Op.DELETE, name):
            topics.append({"name": name, "partitions": [
                {"partition_index": p.get("partition_index", -1), "low_watermark": -1,
                 "error_code": E.TOPIC_AUTHORIZATION_FAILED} for p in t.get("partitions") or ()]})
            continue
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            offset = p.get("offset", -1)
            queue, code = local_queue(gw, name, index)
            if queue is None:
                parts.append({"partition_index": index, "low_watermark": -1, "error_code": code})
                continue
            if is_internal(name):
                parts.append({"partition_index": index, "low_watermark": -1, "error_code": E.INVALID_TOPIC_EXCEPTION})
                continue
            hi = store.get_max_offset_in_queue(name, queue)
            if offset == -1:
                offset = hi
            if offset < 0 or offset > hi:
                parts.append({"partition_index": index, "low_watermark": -1, "error_code": E.OFFSET_OUT_OF_RANGE})
                continue
            low = await blocking(store.delete_records, name, queue, offset)
            gw.log.info("records_deleted", topic=name, partition=index, before=offset, low_watermark=low)
            parts.append({"partition_index": index, "low_watermark": low, "error_code": E.NONE})
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
