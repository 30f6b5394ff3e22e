"""DescribeTopicPartitions (key 75), version 0 — what the Java admin client (3.8+) and Spark's
driver ask first when describing topics.

Topics as in Metadata (named ones only; an empty list describes every visible topic), sorted
by name, with paging: at most ``response_partition_limit`` partitions per answer and a
``next_cursor`` (topic, partition) to continue from. Unknown topics get
UNKNOWN_TOPIC_OR_PARTITION; no auto-creation (Kafka does not create here either). No
eligible leader replicas (ELR) on a single node: empty lists, which the Java admin requires (null
makes it fail). Each described topic carries its ``topic_authorized_operations`` (KIP-430: the
caller's bit set from the ACL model, always filled as Kafka does); a topic the caller may not
DESCRIBE — every internal topic, for anyone but a super user — is TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import uuid

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import cluster_topics, find_topic, is_internal, topic_id, topic_partition_ids

ZERO_UUID = uuid.UUID(int=0)


@api(key=75, min=0, max=0)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    cluster = gw.cluster
    asked = sorted({t.get("name") for t in body.get("topics") or ()})
    known = cluster_topics(gw)
    names = asked or [n for n in sorted(known) if authz.topic(ctx, authz.Op.DESCRIBE, n)]
    limit = max(1, body.get("response_partition_limit", 2000) or 2000)
    cursor = body.get("cursor")
    if cursor:
        names = [n for n in names if n >= cursor.get("topic_name", "")]
    topics = []
    next_cursor = None
    emitted = 0
    for name in names:
        if not authz.topic(ctx, authz.Op.DESCRIBE, name):
            topics.append({"error_code": E.TOPIC_AUTHORIZATION_FAILED, "name": name, "topic_id": ZERO_UUID,
                           "is_internal": False, "partitions": []})
            continue
        tc = known.get(name) or find_topic(gw, name)  # asked by name: internal topics too
        if name not in known and tc is None:
            topics.append({"error_code": E.UNKNOWN_TOPIC_OR_PARTITION, "name": name, "topic_id": ZERO_UUID,
                           "is_internal": False, "partitions": []})
            continue
        start = cursor.get("partition_index", 0) if cursor and name == cursor.get("topic_name") else 0
        parts = []
        for p in [i for i in topic_partition_ids(gw, name, tc) if i >= start]:
            if emitted >= limit:
                next_cursor = {"topic_name": name, "partition_index": p}
                break
            leader = cluster.leader(name, p)
            parts.append({"error_code": E.NONE if leader is not None else E.LEADER_NOT_AVAILABLE,
                          "partition_index": p, "leader_id": leader.node_id if leader is not None else -1,
                          "leader_epoch": cluster.leader_epoch(name, p), "replica_nodes": cluster.replicas(name, p),
                          "isr_nodes": cluster.isr(name, p), "eligible_leader_replicas": [], "last_known_elr": [],
                          "offline_replicas": cluster.offline_replicas(name, p)})
            emitted += 1
        topics.append({"error_code": E.NONE, "name": name, "topic_id": topic_id(name), "is_internal": is_internal(name),
                       "partitions": parts, "topic_authorized_operations": authz.topic_operations(ctx, name)})
        if next_cursor is not None:
            break
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}
