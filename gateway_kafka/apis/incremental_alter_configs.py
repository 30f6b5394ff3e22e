"""IncrementalAlterConfigs (key 44), versions 0-1.

Per config: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for list
configs (cleanup.policy). Resources: topics, this broker or the cluster default (the keys Kafka
changes at run time; ``dynamic_configs.py``) and groups (GROUP, 32: ``group_configs.py``). All
operations of a resource are validated first and applied together or not at all;
``validate_only`` changes nothing. Errors: INVALID_CONFIG (unknown name, bad value, a static
broker key, APPEND/SUBTRACT on a non-list), UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST (another
broker, other resource types), COORDINATOR_NOT_AVAILABLE when a group's configs cannot be stored.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._configs import Target, alter_resources, may_on_config

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_ops(target: Target, ops: list[dict]) -> tuple[dict[str, str] | None, str | None]:
    attrs = dict(target.current)
    for c in ops:
        name, op, value = c.get("name", ""), c.get("config_operation", SET), c.get("value")
        if op == SET:
            why = target.validate(name, value)
            if why:
                return None, why
            attrs[name] = value
        elif op == DELETE:
            why = target.validate(name, target.default(name) or None)
            if why and why.startswith(("unknown", "cannot update")):
                return None, why
            attrs.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            why = target.validate(name, value)
            if why and why.startswith(("unknown", "cannot update")):
                return None, why
            if not target.is_list(name):
                return None, f"{name!r} is not a list config; APPEND/SUBTRACT need one"
            current = [v for v in attrs.get(name, target.default(name)).split(",") if v]
            items = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            joined = ",".join(current)
            why = target.validate(name, joined) if joined else None
            if why:
                return None, why
            attrs[name] = joined
        else:
            return None, f"unknown config operation {op}"
    return attrs, None


@api(key=44, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    return await alter_resources(ctx.gateway, body, lambda target, r: apply_ops(target, r.get("configs") or []),
                                 may_on_config(ctx, authz.Op.ALTER_CONFIGS))
