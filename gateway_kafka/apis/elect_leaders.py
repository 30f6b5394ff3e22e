"""ElectLeaders (key 43), versions 0-2 (KIP-460 election types from v1).

A partition of a broker group is led by the group's master, so a leader election moves every
partition of the group at once. Under a failover controller (docs/design/failover.md) the
preferred replica of a partition is the first of its replicas — the member with the lowest
broker id (the order Metadata lists them in) — and a PREFERRED election asks the controller to
make it master (``KafkaGateway.elect_master``, the controller's CONTROLLER_ELECT_MASTER): only
an alive member of the SyncStateSet can be chosen, else PREFERRED_LEADER_NOT_AVAILABLE with the
controller's reason. An UNCLEAN election (type 1) only acts on a group without a master; the
controller still picks from the SyncStateSet unless it runs with enableElectUncleanMaster.
A partition already led by its preferred replica (type 0), or that has a leader (type 1), is
ELECTION_NOT_NEEDED — always the case without a controller, where the configured master leads.
``topic_partitions`` null means every partition. Unknown partitions UNKNOWN_TOPIC_OR_PARTITION;
other election types INVALID_REQUEST.
"""

from __future__ import annotations

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import find_topic, partition_count, visible_topics

PREFERRED, UNCLEAN = 0, 1


def _targets(gw, body: dict) -> list[tuple[str, list[int], bool]]:
    """(topic, partitions, known) for the request, every visible partition when null."""
    wanted = body.get("topic_partitions")
    if wanted is None:
        out = []
        for name in visible_topics(gw):
            tc = find_topic(gw, name)
            if tc is not None:
                out.append((name, list(range(partition_count(tc))), True))
        return out
    return [(t.get("topic"), list(t.get("partitions") or ()), find_topic(gw, t.get("topic")) is not None)
            for t in wanted]


@api(key=43, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    cluster = gw.cluster
    kind = body.get("election_type", PREFERRED)
    results = []
    decided: tuple[int, str | None] | None = None  # one election serves every partition of the group
    for name, parts, known in _targets(gw, body):
        tc = find_topic(gw, name) if known else None
        out = []
        for p in parts:
            if tc is None or not 0 <= p < partition_count(tc):
                out.append({"partition_id": p, "error_code": E.UNKNOWN_TOPIC_OR_PARTITION, "error_message": None})
                continue
            if kind not in (PREFERRED, UNCLEAN):
                out.append({"partition_id": p, "error_code": E.INVALID_REQUEST,
                            "error_message": f"election type {kind} is not 0 (preferred) or 1 (unclean)"})
                continue
            leader = cluster.master_node()  # not a slave standing in for a master that is down
            replicas = cluster.replicas(name, p)
            if gw.elect_master is None or (kind == PREFERRED and leader is not None and replicas
                                           and replicas[0] == leader.node_id) or (kind == UNCLEAN and leader is not None):
                out.append({"partition_id": p, "error_code": E.ELECTION_NOT_NEEDED,
                            "error_message": "the partition is led by its preferred replica" if kind == PREFERRED
                            else "the partition has a leader"})
                continue
            if decided is None:
                target = cluster.broker_id_of_node(replicas[0]) if kind == PREFERRED and replicas else None
                ok, reason = await gw.elect_master(target)
                decided = (E.NONE if ok else (E.PREFERRED_LEADER_NOT_AVAILABLE if kind == PREFERRED
                                              else E.ELIGIBLE_LEADERS_NOT_AVAILABLE), reason)
            out.append({"partition_id": p, "error_code": decided[0], "error_message": decided[1]})
        results.append({"topic": name, "partition_result": out})
    return {"throttle_time_ms": 0, "error_code": E.NONE, "replica_election_results": results}
