"""DescribeTransactions (key 65), version 0.

Per transactional id: its state as Kafka names it (Empty, Ongoing, PrepareCommit, PrepareAbort,
CompleteCommit, CompleteAbort), timeout, start time of the open transaction (-1 when none),
producer id and epoch, and the partitions of the open transaction, from
``gateway_kafka.txn_coordinator``. An unknown id answers TRANSACTIONAL_ID_NOT_FOUND.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.txn_coordinator import ONGOING, PREPARE_ABORT, PREPARE_COMMIT


@api(key=65, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    txns = ctx.gateway.txn.txns
    states = []
    for tid in body.get("transactional_ids") or ():
        m = txns.get(tid)
        if not authz.txn_id(ctx, authz.Op.DESCRIBE, tid):
            states.append({"error_code": E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "transactional_id": tid,
                           "transaction_state": "", "transaction_timeout_ms": 0, "transaction_start_time_ms": -1,
                           "producer_id": -1, "producer_epoch": -1, "topics": []})
            continue
        if m is None:
            states.append({"error_code": E.TRANSACTIONAL_ID_NOT_FOUND, "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
            continue
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(m.partitions):
            by_topic.setdefault(topic, []).append(partition)
        open_ = m.state in (ONGOING, PREPARE_COMMIT, PREPARE_ABORT)
        states.append({"error_code": E.NONE, "transactional_id": tid, "transaction_state": m.state,
                       "transaction_timeout_ms": m.timeout_ms,
                       "transaction_start_time_ms": m.started_ms if open_ else -1,
                       "producer_id": m.producer_id, "producer_epoch": m.epoch,
                       "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]})
    return {"throttle_time_ms": 0, "transaction_states": states}
