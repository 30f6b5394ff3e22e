"""AddPartitionsToTxn (key 24), versions 0-3 (one transaction per request, as producers send it).

Adds partitions to the producer's open transaction (opening it when none is). A partition may be
led by any broker group of the cluster: the coordinator records it, and at EndTxn writes its
marker through the store (this group) or by WriteTxnMarkers to the group leading it
(docs/design/cluster.md, "Transactions spanning groups"). Per partition:
UNKNOWN_TOPIC_OR_PARTITION for a topic or partition no group has (the others then answer
OPERATION_NOT_ATTEMPTED, as Kafka does); otherwise the transaction's verdict for all of them:
INVALID_PRODUCER_ID_MAPPING (unknown transactional id or producer id), PRODUCER_FENCED (an
older epoch), CONCURRENT_TRANSACTIONS (a completion in progress). v4+ (broker-to-broker
batching, KIP-890 verification) is not offered.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists


@api(key=24, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    topics = body.get("v3_and_below_topics") or []
    wanted: list[tuple[str, int]] = []
    bad: dict[tuple[str, int], int] = {}
    for t in topics:
        name = t.get("name")
        for p in t.get("partitions") or ():
            if partition_exists(gw, name, p):  # led by this group or another one
                wanted.append((name, p))
            else:
                bad[(name, p)] = E.UNKNOWN_TOPIC_OR_PARTITION
    tid = body.get("v3_and_below_transactional_id", "")
    if not authz.txn_id(ctx, authz.Op.WRITE, tid):
        code = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif any(not authz.topic(ctx, authz.Op.WRITE, name) for name, _p in wanted):
        code = E.TOPIC_AUTHORIZATION_FAILED
    elif bad:
        code = None
    else:
        code = await gw.txn.add_partitions(body.get("v3_and_below_transactional_id", ""),
                                           body.get("v3_and_below_producer_id", -1),
                                           body.get("v3_and_below_producer_epoch", -1), wanted)
    results = []
    for t in topics:
        name = t.get("name")
        parts = []
        for p in t.get("partitions") or ():
            if code is None:
                pc = bad.get((name, p), E.OPERATION_NOT_ATTEMPTED)
            else:
                pc = code
            parts.append({"partition_index": p, "partition_error_code": pc})
        results.append({"name": name, "results_by_partition": parts})
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
