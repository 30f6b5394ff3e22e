"""ListPartitionReassignments (key 46), version 0 — ``kafka-reassign-partitions --list``.

A partition lives where its topic's queue was created and does not move between broker groups,
so no reassignment is ever in progress: the answer lists none (unknown topics or partitions among
those asked: UNKNOWN_TOPIC_OR_PARTITION). Needs DESCRIBE on the cluster.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists


@api(key=46, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "not allowed to DESCRIBE the cluster", "topics": []}
    for t in body.get("topics") or ():
        for index in t.get("partition_indexes") or ():
            if not partition_exists(ctx.gateway, t.get("name", ""), index):
                return {"throttle_time_ms": 0, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION,
                        "error_message": f"partition {t.get('name')}-{index} does not exist", "topics": []}
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "topics": []}
