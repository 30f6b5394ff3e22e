"""Metadata (key 3), versions 0-12.

Brokers come from the gateway's ``ClusterView`` (one node for an all-in-one node; a broker group
reports its master and slaves), topics from the engine's topic config: partitions = read
queues, every partition led by the group's master (LEADER_NOT_AVAILABLE while no master is
known), replicas = the group's members, ISR = the master and its in-sync slaves, members that
went away in ``offline_replicas``, leader epoch 0. A slave never creates a topic itself (its
topic table is its master's copy): asked to auto-create, it asks its master to create the topic
if absent and answers LEADER_NOT_AVAILABLE; the client asks again and gets the partitions once
the master's topic table reached the slave.

- ``topics`` null (v1+) or empty (v0) lists every Kafka-visible topic (RocketMQ system topics
  are hidden); a named topic that does not exist is created when the request allows it
  (v4+ ``allow_auto_topic_creation``, always for v0-3) and the gateway's
  ``auto_create_topics_enable`` is on — synchronously, so the first answer already has the
  partitions (Kafka answers LEADER_NOT_AVAILABLE once; clients handle both).
- Illegal names get INVALID_TOPIC_EXCEPTION, unknown ones UNKNOWN_TOPIC_OR_PARTITION, lookups
  by topic id (v10+) that match nothing UNKNOWN_TOPIC_ID. A name neither this node nor its view
  of the other broker groups knows is first looked up at the NameServer (shared, spaced
  refreshes): a topic created through another node a moment ago is listed, as every Kafka
  broker lists a new topic within milliseconds.
- Authorized operations (KIP-430, v8+): when the request asks, each topic's and (v8-10) the
  cluster's bit set of what the caller may do, from the ACL model (``authz.topic_operations``);
  otherwise Kafka's "not provided" value. Internal topics are left out of a full listing and
  refused by name unless the caller is a super user (``engine.security.reads``).
"""

from __future__ import annotations

import uuid

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import (auto_create, cluster_topics, find_topic, is_internal, look_up_elsewhere,
                                        topic_id, topic_name_error, topic_partition_ids)

ZERO_UUID = uuid.UUID(int=0)


def partition_entries(gw, name: str, ids) -> list[dict]:
    cluster = gw.cluster
    out = []
    for p in ids:
        leader = cluster.leader(name, p)
        out.append({"error_code": E.NONE if leader is not None else E.LEADER_NOT_AVAILABLE, "partition_index": p,
                    "leader_id": leader.node_id if leader is not None else -1,
                    "leader_epoch": cluster.leader_epoch(name, p) if leader is not None else -1,
                    "replica_nodes": cluster.replicas(name, p), "isr_nodes": cluster.isr(name, p),
                    "offline_replicas": cluster.offline_replicas(name, p)})
    return out


def topic_entry(gw, name: str, tc) -> dict:
    """``tc`` None: a topic only other broker groups hold (docs/design/cluster.md)."""
    return {"error_code": E.NONE, "name": name, "topic_id": topic_id(name), "is_internal": is_internal(name),
            "partitions": partition_entries(gw, name, topic_partition_ids(gw, name, tc))}


def error_entry(name: str | None, code: int, tid: uuid.UUID = ZERO_UUID) -> dict:
    return {"error_code": code, "name": name, "topic_id": tid, "is_internal": False, "partitions": []}


@api(key=3, min=0, max=12)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    requested = body.get("topics")
    if ctx.api_version == 0 and not requested:
        requested = None  # v0: an empty list means every topic
    allow_auto = body.get("allow_auto_topic_creation", True) if ctx.api_version >= 4 else True
    allow_auto = allow_auto and gw.settings.auto_create_topics_enable
    topics = []
    if requested is None:
        for name, tc in sorted(cluster_topics(gw).items()):
            if authz.topic(ctx, authz.Op.DESCRIBE, name):  # unauthorized topics are left out (Kafka)
                topics.append(topic_entry(gw, name, tc))
    else:
        by_id = None
        for t in requested:
            name = t.get("name")
            if name is None:
                tid = t.get("topic_id") or ZERO_UUID
                if by_id is None:
                    by_id = {topic_id(n): n for n in cluster_topics(gw)}
                name = by_id.get(tid)
                if name is None:
                    topics.append(error_entry(None, E.UNKNOWN_TOPIC_ID, tid))
                    continue
            if not authz.topic(ctx, authz.Op.DESCRIBE, name):
                topics.append(error_entry(name, E.TOPIC_AUTHORIZATION_FAILED))
                continue
            tc = find_topic(gw, name)
            if tc is None and gw.cluster is not None and name in gw.cluster.topic_names():
                pass  # held by other broker groups: listed with their leaders, never created here
            elif tc is None:
                if topic_name_error(name) is not None:
                    topics.append(error_entry(name, E.INVALID_TOPIC_EXCEPTION))
                    continue
                if not allow_auto:
                    if not await look_up_elsewhere(gw, name):  # created through another node just now?
                        topics.append(error_entry(name, E.UNKNOWN_TOPIC_OR_PARTITION))
                        continue
                    topics.append(topic_entry(gw, name, None))
                    continue
                if not (authz.cluster(ctx, authz.Op.CREATE) or authz.topic(ctx, authz.Op.CREATE, name)):
                    topics.append(error_entry(name, E.TOPIC_AUTHORIZATION_FAILED))
                    continue
                tc = await auto_create(gw, name)
                if tc is None and name not in gw.cluster.topic_names():
                    topics.append(error_entry(name, E.LEADER_NOT_AVAILABLE))  # being created by its group
                    continue
            topics.append(topic_entry(gw, name, tc))
    if body.get("include_topic_authorized_operations"):
        for t in topics:
            if t["error_code"] == E.NONE:
                t["topic_authorized_operations"] = authz.topic_operations(ctx, t["name"])
    cluster = gw.cluster
    brokers = [{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
               for n in (gw.advertised(ctx.conn.listener, m) for m in cluster.nodes())]
    return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": cluster.cluster_id,
            "controller_id": cluster.controller_id, "topics": topics,
            "cluster_authorized_operations": authz.cluster_operations(ctx)
            if body.get("include_cluster_authorized_operations") else authz.NOT_ASKED}
