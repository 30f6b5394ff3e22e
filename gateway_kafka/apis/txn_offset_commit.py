"""TxnOffsetCommit (key 28), versions 0-3.

Stages consumer offsets in the producer's open transaction (the group must have been added with
AddOffsetsToTxn): they are written as transactional records of ``__consumer_offsets`` (the
group's partition) and take effect only when the transaction's COMMIT marker reaches that
partition; an abort drops them. Until then OffsetFetch with ``require_stable`` answers
UNSTABLE_OFFSET_COMMIT for them. Per partition: UNKNOWN_TOPIC_OR_PARTITION,
OFFSET_METADATA_TOO_LARGE, or the verdict for all of them: the group's (v3, KIP-447: a member
unknown to the group UNKNOWN_MEMBER_ID, another generation ILLEGAL_GENERATION, a replaced static
member FENCED_INSTANCE_ID — so a producer whose consumer lost its partitions in a rebalance
cannot commit offsets for them), then the transaction's (INVALID_PRODUCER_ID_MAPPING,
PRODUCER_FENCED, INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS).
"""

from __future__ import annotations

import time

from engine.consumer_offset import OffsetEntry
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists, partition_results


@api(key=28, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    group = body.get("group_id", "")
    max_meta = gw.settings.offset_metadata_max_bytes
    now = int(time.time() * 1000)
    codes: dict[tuple[str, int], int] = {}
    staged: dict[tuple[str, int], OffsetEntry] = {}
    for t in body.get("topics") or ():
        name = t.get("name")
        for p in t.get("partitions") or ():
            index = p.get("partition_index", -1)
            meta = p.get("committed_metadata")
            if not partition_exists(gw, name, index):
                codes[(name, index)] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif meta is not None and len(meta.encode("utf-8")) > max_meta:
                codes[(name, index)] = E.OFFSET_METADATA_TOO_LARGE
            else:
                staged[(name, index)] = OffsetEntry(p.get("committed_offset", -1), p.get("committed_leader_epoch", -1),
                                                    meta, now)
    denied = None
    if not authz.txn_id(ctx, authz.Op.WRITE, body.get("transactional_id", "")):
        denied = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.group(ctx, authz.Op.READ, group):
        denied = E.GROUP_AUTHORIZATION_FAILED
    for key in list(staged):
        if denied is not None or not authz.topic(ctx, authz.Op.READ, key[0]):
            codes[key] = denied if denied is not None else E.TOPIC_AUTHORIZATION_FAILED
            del staged[key]
    if staged:
        member, generation, instance = body.get("member_id") or "", body.get("generation_id", -1), \
            body.get("group_instance_id")
        if gw.streams_groups.owns(group):
            code = gw.streams_groups.validate_offset_commit(group, member, generation)
            if code == E.STALE_MEMBER_EPOCH:
                code = E.ILLEGAL_GENERATION
        elif gw.modern_groups.owns(group):  # KIP-848: the member's epoch (KIP-447 checks carry over)
            code = gw.modern_groups.validate_offset_commit(group, member, generation, instance, ctx.api_version,
                                                           transactional=True)
            if code == E.STALE_MEMBER_EPOCH:
                code = E.ILLEGAL_GENERATION  # what Kafka answers transactional commits
        else:
            code = gw.coordinator.validate_txn_offset_commit(group, member, generation, instance)
        if code == E.NONE:
            code = await gw.txn.stage_offsets(body.get("transactional_id", ""), body.get("producer_id", -1),
                                              body.get("producer_epoch", -1), group, staged)
        for key in staged:
            codes[key] = code
    return {"throttle_time_ms": 0, "topics": partition_results(body.get("topics"), codes)}
