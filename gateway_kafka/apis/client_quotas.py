"""DescribeClientQuotas (key 48) and AlterClientQuotas (key 49), versions 0-1 —
``kafka-configs --entity-type users|clients`` and the Admin client's quota calls.

The table and its semantics are ``gateway_kafka/quotas.py``. Describe needs DESCRIBE_CONFIGS on
the cluster, alter ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED otherwise), as in Kafka. Alter
answers per entry: INVALID_REQUEST with a message for an unknown entity type or key, a repeated
type or key, a value that is not a positive number (a whole one for byte rates), or an ip
entity; entries are stored one by one (each before it is answered), so a refused entry does not
undo the others. ``validate_only`` checks without storing.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.log_table import NotStored


@api(key=48, min=0, max=1)
async def describe(ctx: RequestContext, body: dict) -> dict:
    if not authz.cluster(ctx, authz.Op.DESCRIBE_CONFIGS):
        return {"throttle_time_ms": 0, "error_code": E.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "not allowed to DESCRIBE_CONFIGS on the cluster", "entries": None}
    code, message, entries = ctx.gateway.quotas.describe(body.get("components") or [], bool(body.get("strict")))
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "entries": entries}


@api(key=49, min=0, max=1)
async def alter(ctx: RequestContext, body: dict) -> dict:
    quotas = ctx.gateway.quotas
    allowed = authz.cluster(ctx, authz.Op.ALTER_CONFIGS)
    out = []
    for entry in body.get("entries") or []:
        entity_out = [{"entity_type": e.get("entity_type", ""), "entity_name": e.get("entity_name")}
                      for e in entry.get("entity") or []]
        code, message = E.NONE, None
        if not allowed:
            code, message = E.CLUSTER_AUTHORIZATION_FAILED, "not allowed to ALTER_CONFIGS on the cluster"
        else:
            entity, why = quotas.validate(entry.get("entity") or [], entry.get("ops") or [])
            if why is not None:
                code, message = E.INVALID_REQUEST, why
            elif not body.get("validate_only"):
                try:
                    await quotas.alter(entity, entry.get("ops") or [])
                except NotStored as exc:
                    code, message = E.COORDINATOR_NOT_AVAILABLE, f"the quotas could not be stored ({exc}); retry"
        out.append({"error_code": code, "error_message": message, "entity": entity_out})
    return {"throttle_time_ms": 0, "entries": out}
