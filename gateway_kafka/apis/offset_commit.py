"""OffsetCommit (key 8), versions 0-10 (v10 names topics by id).

Committed offsets go to the engine's consumer offsets, shared with RocketMQ groups (partition =
queue id), as one record of ``__consumer_offsets`` per partition in the group's partition
(Kafka's OffsetCommitKey/Value: offset, leader epoch, metadata, commit time): the answer is sent
once that record is stored (durable as flushDiskType promises), so an acknowledged commit
survives a crash. Who may commit follows Kafka's classic rules
(``GroupCoordinator.validate_offset_commit``): a member of the current generation (also while a
rebalance is being prepared, so revocation callbacks can commit), or anyone with generation -1
while the group has no members (standalone consumers and tools). For a KIP-848 consumer group Kafka's rules of that protocol
apply (``ModernGroupCoordinator.validate_offset_commit``): the member's current epoch
(STALE_MEMBER_EPOCH otherwise), v9+ for members of the consumer protocol, anyone with epoch -1
while the group has no members; a share group's offsets are not committed this way
(GROUP_ID_NOT_FOUND). v10: UNKNOWN_TOPIC_ID for an id no topic has. INVALID_GROUP_ID for a
group id longer than an offset record's key holds (32,767 UTF-8 bytes).

Per partition: UNKNOWN_TOPIC_OR_PARTITION for an unknown topic or partition,
OFFSET_METADATA_TOO_LARGE above ``offset_metadata_max_bytes``; COORDINATOR_NOT_AVAILABLE when
the store does not take the record (retriable), REQUEST_TIMED_OUT when it is stored but not yet
flushed as SYNC_FLUSH promises. The leader epoch (v6+) is kept and returned by OffsetFetch; the
commit timestamp (v1) is kept; retention time (v2-4) is accepted and ignored: offsets do not
expire.
"""

from __future__ import annotations

import time

from engine.consumer_offset import OffsetEntry, name_problem
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists, partition_results, topic_by_id


def store_result_code(res) -> int:
    """The answer for a commit the store took (``res.ok``), stored unflushed, or refused."""
    if res.ok:
        return E.NONE
    return E.REQUEST_TIMED_OUT if res.stored else E.COORDINATOR_NOT_AVAILABLE


@api(key=8, min=0, max=10)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group_id = body.get("group_id", "")
    args = (group_id, body.get("member_id", ""), body.get("generation_id_or_member_epoch", -1),
            body.get("group_instance_id"))
    top = gw.streams_groups.validate_offset_commit(*args[:3])
    if top is None:
        top = gw.modern_groups.validate_offset_commit(*args, ctx.api_version)
    if top is None:
        top = gw.coordinator.validate_offset_commit(*args)
    if top:
        gw.log.info("offset_commit_refused", group=group_id, member=args[1], generation_or_epoch=args[2],
                    error=E.NAMES.get(top, top))
    by_id = ctx.api_version >= 10
    if by_id:  # v10: topics by id; the answers carry the id back
        for t in body.get("topics") or ():
            t["name"] = topic_by_id(gw, t.get("topic_id"))
    max_meta = gw.settings.offset_metadata_max_bytes
    if top == E.NONE and name_problem("group id", group_id) is not None:
        top = E.INVALID_GROUP_ID  # longer than an offset record's key can hold
    if top == E.NONE and not authz.group(ctx, authz.Op.READ, group_id):
        top = E.GROUP_AUTHORIZATION_FAILED
    now = int(time.time() * 1000)
    codes: dict[tuple[str, int], int] = {}
    entries: dict[tuple[str, int], OffsetEntry] = {}
    for t in body.get("topics") or ():
        name = t.get("name")
        topic_denied = top == E.NONE and name is not None and not authz.topic(ctx, authz.Op.READ, name)
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            meta = p.get("committed_metadata")
            if top != E.NONE:
                codes[(name, index)] = top
            elif by_id and name is None:
                codes[(name, index)] = E.UNKNOWN_TOPIC_ID
            elif topic_denied:
                codes[(name, index)] = E.TOPIC_AUTHORIZATION_FAILED
            elif not partition_exists(gw, name, index):
                codes[(name, index)] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif meta is not None and len(meta.encode("utf-8")) > max_meta:
                codes[(name, index)] = E.OFFSET_METADATA_TOO_LARGE
            else:
                ts = p.get("commit_timestamp", -1)
                entries[(name, index)] = OffsetEntry(p.get("committed_offset", -1), p.get("committed_leader_epoch", -1),
                                                     meta, ts if ts is not None and ts >= 0 else now)
    if entries:
        res = await gw.put(gw.store.consumer_offsets.commit_durable, group_id, entries)
        code = store_result_code(res)
        if code != E.NONE:
            gw.log.warning("offset_commit_not_stored", group=group_id, status=res.status.name, error=res.error)
        for key in entries:
            codes[key] = code
    results = partition_results(body.get("topics"), codes)
    if by_id:
        for t, r in zip(body.get("topics") or (), results):
            r["topic_id"] = t.get("topic_id")
    return {"throttle_time_ms": 0, "topics": results}
