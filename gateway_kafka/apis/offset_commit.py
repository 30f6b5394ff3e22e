"""OffsetCommit (key 8), versions 0-9.

Committed offsets (with their metadata string) go to the engine's consumer offset store,
shared with RocketMQ groups (key ``topic@group``, partition = queue id); they survive
restarts (the store persists them periodically and at shutdown). Who may commit follows
Kafka's classic rules (``GroupCoordinator.validate_offset_commit``): a member of the current
generation (also while a rebalance is being prepared, so revocation callbacks can commit), or
anyone with generation -1 while the group has no members (standalone consumers and tools).

Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or partition,
OFFSET_METADATA_TOO_LARGE above ``offset_metadata_max_bytes``. Retention time (v2-4) and the
commit timestamp (v1) are accepted and ignored: offsets do not expire.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import find_topic, partition_count


@api(key=8, min=0, max=9)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group_id = body.get("group_id", "")
    top = gw.coordinator.validate_offset_commit(group_id, body.get("member_id", ""),
                                                body.get("generation_id_or_member_epoch", -1),
                                                body.get("group_instance_id"))
    offsets = gw.store.consumer_offsets
    max_meta = gw.settings.offset_metadata_max_bytes
    topics = []
    if top == E.NONE and not authz.group(ctx, authz.Op.READ, group_id):
        top = E.GROUP_AUTHORIZATION_FAILED
    for t in body.get("topics") or ():
        name = t.get("name")
        tc = find_topic(gw, name)
        topic_denied = top == E.NONE and not authz.topic(ctx, authz.Op.READ, name)
        count = partition_count(tc) if tc is not None else 0
        parts = []
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            meta = p.get("committed_metadata")
            if top != E.NONE:
                code = top
            elif topic_denied:
                code = E.TOPIC_AUTHORIZATION_FAILED
            elif not 0 <= index < count:
                code = E.UNKNOWN_TOPIC_OR_PARTITION
            elif meta is not None and len(meta.encode("utf-8")) > max_meta:
                code = E.OFFSET_METADATA_TOO_LARGE
            else:
                offsets.commit(group_id, name, index, p.get("committed_offset", -1), meta)
                code = E.NONE
            parts.append({"partition_index": index, "error_code": code})
        topics.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
