"""DeleteTopics (key 20), versions 0-6.

Deletes the engine topic: its config, consume queues and committed offsets (the commitlog
space is reclaimed by retention), and forgets producer sequence state for it. v6 may name
topics by id. Errors: UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, TOPIC_DELETION_DISABLED
(``delete_topic_enable`` off), INVALID_TOPIC_EXCEPTION for a hidden RocketMQ system topic and
for the internal topics (their partitions place every group and transactional id). A topic
spread over broker groups is deleted on every group holding it (docs/design/cluster.md); a group
that cannot be reached answers BROKER_NOT_AVAILABLE and keeps its part (delete again later).
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import topic_placement
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import (blocking, find_topic, is_hidden, is_internal, mutation_quota, mutation_throttle,
                                        topic_id, visible_topics)
from gateway_kafka.quotas import THROTTLED_MESSAGE


@api(key=20, min=0, max=6)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    if ctx.api_version >= 6:
        wanted = [(t.get("name"), t.get("topic_id")) for t in body.get("topics") or ()]
    else:
        wanted = [(n, None) for n in body.get("topic_names") or ()]
    by_id = None
    quota = mutation_quota(ctx, strict_since=5)
    out = []
    for name, tid in wanted:
        if name is None:
            if by_id is None:
                by_id = {topic_id(n): n for n in visible_topics(gw)}
            name = by_id.get(tid)
            if name is None:
                out.append({"name": None, "topic_id": tid, "error_code": E.UNKNOWN_TOPIC_ID,
                            "error_message": f"no topic with id {tid}"})
                continue
        tid = topic_id(name)
        if not authz.topic(ctx, authz.Op.DELETE, name):
            code, msg = E.TOPIC_AUTHORIZATION_FAILED, f"{ctx.conn.principal} may not DELETE topic {name}"
        elif not gw.settings.delete_topic_enable:
            code, msg = E.TOPIC_DELETION_DISABLED, "topic deletion is disabled (delete_topic_enable=false)"
        elif find_topic(gw, name) is None and name not in gw.cluster.topic_names():
            code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        elif is_hidden(name, gw):
            code, msg = E.INVALID_TOPIC_EXCEPTION, f"{name!r} is a system topic"
        elif is_internal(name):
            code, msg = E.INVALID_TOPIC_EXCEPTION, f"cannot delete internal topic {name}"
        elif quota is not None and not quota.take(len(gw.cluster.partition_ids(name))):
            code, msg = E.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE
        else:
            refused = await topic_placement.delete_topic(gw, name)
            if find_topic(gw, name) is not None:
                await blocking(gw.store.delete_topic, name)  # also its producer state and offsets
            gw.log.info("topic_deleted", topic=name)
            code, msg = refused or (E.NONE, None)
        out.append({"name": name, "topic_id": tid, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "responses": out}
