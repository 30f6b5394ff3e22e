"""ConsumerGroupDescribe (key 69), versions 0-1 — KIP-848 consumer groups as
``kafka-consumer-groups --describe --members`` shows them: state, group and assignment epochs,
assignor, and per member its epoch, subscription (names or regex), current assignment and
target assignment. A group that is not a consumer group (classic, share, unknown) answers
GROUP_ID_NOT_FOUND, on which Kafka's admin client asks DescribeGroups instead.
Authorized operations: Kafka's full set for a group when asked (no authorizer is configured).
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import GROUP_OPERATIONS
from gateway_kafka.consumer_groups import CONSUMER


@api(key=69, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    groups = []
    for gid in body.get("group_ids") or ():
        entry = ctx.gateway.modern_groups.describe(gid, CONSUMER)
        entry["authorized_operations"] = GROUP_OPERATIONS if body.get("include_authorized_operations") \
            else -2147483648
        groups.append(entry)
    return {"throttle_time_ms": 0, "groups": groups}
