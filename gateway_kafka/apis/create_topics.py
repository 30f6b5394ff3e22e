"""CreateTopics (key 19), versions 0-7.

Creates the engine topic (read = write queues = partitions) with the given Kafka configs in
its attributes. ``num_partitions`` -1 takes the gateway's ``num_partitions``; the replication
factor may be at most the number of live brokers of the group (a master and its slaves
replicate every topic whatever the factor, so v5+ answers with the real replica count;
INVALID_REPLICATION_FACTOR when larger); manual assignments may name the group's live brokers.
A slave answers NOT_CONTROLLER. ``validate_only`` checks everything and creates nothing.
Errors: INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS,
INVALID_REPLICATION_FACTOR, INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_REQUEST (a
name twice in one request). v5+ answers with the partitions, replication factor and configs.
"""

from __future__ import annotations

from collections import Counter

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka import topic_placement
from gateway_kafka.apis._common import (find_topic, mutation_quota, mutation_throttle, new_topic_config, topic_id,
                                        topic_name_error)
from gateway_kafka.quotas import THROTTLED_MESSAGE
from gateway_kafka.apis._configs import (SOURCE_DEFAULT, SOURCE_TOPIC, check_tiering, topic_defaults,
                                         validate_topic_config)



def _fail(name: str, code: int, message: str) -> dict:
    return {"name": name, "topic_id": topic_id(name) if name else None, "error_code": code, "error_message": message,
            "num_partitions": -1, "replication_factor": -1, "configs": None}


def check_topic(ctx: RequestContext, t: dict) -> tuple[dict | None, int, dict[str, str]]:
    """(error response or None, partitions, configs)."""
    gw = ctx.gateway
    name = t.get("name") or ""
    why = topic_name_error(name)
    if why:
        return _fail(name, E.INVALID_TOPIC_EXCEPTION, why), 0, {}
    if find_topic(gw, name) is not None or name in gw.cluster.topic_names():
        return _fail(name, E.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"), 0, {}
    if not gw.cluster.is_master:
        return _fail(name, E.NOT_CONTROLLER, "this broker is a slave; create topics on the master of the group"), 0, {}
    assignments = t.get("assignments") or []
    partitions = t.get("num_partitions", -1)
    rf = t.get("replication_factor", -1)
    node_ids = {n.node_id for n in gw.cluster.nodes()}
    if assignments:
        if partitions != -1 or rf != -1:
            return _fail(name, E.INVALID_REQUEST,
                         "give either assignments or num_partitions/replication_factor, not both"), 0, {}
        indexes = sorted(a.get("partition_index", -1) for a in assignments)
        if indexes != list(range(len(assignments))):
            return _fail(name, E.INVALID_REPLICA_ASSIGNMENT, "partition indexes must be 0..n-1, each once"), 0, {}
        for a in assignments:
            ids = a.get("broker_ids") or []
            if not ids or len(set(ids)) != len(ids) or not set(ids) <= node_ids:
                return _fail(name, E.INVALID_REPLICA_ASSIGNMENT,
                             f"replicas {ids} are not distinct live brokers of {sorted(node_ids)}"), 0, {}
        partitions = len(assignments)
    else:
        if partitions == -1:
            partitions = gw.settings.num_partitions
        limit = gw.config.broker.max_topic_queue_nums
        if not 1 <= partitions <= limit:
            return _fail(name, E.INVALID_PARTITIONS, f"number of partitions must be 1..{limit} "
                         f"(maxTopicQueueNums), got {t.get('num_partitions')}"), 0, {}
        size = gw.cluster.group_size()
        if rf == 0 or rf < -1 or rf > size:
            return _fail(name, E.INVALID_REPLICATION_FACTOR,
                         f"replication factor {rf} is larger than the {size} live broker(s) of the group "
                         "(a master and its slaves replicate every topic)"), 0, {}
    configs = {}
    for c in t.get("configs") or ():
        why = validate_topic_config(c.get("name", ""), c.get("value"))
        if why:
            return _fail(name, E.INVALID_CONFIG, why), 0, {}
        configs[c["name"]] = c["value"]
    why = check_tiering(gw, name, configs)
    if why:
        return _fail(name, E.INVALID_CONFIG, why), 0, {}
    return None, partitions, configs


@api(key=19, min=0, max=7)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    validate_only = body.get("validate_only", False)
    requested = body.get("topics") or []
    seen = Counter(t.get("name") for t in requested)
    quota = None if validate_only else mutation_quota(ctx, strict_since=6)
    out = []
    for t in requested:
        name = t.get("name") or ""
        if seen[name] > 1:
            out.append(_fail(name, E.INVALID_REQUEST, f"topic {name!r} is listed more than once"))
            continue
        if not (authz.cluster(ctx, authz.Op.CREATE) or authz.topic(ctx, authz.Op.CREATE, name)):
            out.append(_fail(name, E.TOPIC_AUTHORIZATION_FAILED, f"{ctx.conn.principal} may not CREATE topic {name}"))
            continue
        err, partitions, configs = check_topic(ctx, t)
        if err is not None:
            out.append(err)
            continue
        if quota is not None and not quota.take(partitions):
            out.append(_fail(name, E.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE))
            continue
        if not validate_only:
            refused = await topic_placement.create_topic(gw, new_topic_config(name, partitions, configs))
            if refused is not None:
                out.append(_fail(name, *refused))
                continue
            gw.log.info("topic_created", topic=name, partitions=partitions, configs=configs)
        defaults = topic_defaults(gw)
        shown = [{"name": k, "value": configs.get(k, v), "read_only": False,
                  "config_source": SOURCE_TOPIC if k in configs else SOURCE_DEFAULT, "is_sensitive": False}
                 for k, v in sorted(defaults.items())]
        out.append({"name": name, "topic_id": topic_id(name), "error_code": E.NONE, "error_message": None,
                    "num_partitions": partitions, "replication_factor": len(gw.cluster.replicas(name, 0)),
                    "configs": shown})
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "topics": out}
