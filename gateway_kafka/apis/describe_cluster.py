"""DescribeCluster (key 60), versions 0-1: the cluster id, the controller (this node on a single
node) and the brokers from the gateway's ``ClusterView``. Cluster authorized operations
(KIP-430) when asked: the caller's bit set from the ACL model (``authz.cluster_operations``). Asking for controller endpoints (v1, endpoint type 2) gets
UNSUPPORTED_ENDPOINT_TYPE: there is no separate controller quorum to describe."""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


@api(key=60, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    cluster = ctx.gateway.cluster
    endpoint_type = body.get("endpoint_type", 1)
    if endpoint_type != 1:
        return {"throttle_time_ms": 0, "error_code": E.UNSUPPORTED_ENDPOINT_TYPE,
                "error_message": "only broker endpoints can be described", "endpoint_type": endpoint_type,
                "cluster_id": cluster.cluster_id, "controller_id": -1, "brokers": []}
    brokers = [{"broker_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in cluster.nodes()]
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "endpoint_type": 1,
            "cluster_id": cluster.cluster_id, "controller_id": cluster.controller_id, "brokers": brokers,
            "cluster_authorized_operations": authz.cluster_operations(ctx)
            if body.get("include_cluster_authorized_operations") else authz.NOT_ASKED}
