"""OffsetForLeaderEpoch (key 23), versions 0-4.

Without a failover controller every partition has had one leader epoch, 0, since it was created
(a group's master never changes by itself), so the end offset of any epoch >= 0 is the high
watermark and the answered epoch is 0; a ``current_leader_epoch`` newer than 0 is
UNKNOWN_LEADER_EPOCH.

Under a failover controller (docs/design/failover.md) a partition's leader epoch is its broker
group's master epoch, which grows at every election, and the answer comes from the store's
epoch file (``MessageStore.epoch_end_offset``): the newest epoch not newer than the requested
one and the partition offset where it ended — so a consumer that read past what a failover
truncated learns where its epoch really ended (KIP-101, KIP-320). ``current_leader_epoch``
older than the master's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH; a slave answers
NOT_LEADER_OR_FOLLOWER (clients ask the leader), except the slave that Metadata names leader while
its group has no master (docs/design/cluster.md, "Groups down"): it answers from its replica's
epoch file. Unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import local_queue


def _answer(gw, name: str, index: int, queue: int, p: dict) -> dict:
    """Partition ``index`` of ``name``, stored in this node's queue ``queue``."""
    cluster = gw.cluster
    current = cluster.leader_epoch(name, index)
    asked_current = p.get("current_leader_epoch", -1)
    if asked_current > current:
        return {"error_code": E.UNKNOWN_LEADER_EPOCH, "partition": index, "leader_epoch": -1, "end_offset": -1}
    if 0 <= asked_current < current:
        return {"error_code": E.FENCED_LEADER_EPOCH, "partition": index, "leader_epoch": -1, "end_offset": -1}
    epoch = p.get("leader_epoch", -1)
    if epoch < 0:
        return {"error_code": E.NONE, "partition": index, "leader_epoch": -1, "end_offset": -1}
    if not gw.store.broker_config.enable_controller_mode:
        return {"error_code": E.NONE, "partition": index, "leader_epoch": 0,
                "end_offset": gw.store.get_max_offset_in_queue(name, queue)}
    if not cluster.leads_reads():  # a slave standing in for a master that is down answers from its copy
        return {"error_code": E.NOT_LEADER_OR_FOLLOWER, "partition": index, "leader_epoch": -1, "end_offset": -1}
    found, end = gw.store.epoch_end_offset(name, queue, epoch)
    return {"error_code": E.NONE, "partition": index, "leader_epoch": found, "end_offset": end}


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
            else:
                parts.append(_answer(gw, name, index, local_queue(gw, name, index)[0], p))
        topics.append({"topic": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics}
