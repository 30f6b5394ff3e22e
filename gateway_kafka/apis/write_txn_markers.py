"""WriteTxnMarkers (key 27), versions 1-2 (Kafka 4's range; v0 was removed there).

Sent by the transaction coordinator of another broker group when a transaction it coordinates
holds partitions this group leads (docs/design/cluster.md, "Transactions spanning groups"): per
marker (producer id, epoch, result) and partition, the COMMIT or ABORT control batch is appended
to the partition's queue — the same marker the coordinator's local path writes — and for a
``__consumer_offsets`` partition the offsets the producer staged there are applied or dropped.
Per partition: NONE once stored, NOT_LEADER_OR_FOLLOWER when this node does not lead it (a slave,
or another group's partition: the coordinator asks the group's master again),
UNKNOWN_TOPIC_OR_PARTITION when no group has it (deleted: the coordinator drops it),
KAFKA_STORAGE_ERROR when the store refused it (retried). With authorization on only a principal
allowed CLUSTER_ACTION on the cluster (the nodes' inner credentials are a super user) may send
it: CLUSTER_AUTHORIZATION_FAILED for every partition otherwise, as Kafka answers.
"""

from __future__ import annotations

from engine.state_log import CONSUMER_OFFSETS
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import partition_exists


@api(key=27, min=1, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    denied = authz.enabled(ctx) and not authz.cluster(ctx, authz.Op.CLUSTER_ACTION)
    if denied:
        gw.log.warning("write_txn_markers_refused", principal=str(ctx.conn.principal),
                       reason="needs CLUSTER_ACTION on the cluster")
    cluster = gw.cluster
    out = []
    for marker in body.get("markers") or ():
        pid, epoch, committed = marker.get("producer_id", -1), marker.get("producer_epoch", -1), \
            bool(marker.get("transaction_result"))
        topics = []
        for t in marker.get("topics") or ():
            name = t.get("name") or ""
            parts = []
            for p in t.get("partition_indexes") or ():
                if denied:
                    code = E.CLUSTER_AUTHORIZATION_FAILED
                elif gw.store.is_slave:
                    code = E.NOT_LEADER_OR_FOLLOWER
                elif name == CONSUMER_OFFSETS:
                    owner = cluster.coordinator_owner(CONSUMER_OFFSETS, p) \
                        if cluster is not None and getattr(cluster, "others", None) else None
                    code = E.NOT_LEADER_OR_FOLLOWER if owner not in (None, getattr(cluster, "broker_name", None)) \
                        else await gw.txn.write_local_marker(name, p, pid, epoch, committed)
                elif not partition_exists(gw, name, p):
                    code = E.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    code = await gw.txn.write_local_marker(name, p, pid, epoch, committed)
                parts.append({"partition_index": p, "error_code": code})
            topics.append({"name": name, "partitions": parts})
        out.append({"producer_id": pid, "topics": topics})
    return {"markers": out}
