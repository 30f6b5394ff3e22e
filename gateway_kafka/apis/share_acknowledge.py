"""ShareAcknowledge (key 79), versions 1-2 — KIP-932: acknowledge records of a share group
without fetching (a consumer's commitSync / close). Types per offset: 0 gap and 1 accept finish
a record, 2 release makes it available again (its next delivery counts one more), 3 reject sends
it to the group's dead-letter topic (``%DLQ%<group>`` unless ``errors.deadletterqueue.topic.name``
is set), 4 renew (v2) restarts its acquisition lock. The share session epoch is the one ShareFetch
uses (-1 closes the session: the member's remaining records are released).
Per partition: INVALID_RECORD_STATE (a record not locked by this member), UNKNOWN_TOPIC_ID,
TOPIC_AUTHORIZATION_FAILED, INVALID_REQUEST (a malformed batch), KAFKA_STORAGE_ERROR.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka import share_groups
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import topic_by_id

_LEADER = {"leader_id": -1, "leader_epoch": -1}


@api(key=79, min=1, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group, member = body.get("group_id") or "", body.get("member_id") or ""
    resp = {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "acquisition_lock_timeout_ms": 0,
            "responses": [], "node_endpoints": []}
    if not group or not member:
        resp.update(error_code=E.INVALID_REQUEST, error_message="GroupId and MemberId must be set.")
        return resp
    if not authz.group(ctx, authz.Op.READ, group):
        resp.update(error_code=E.GROUP_AUTHORIZATION_FAILED, error_message=f"not authorized to read group {group}")
        return resp
    sg = share_groups.for_gateway(gw)
    epoch = body.get("share_session_epoch", 0)
    resp["acquisition_lock_timeout_ms"] = sg.lock_ms(group)
    if epoch == 0:
        resp.update(error_code=E.INVALID_SHARE_SESSION_EPOCH, error_message="ShareAcknowledge cannot open a session")
        return resp
    session, code, message = sg.session(group, member, epoch)
    if session is None:
        resp.update(error_code=code, error_message=message)
        return resp
    for t in body.get("topics") or ():
        tid = t.get("topic_id")
        name = topic_by_id(gw, tid)
        parts = []
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            if name is not None and not authz.topic(ctx, authz.Op.READ, name):
                code, msg = E.TOPIC_AUTHORIZATION_FAILED, None
            else:
                code, msg = await sg.acknowledge(group, member, tid, index, p.get("acknowledgement_batches") or [])
            parts.append({"partition_index": index, "error_code": code, "error_message": msg, "current_leader": _LEADER})
        resp["responses"].append({"topic_id": tid, "partitions": parts})
    if epoch == share_groups.FINAL_EPOCH:
        await sg.close_session(group, member)
    return resp
