"""EndTxn (key 26), versions 0-3.

Commits or aborts the producer's open transaction: a COMMIT or ABORT control batch is written
to every partition of the transaction (the engine's producer state takes the outcome from the marker: aborted
ranges, last stable offset), and on commit the offsets staged by TxnOffsetCommit are applied.
Answered once all of that is stored, or once the decision is logged when only markers of other
broker groups are missing (sent by WriteTxnMarkers, retried until taken; docs/design/cluster.md).
A retried EndTxn of a completed transaction with the same outcome is answered NONE; any other
EndTxn without an open transaction (unknown or empty) INVALID_TXN_STATE, as Kafka answers.
v4+ (KIP-890 epoch bump on every transaction) is not offered.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api


@api(key=26, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    code = await ctx.gateway.txn.end_txn(body.get("transactional_id", ""), body.get("producer_id", -1),
                                         body.get("producer_epoch", -1), bool(body.get("committed")))
    return {"throttle_time_ms": 0, "error_code": code}
