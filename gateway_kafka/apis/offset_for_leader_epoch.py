"""OffsetForLeaderEpoch (key 23), versions 0-4.

Every partition has had one leader epoch, 0, since it was created (a single node never
changes leader), so the end offset of any epoch >= 0 is the high watermark and the answered
epoch is 0. A ``current_leader_epoch`` newer than 0 is UNKNOWN_LEADER_EPOCH; unknown
partitions UNKNOWN_TOPIC_OR_PARTITION. Consumers use this to validate their position after a
metadata change; it never reports truncation here.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import local_queue


@api(key=23, min=0, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    topics = []
    for t in body.get("topics") or ():
        name = t.get("topic")
        parts = []
        for p in t.get("partitions") or ():
            index = p.get("partition", -1)
            if not authz.topic(ctx, authz.Op.DESCRIBE, name):
                parts.append({"error_code": E.TOPIC_AUTHORIZATION_FAILED, "partition": index, "leader_epoch": -1,
                              "end_offset": -1})
            elif local_queue(gw, name, index)[0] is None:
                parts.append({"error_code": local_queue(gw, name, index)[1], "partition": index, "leader_epoch": -1,
                              "end_offset": -1})
            elif p.get("current_leader_epoch", -1) > 0:
                parts.append({"error_code": E.UNKNOWN_LEADER_EPOCH, "partition": index, "leader_epoch": -1,
                              "end_offset": -1})
            elif p.get("leader_epoch", -1) < 0:
                parts.append({"error_code": E.NONE, "partition": index, "leader_epoch": -1, "end_offset": -1})
            else:
                parts.append({"error_code": E.NONE, "partition": index, "leader_epoch": 0,
                              "end_offset": gw.store.get_max_offset_in_queue(name, local_queue(gw, name, index)[0])})
        topics.append({"topic": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
