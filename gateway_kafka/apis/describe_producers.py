"""DescribeProducers (key 61), version 0 — ``kafka-transactions describe-producers`` and
``find-hanging``.

Per requested partition: the producers the partition's idempotence/transaction state remembers
(``engine.producer_state``), each with its epoch, last sequence, the store time of its last batch
and the first offset of its open transaction (-1 when none). Coordinator epoch: -1 (not kept per
partition). Unknown topics or partitions: UNKNOWN_TOPIC_OR_PARTITION; a topic the caller may not
READ: TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import local_queue


@api(key=61, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    topics = []
    for t in body.get("topics") or ():
        name = t.get("name", "")
        allowed = authz.topic(ctx, authz.Op.READ, name)
        parts = []
        for index in t.get("partition_indexes") or ():
            entry = {"partition_index": index, "error_code": E.NONE, "error_message": None, "active_producers": []}
            if not allowed:
                entry.update(error_code=E.TOPIC_AUTHORIZATION_FAILED, error_message=f"not allowed to READ {name!r}")
            elif (queue := local_queue(gw, name, index))[0] is None:  # not here: another group, or none
                entry.update(error_code=queue[1], error_message=f"partition {name}-{index} is not on this node"
                             if queue[1] == E.NOT_LEADER_OR_FOLLOWER else f"partition {name}-{index} does not exist")
            else:
                entry["active_producers"] = [
                    {"producer_id": pid, "producer_epoch": epoch, "last_sequence": seq, "last_timestamp": ts,
                     "coordinator_epoch": -1, "current_txn_start_offset": start}
                    for pid, epoch, seq, ts, start in gw.store.producer_state.active_producers(name, queue[0])]
            parts.append(entry)
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
