"""CreatePartitions (key 37), versions 0-3.

Raises a topic's partition count; new partitions start empty at offset 0. Over several broker
groups (docs/design/cluster.md) each new partition goes to the group of its assignment's first
broker (its leader), else to the group holding fewest partitions of the topic, as the next free
partition ids; on one group it raises the read and write queue numbers of the engine topic. Shrinking or keeping the count is INVALID_PARTITIONS,
assignments naming other brokers INVALID_REPLICA_ASSIGNMENT, an unknown topic
UNKNOWN_TOPIC_OR_PARTITION, an internal topic INVALID_TOPIC_EXCEPTION (its partition count
places every group and transactional id). ``validate_only`` checks without changing anything.
"""

from __future__ import annotations


from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka import topic_placement
from gateway_kafka.apis._common import find_topic, is_internal, mutation_quota, mutation_throttle
from gateway_kafka.quotas import THROTTLED_MESSAGE



@api(key=37, min=0, max=3)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    node_ids = {n.node_id for n in gw.cluster.nodes()}
    results = []
    quota = None if body.get("validate_only", False) else mutation_quota(ctx, strict_since=3)
    for t in body.get("topics") or ():
        name = t.get("name")
        count = t.get("count", 0)
        tc = find_topic(gw, name)
        known = tc is not None or name in gw.cluster.topic_names()
        current = len(gw.cluster.partition_ids(name)) if known else 0
        assignments = t.get("assignments")
        if not authz.topic(ctx, authz.Op.ALTER, name):
            code, msg = E.TOPIC_AUTHORIZATION_FAILED, f"{ctx.conn.principal} may not ALTER topic {name}"
        elif not gw.cluster.is_master:
            code, msg = E.NOT_CONTROLLER, "this broker is a slave; change topics on the master of the group"
        elif not known:
            code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
        elif is_internal(name):
            code, msg = E.INVALID_TOPIC_EXCEPTION, f"the partitions of internal topic {name} cannot change"
        elif count <= current:
            code, msg = E.INVALID_PARTITIONS, (f"topic {name!r} has {current} partitions; "
                                               f"the new count {count} must be larger")
        elif count > gw.config.broker.max_topic_queue_nums:
            code, msg = E.INVALID_PARTITIONS, f"at most {gw.config.broker.max_topic_queue_nums} partitions (maxTopicQueueNums)"
        elif assignments is not None and (len(assignments) != count - current or any(
                not a.get("broker_ids") or not set(a["broker_ids"]) <= node_ids for a in assignments)):
            code, msg = E.INVALID_REPLICA_ASSIGNMENT, "assignments must name live brokers of the group, one list per new partition"
        elif quota is not None and not quota.take(count - current):
            code, msg = E.THROTTLING_QUOTA_EXCEEDED, THROTTLED_MESSAGE
        else:
            code, msg = E.NONE, None
            if not body.get("validate_only", False):
                leaders = [a["broker_ids"][0] for a in assignments] if assignments is not None else None
                refused = await topic_placement.add_partitions(gw, name, count, leaders)
                if refused is not None:
                    code, msg = refused
                else:
                    gw.log.info("partitions_created", topic=name, partitions=count)
        results.append({"name": name, "error_code": code, "error_message": msg})
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "results": results}
