"""IncrementalAlterConfigs (key 44), versions 0-1.

Per topic config: SET (0), DELETE (1, back to the default), APPEND (2) and SUBTRACT (3) for
list configs (cleanup.policy). All operations of a resource are validated first and applied
together or not at all; ``validate_only`` changes nothing. Errors: INVALID_CONFIG (unknown
name, bad value, APPEND/SUBTRACT on a non-list), UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST
for broker resources (static here) and other types.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api
from gateway_kafka import authz
from gateway_kafka.apis._configs import (TOPIC_CONFIGS, may_on_config, TYPE_LIST, alter_topic_resources, topic_defaults,
                                         validate_topic_config)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def apply_ops(gw, attrs: dict[str, str], ops: list[dict]) -> tuple[dict[str, str] | None, str | None]:
    attrs = dict(attrs)
    defaults = topic_defaults(gw)
    for c in ops:
        name, op, value = c.get("name", ""), c.get("config_operation", SET), c.get("value")
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            return None, f"unknown topic config name {name!r}"
        if op == SET:
            why = validate_topic_config(name, value)
            if why:
                return None, why
            attrs[name] = value
        elif op == DELETE:
            attrs.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if d.type != TYPE_LIST:
                return None, f"{name!r} is not a list config; APPEND/SUBTRACT need one"
            current = [v for v in attrs.get(name, defaults[name]).split(",") if v]
            items = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            joined = ",".join(current)
            why = validate_topic_config(name, joined) if joined else None
            if why:
                return None, why
            attrs[name] = joined
        else:
            return None, f"unknown config operation {op}"
    return attrs, None


@api(key=44, min=0, max=1)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    return await alter_topic_resources(
        gw, body, lambda tc, resource: apply_ops(gw, tc.attributes, resource.get("configs") or []),
        "topic_configs_altered", may_on_config(ctx, authz.Op.ALTER_CONFIGS))
