"""ListTransactions (key 66), versions 0-1.

Every transactional id the coordinator knows, filtered by state names (unknown names are
echoed in ``unknown_state_filters``), by producer ids, and (v1) by open transactions running
longer than ``duration_filter`` ms.
"""

from __future__ import annotations

import time

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.txn_coordinator import (
    COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT,
)

STATES = {EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT}


@api(key=66, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    wanted_states = set(body.get("state_filters") or ())
    wanted_pids = set(body.get("producer_id_filters") or ())
    duration = body.get("duration_filter", -1)
    now = int(time.time() * 1000)
    out = []
    for tid, m in sorted(ctx.gateway.txn.txns.items()):
        if wanted_states and m.state not in wanted_states:
            continue
        if wanted_pids and m.producer_id not in wanted_pids:
            continue
        if not authz.txn_id(ctx, authz.Op.DESCRIBE, tid):
            continue
        if duration is not None and duration >= 0 and not (m.state == ONGOING and now - m.started_ms > duration):
            continue
        out.append({"transactional_id": tid, "producer_id": m.producer_id, "transaction_state": m.state})
    return {"throttle_time_ms": 0, "error_code": E.NONE,
            "unknown_state_filters": sorted(wanted_states - STATES), "transaction_states": out}
