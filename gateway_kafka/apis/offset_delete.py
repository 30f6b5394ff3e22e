"""OffsetDelete (key 47), version 0.

Deletes committed offsets of single partitions of a group. Partitions of topics the group's
live members subscribe to get GROUP_SUBSCRIBED_TO_TOPIC (known from consumer-protocol
subscriptions); a group nobody knows gets GROUP_ID_NOT_FOUND.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=47, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    gid = body.get("group_id", "")
    offsets = gw.store.consumer_offsets
    if not authz.group(ctx, authz.Op.DELETE, gid):
        return {"error_code": E.GROUP_AUTHORIZATION_FAILED, "throttle_time_ms": 0, "topics": []}
    modern = gw.modern_groups.owns(gid)
    if not modern and gw.coordinator.state_of(gid) is None and gid not in offsets.groups():
        return {"error_code": E.GROUP_ID_NOT_FOUND, "throttle_time_ms": 0, "topics": []}
    subscribed = gw.modern_groups.subscribed_topics_of_group(gid) if modern else gw.coordinator.subscribed_topics(gid)
    topics = []
    for t in body.get("topics") or ():
        name = t.get("name")
        parts = []
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            if not authz.topic(ctx, authz.Op.READ, name):
                code = E.TOPIC_AUTHORIZATION_FAILED
            elif name in subscribed:
                code = E.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                res = await gw.put(offsets.delete, gid, name, index)  # a tombstone, stored before the answer
                code = E.NONE if res is None or res.stored else E.COORDINATOR_NOT_AVAILABLE
            parts.append({"partition_index": index, "error_code": code})
        topics.append({"name": name, "partitions": parts})
    return {"error_code": E.NONE, "throttle_time_ms": 0, "topics": topics}
