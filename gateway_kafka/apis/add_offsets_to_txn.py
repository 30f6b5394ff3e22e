"""AddOffsetsToTxn (key 25), versions 0-3.

Adds a consumer group to the producer's open transaction, so TxnOffsetCommit may stage its
offsets (Kafka adds the group's __consumer_offsets partition; here the offsets are staged in
the coordinator's state and applied to the engine's consumer offsets on commit). Errors as
AddPartitionsToTxn; an empty group id is INVALID_GROUP_ID.
"""

from __future__ import annotations

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=25, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    group = body.get("group_id") or ""
    if not group:
        return {"throttle_time_ms": 0, "error_code": E.INVALID_GROUP_ID}
    code = await ctx.gateway.txn.add_offsets(body.get("transactional_id", ""), body.get("producer_id", -1),
                                             body.get("producer_epoch", -1), group)
    return {"throttle_time_ms": 0, "error_code": code}
