"""AlterPartitionReassignments (key 45), version 0 — ``kafka-reassign-partitions --execute`` /
``--cancel``.

Partitions do not move between broker groups (see list_partition_reassignments.py), so every
partition is refused with a message saying so: INVALID_REPLICA_ASSIGNMENT when replicas are
given, NO_REASSIGNMENT_IN_PROGRESS for a cancel (replicas null), UNKNOWN_TOPIC_OR_PARTITION for a
partition that does not exist. Needs ALTER on the cluster.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists

REFUSED = ("partitions do not move between brokers: a partition stays on the broker group that holds its "
           "topic's queue (replicas are that group's master and slaves)")


@api(key=45, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.ALTER):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "not allowed to ALTER the cluster", "responses": []}
    responses = []
    for t in body.get("topics") or ():
        name = t.get("name", "")
        parts = []
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            if not partition_exists(ctx.gateway, name, index):
                code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"partition {name}-{index} does not exist"
            elif p.get("replicas") is None:
                code, msg = E.NO_REASSIGNMENT_IN_PROGRESS, f"no reassignment of {name}-{index} is in progress"
            else:
                code, msg = E.INVALID_REPLICA_ASSIGNMENT, f"cannot reassign {name}-{index}: {REFUSED}"
            parts.append({"partition_index": index, "error_code": code, "error_message": msg})
        responses.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "responses": responses}
