"""TxnOffsetCommit (key 28), versions 0-3.

Stages consumer offsets in the producer's open transaction (the group must have been added
with AddOffsetsToTxn); they reach the engine's consumer offsets (shared with RocketMQ groups)
only when the transaction commits, and are dropped when it aborts. Per partition:
UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE, or the transaction's verdict
(INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED, INVALID_TXN_STATE). Generation and member id
(v3) are not checked against the group.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import find_topic, partition_count


@api(key=28, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    max_meta = gw.settings.offset_metadata_max_bytes
    codes: dict[tuple[str, int], int] = {}
    staged: dict[tuple[str, int], tuple[int, str | None]] = {}
    for t in body.get("topics") or ():
        name = t.get("name")
        tc = find_topic(gw, name)
        count = partition_count(tc) if tc is not None else 0
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            meta = p.get("committed_metadata")
            if not 0 <= index < count:
                codes[(name, index)] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif meta is not None and len(meta.encode("utf-8")) > max_meta:
                codes[(name, index)] = E.OFFSET_METADATA_TOO_LARGE
            else:
                staged[(name, index)] = (p.get("committed_offset", -1), meta)
    denied = None
    if not authz.txn_id(ctx, authz.Op.WRITE, body.get("transactional_id", "")):
        denied = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.group(ctx, authz.Op.READ, body.get("group_id", "")):
        denied = E.GROUP_AUTHORIZATION_FAILED
    for key in list(staged):
        if denied is not None or not authz.topic(ctx, authz.Op.READ, key[0]):
            codes[key] = denied if denied is not None else E.TOPIC_AUTHORIZATION_FAILED
            del staged[key]
    if staged:
        code = await gw.txn.stage_offsets(body.get("transactional_id", ""), body.get("producer_id", -1),
                                          body.get("producer_epoch", -1), body.get("group_id", ""), staged)
        for key in staged:
            codes[key] = code
    topics = []
    for t in body.get("topics") or ():
        name = t.get("name")
        topics.append({"name": name, "partitions": [
            {"partition_index": p.get("partition_index", -1), "error_code": codes.get((name, p.get("partition_index", -1)), E.NONE)}
            for p in t.get("partitions") or ()]})
    return {"throttle_time_ms": 0, "topics": topics}
