"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0; ids are
reserved in persisted blocks so none is ever handed out twice. v3+ (KIP-360) lets a producer
pass its current id and epoch to bump the epoch and reset its sequences. A transactional id
maps to one producer id whose epoch is bumped on every call, fencing the previous instance
(PRODUCER_FENCED for a stale id/epoch); the transaction APIs themselves
(AddPartitionsToTxn, EndTxn, ...) are not offered yet, so transactional producers cannot
start a transaction. See ``gateway_kafka.producer_state``.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking


@api(key=22, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    ps = ctx.gateway.producer_state
    # may persist a new id block: off the event loop
    code, pid, epoch = await blocking(ps.init_producer_id, body.get("transactional_id"),
                                      body.get("producer_id", -1), body.get("producer_epoch", -1))
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}
