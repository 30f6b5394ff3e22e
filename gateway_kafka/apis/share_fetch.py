"""ShareFetch (key 78), versions 1-2 — KIP-932: acknowledge, then acquire records of a share group.

In order: the share session (epoch 0 opens, -1 closes, otherwise the next epoch; see
``gateway_kafka.share_groups``), the request's partitions added to it and forgotten ones removed,
the piggy-backed acknowledgements applied per partition (``acknowledge_error_code``:
INVALID_RECORD_STATE when a record is not locked by this member), then up to ``max_records``
records acquired across the session's partitions (released / expired ones first), waiting up to
``max_wait_ms`` when there are none. Each partition with records answers the stored batches that
hold them and ``acquired_records`` ranges with their delivery counts; the client delivers only
acquired records. ``acquisition_lock_timeout_ms`` is the group's ``share.record.lock.duration.ms``.

Top-level errors: INVALID_REQUEST (no group or member id, an unknown acquire mode),
GROUP_AUTHORIZATION_FAILED, SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH. Per partition:
UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import share_groups
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import topic_by_id

_LEADER = {"leader_id": -1, "leader_epoch": -1}


def _partition(index: int, **kw) -> dict:
    p = {"partition_index": index, "error_code": E.NONE, "error_message": None, "acknowledge_error_code": E.NONE,
         "acknowledge_error_message": None, "current_leader": _LEADER, "records": b"", "acquired_records": []}
    p.update(kw)
    return p


def top_error(code: int, message: str, lock_ms: int = 0) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout_ms": lock_ms,
            "responses": [], "node_endpoints": []}


@api(key=78, min=1, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group, member = body.get("group_id") or "", body.get("member_id") or ""
    if not group or not member:
        return top_error(E.INVALID_REQUEST, "GroupId and MemberId must be set.")
    if body.get("share_acquire_mode", 0) not in (0, 1):
        return top_error(E.INVALID_REQUEST, f"share acquire mode {body.get('share_acquire_mode')} is not supported")
    if not authz.group(ctx, authz.Op.READ, group):
        return top_error(E.GROUP_AUTHORIZATION_FAILED, f"not authorized to read group {group}")
    sg = share_groups.for_gateway(gw)
    epoch = body.get("share_session_epoch", 0)
    session, code, message = sg.session(group, member, epoch)
    lock_ms = sg.lock_ms(group)
    if session is None:
        return top_error(code, message or "", lock_ms)
    answers: dict[tuple, dict] = {}
    denied: set = set()
    for t in body.get("topics") or ():
        tid = t.get("topic_id")
        name = topic_by_id(gw, tid)
        allowed = name is None or authz.topic(ctx, authz.Op.READ, name)
        for p in t.get("partitions") or ():
            key = (tid, p.get("partition_index", -1))
            if not allowed:
                denied.add(key)
                answers[key] = _partition(key[1], error_code=E.TOPIC_AUTHORIZATION_FAILED)
                continue
            if epoch != share_groups.FINAL_EPOCH:
                session.partitions.add(key)
            batches = p.get("acknowledgement_batches") or []
            if batches:
                code, msg = await sg.acknowledge(group, member, tid, key[1], batches)
                answers[key] = _partition(key[1], acknowledge_error_code=code, acknowledge_error_message=msg)
    for t in body.get("forgotten_topics_data") or ():
        for p in t.get("partitions") or ():
            session.partitions.discard((t.get("topic_id"), p))
    if epoch == share_groups.FINAL_EPOCH:
        await sg.close_session(group, member)
    else:
        max_records = body.get("max_records", 0) if ctx.api_version >= 1 else 0
        got = await sg.fetch(session, max_records if max_records > 0 else share_groups.MAX_RECORDS_DEFAULT,
                             body.get("max_wait_ms", 0))
        for key, data in got.items():
            answers.setdefault(key, _partition(key[1])).update(data)
    by_topic: dict = {}
    for (tid, index), part in answers.items():
        by_topic.setdefault(tid, []).append(part)
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "acquisition_lock_timeout_ms": lock_ms,
            "responses": [{"topic_id": tid, "partitions": parts} for tid, parts in by_topic.items()],
            "node_endpoints": []}
