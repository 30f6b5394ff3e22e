"""InitProducerId (key 22), versions 0-5.

Idempotent producers (no transactional id) get a fresh producer id with epoch 0, from blocks
recorded in ``__transaction_state`` before any id of them is handed out, so no id is ever
handed out twice, even across crashes. v3+ (KIP-360) lets a producer pass its current id and
epoch to bump the epoch and reset its sequences. A transactional id maps to one producer id
whose epoch is bumped on every call (recorded before the answer), fencing the previous instance
(PRODUCER_FENCED for a stale id/epoch); a transaction the previous incarnation left open is
aborted first, and ``transaction_timeout_ms`` must be within 1..transaction_max_timeout_ms
(INVALID_TRANSACTION_TIMEOUT). COORDINATOR_NOT_AVAILABLE (retriable) when the store does not
take the record. See ``gateway_kafka.txn_coordinator``.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.txn_coordinator import RELAY_CLIENT_ID
from gateway_kafka.apis import RequestContext, api


@api(key=22, min=0, max=5)
async def handle(ctx: RequestContext, body: dict) -> dict:
    tid = body.get("transactional_id")
    if tid is not None and not authz.txn_id(ctx, authz.Op.WRITE, tid):
        return {"throttle_time_ms": 0, "error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    if tid is None and not (authz.cluster(ctx, authz.Op.IDEMPOTENT_WRITE)
                            or ctx.gateway.security.may_on_any(ctx.conn.principal, authz.Op.WRITE, authz.RT.TOPIC)):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED, "producer_id": -1,
                "producer_epoch": -1}
    code, pid, epoch = await ctx.gateway.txn.init_producer_id(
        tid, body.get("transaction_timeout_ms", 60_000), body.get("producer_id", -1), body.get("producer_epoch", -1),
        relay=ctx.client_id != RELAY_CLIENT_ID)
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": pid, "producer_epoch": epoch}
