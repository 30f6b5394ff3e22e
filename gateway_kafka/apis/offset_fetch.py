"""OffsetFetch (key 9), versions 0-9.

Reads committed offsets from the engine's consumer offsets: the offset, the leader epoch (v5+)
and the metadata the client committed. ``topics`` null (v2+) means every partition the group has
committed. A partition without a commit answers offset -1 and empty metadata with no error, as
Kafka does. v8+ asks for several groups at once. ``require_stable`` (v7+): a partition whose
offset a transaction staged (TxnOffsetCommit) and has not ended answers UNSTABLE_OFFSET_COMMIT
(retriable), so a read_committed consumer taking over a partition starts after the previous
owner's transaction is decided, as in Kafka.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


def _group_offsets(gw, group_id: str, topics: list[dict] | None, require_stable: bool) -> list[dict]:
    offsets = gw.store.consumer_offsets
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for (topic, qid) in sorted(offsets.offsets_of(group_id)):
            by_topic.setdefault(topic, []).append(qid)
        wanted = [(t, ps) for t, ps in by_topic.items()]
    else:
        wanted = [(t.get("name"), list(t.get("partition_indexes") or ())) for t in topics]
    out = []
    for name, indexes in wanted:
        parts = []
        for index in indexes:
            if require_stable and offsets.has_pending(group_id, name, index):
                parts.append({"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                              "metadata": "", "error_code": E.UNSTABLE_OFFSET_COMMIT})
                continue
            e = offsets.query_entry(group_id, name, index)
            parts.append({"partition_index": index, "committed_offset": e.offset if e else -1,
                          "committed_leader_epoch": e.leader_epoch if e else -1,
                          "metadata": (e.metadata or "") if e else "", "error_code": E.NONE})
        out.append({"name": name, "partitions": parts})
    return out


@api(key=9, min=0, max=9)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    stable = bool(body.get("require_stable", False))
    if ctx.api_version >= 8:
        groups = []
        for g in body.get("groups") or ():
            gid = g.get("group_id", "")
            if not gid:
                groups.append({"group_id": gid, "topics": [], "error_code": E.INVALID_GROUP_ID})
                continue
            if not authz.group(ctx, authz.Op.DESCRIBE, gid):
                groups.append({"group_id": gid, "topics": [], "error_code": E.GROUP_AUTHORIZATION_FAILED})
                continue
            groups.append({"group_id": gid, "topics": _group_offsets(gw, gid, g.get("topics"), stable),
                           "error_code": E.NONE})
        return {"throttle_time_ms": 0, "groups": groups}
    gid = body.get("group_id", "")
    topics = body.get("topics")
    if ctx.api_version < 2 and topics is None:
        topics = []
    if not gid:
        return {"throttle_time_ms": 0, "topics": [], "error_code": E.INVALID_GROUP_ID}
    if not authz.group(ctx, authz.Op.DESCRIBE, gid):
        return {"throttle_time_ms": 0, "topics": [], "error_code": E.GROUP_AUTHORIZATION_FAILED}
    return {"throttle_time_ms": 0, "topics": _group_offsets(gw, gid, topics, stable), "error_code": E.NONE}
