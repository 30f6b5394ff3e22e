"""DescribeAcls (key 29), CreateAcls (key 30), DeleteAcls (key 31), versions 1-3.

The bindings are the engine's one policy model (``engine.security``): what these APIs create
is what remoting requests and every other Kafka request are checked against, for any
protocol. LITERAL and PREFIXED patterns, ALLOW and DENY, Kafka's resource types, operations
and host filter; ``kafka-acls`` works unchanged. Describe needs DESCRIBE on the cluster,
create and delete ALTER (CLUSTER_AUTHORIZATION_FAILED otherwise). A binding Kafka would not
store (UNKNOWN/ANY fields, MATCH pattern, a principal without ``User:``) is INVALID_REQUEST
with the reason; on a slave a change answers NOT_CONTROLLER (send it to the master). Changes
are records in the log: they survive restarts and reach slaves by replication.
"""

from __future__ import annotations

from engine.security import (AclBinding, AclError, AclFilter, Operation, PatternType, Permission, ResourceType,
                             SecurityStateError)
from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api


def _enum(cls, value, what):
    try:
        return cls(int(value))
    except (ValueError, TypeError):
        raise AclError(f"unknown {what} {value}") from None


def _filter(f: dict) -> AclFilter:
    return AclFilter(_enum(ResourceType, f.get("resource_type_filter"), "resource type"),
                     _enum(PatternType, f.get("pattern_type_filter", 3), "pattern type"),
                     f.get("resource_name_filter"), f.get("principal_filter"), f.get("host_filter"),
                     _enum(Operation, f.get("operation"), "operation"),
                     _enum(Permission, f.get("permission_type"), "permission type"))


@api(key=29, min=1, max=3, name="acls")
async def describe(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": f"{ctx.conn.principal} may not DESCRIBE the cluster's ACLs", "resources": []}
    try:
        f = _filter(body)
    except AclError as exc:
        return {"throttle_time_ms": 0, "error_code": E.INVALID_REQUEST, "error_message": str(exc), "resources": []}
    by_resource: dict[tuple, list] = {}
    for b in ctx.gateway.security.describe_acls(f):
        by_resource.setdefault((int(b.resource_type), b.resource_name, int(b.pattern_type)), []).append(
            {"principal": b.principal, "host": b.host, "operation": int(b.operation),
             "permission_type": int(b.permission)})
    resources = [{"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                 for (t, n, p), acls in sorted(by_resource.items())]
    return {"throttle_time_ms": 0, "error_code": E.NONE, "error_message": None, "resources": resources}


@api(key=30, min=1, max=3, name="acls")
async def create(ctx: RequestContext, body: dict) -> dict:
    creations = body.get("creations") or []
    if not authz.cluster(ctx, authz.Op.ALTER):
        msg = f"{ctx.conn.principal} may not ALTER the cluster's ACLs"
        return {"throttle_time_ms": 0, "results": [{"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": msg}
                                                    for _ in creations]}
    results: list[dict] = []
    valid: list[AclBinding] = []
    for c in creations:
        try:
            b = AclBinding(_enum(ResourceType, c.get("resource_type"), "resource type"),
                           _enum(PatternType, c.get("resource_pattern_type", 3), "pattern type"),
                           str(c.get("resource_name") or ""), str(c.get("principal") or ""), str(c.get("host") or ""),
                           _enum(Operation, c.get("operation"), "operation"),
                           _enum(Permission, c.get("permission_type"), "permission type"))
            b.validate()
            valid.append(b)
            results.append({"error_code": E.NONE, "error_message": None})
        except AclError as exc:
            results.append({"error_code": E.INVALID_REQUEST, "error_message": str(exc)})
    if valid:
        try:
            ctx.gateway.security.create_acls(valid)
        except SecurityStateError as exc:
            results = [{"error_code": E.NOT_CONTROLLER if "slave" in str(exc) else E.UNKNOWN_SERVER_ERROR,
                        "error_message": str(exc)} if r["error_code"] == E.NONE else r for r in results]
        else:
            for b in valid:
                ctx.gateway.log.info("acl_created", binding=b.describe(), by=ctx.conn.principal)
    return {"throttle_time_ms": 0, "results": results}


def _matching(b: AclBinding) -> dict:
    return {"error_code": E.NONE, "error_message": None, "resource_type": int(b.resource_type),
            "resource_name": b.resource_name, "pattern_type": int(b.pattern_type), "principal": b.principal,
            "host": b.host, "operation": int(b.operation), "permission_type": int(b.permission)}


@api(key=31, min=1, max=3, name="acls")
async def delete(ctx: RequestContext, body: dict) -> dict:
    raw = body.get("filters") or []
    if not authz.cluster(ctx, authz.Op.ALTER):
        msg = f"{ctx.conn.principal} may not ALTER the cluster's ACLs"
        return {"throttle_time_ms": 0, "filter_results": [
            {"error_code": E.CLUSTER_AUTHORIZATION_FAILED, "error_message": msg, "matching_acls": []} for _ in raw]}
    filters: list[AclFilter | None] = []
    results: list[dict | None] = []
    for f in raw:
        try:
            filters.append(_filter(f))
            results.append(None)
        except AclError as exc:
            filters.append(None)
            results.append({"error_code": E.INVALID_REQUEST, "error_message": str(exc), "matching_acls": []})
    try:
        matched = ctx.gateway.security.delete_acls([f for f in filters if f is not None])
    except SecurityStateError as exc:
        code = E.NOT_CONTROLLER if "slave" in str(exc) else E.UNKNOWN_SERVER_ERROR
        return {"throttle_time_ms": 0, "filter_results": [
            r or {"error_code": code, "error_message": str(exc), "matching_acls": []} for r in results]}
    it = iter(matched)
    out = []
    for r in results:
        if r is not None:
            out.append(r)
            continue
        bindings = next(it)
        for b in bindings:
            ctx.gateway.log.info("acl_deleted", binding=b.describe(), by=ctx.conn.principal)
        out.append({"error_code": E.NONE, "error_message": None, "matching_acls": [_matching(b) for b in bindings]})
    return {"throttle_time_ms": 0, "filter_results": out}
