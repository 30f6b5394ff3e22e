"""OffsetFetch (key 9), versions 0-10 (v10 names topics by id).

Reads committed offsets from the engine's consumer offsets: the offset, the leader epoch (v5+)
and the metadata the client committed. ``topics`` null (v2+) means every partition the group has
committed. A partition without a commit answers offset -1 and empty metadata with no error, as
Kafka does. v8+ asks for several groups at once. ``require_stable`` (v7+): a partition whose
offset a transaction staged (TxnOffsetCommit) and has not ended answers UNSTABLE_OFFSET_COMMIT
(retriable), so a read_committed consumer taking over a partition starts after the previous
owner's transaction is decided, as in Kafka. v9+: a member of a KIP-848 consumer group names
itself (member id and epoch) and gets UNKNOWN_MEMBER_ID / STALE_MEMBER_EPOCH when it is not the
group's current member; admin clients (no member id, epoch -1) read any group.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import topic_by_id, topic_id


def _group_offsets(gw, group_id: str, topics: list[dict] | None, require_stable: bool, by_id: bool = False) -> list[dict]:
    offsets = gw.store.consumer_offsets
    if topics is None:
        by_topic: dict[str, list[int]] = {}
        for (topic, qid) in sorted(offsets.offsets_of(group_id)):
            by_topic.setdefault(topic, []).append(qid)
        wanted = [(t, ps) for t, ps in by_topic.items()]
    elif by_id:
        wanted = [(topic_by_id(gw, t.get("topic_id")) or t.get("topic_id"), list(t.get("partition_indexes") or ()))
                  for t in topics]
    else:
        wanted = [(t.get("name"), list(t.get("partition_indexes") or ())) for t in topics]
    out = []
    for name, indexes in wanted:
        parts = []
        for index in indexes:
            if not isinstance(name, str):  # v10: a topic id no topic has
                parts.append({"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                              "metadata": "", "error_code": E.UNKNOWN_TOPIC_ID})
                continue
            if require_stable and offsets.has_pending(group_id, name, index):
                parts.append({"partition_index": index, "committed_offset": -1, "committed_leader_epoch": -1,
                              "metadata": "", "error_code": E.UNSTABLE_OFFSET_COMMIT})
                continue
            e = offsets.query_entry(group_id, name, index)
            parts.append({"partition_index": index, "committed_offset": e.offset if e else -1,
                          "committed_leader_epoch": e.leader_epoch if e else -1,
                          "metadata": (e.metadata or "") if e else "", "error_code": E.NONE})
        entry = {"name": name, "partitions": parts}
        if by_id:
            entry["topic_id"] = topic_id(name) if isinstance(name, str) else name
        out.append(entry)
    return out


@api(key=9, min=0, max=10)
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
            code = gw.streams_groups.validate_offset_fetch(gid, g.get("member_id"), g.get("member_epoch", -1))
            if code is None:
                code = gw.modern_groups.validate_offset_fetch(gid, g.get("member_id"), g.get("member_epoch", -1))
            if code:
                gw.log.info("offset_fetch_refused", group=gid, member=g.get("member_id"), epoch=g.get("member_epoch"),
                            error=E.NAMES.get(code, code))
                groups.append({"group_id": gid, "topics": [], "error_code": code})
                continue
            groups.append({"group_id": gid, "topics": _group_offsets(gw, gid, g.get("topics"), stable,
                                                                     ctx.api_version >= 10),
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
