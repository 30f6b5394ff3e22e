"""AlterConfigs (key 33), versions 0-2 — the legacy, non-incremental form.

For a resource (topic, broker, group) the given configs *replace* its whole set of overrides
(configs not named go back to their defaults), as Kafka's AlterConfigs does. Names and values are
validated (INVALID_CONFIG) before anything changes; ``validate_only`` changes nothing. See
``incremental_alter_configs.py`` for the resources and errors.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._configs import Target, alter_resources, may_on_config


def replace_all(target: Target, resource: dict) -> tuple[dict[str, str] | None, str | None]:
    new = {}
    for c in resource.get("configs") or ():
        why = target.validate(c.get("name", ""), c.get("value"))
        if why:
            return None, why
        new[c["name"]] = c["value"]
    return new, None


@api(key=33, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    return await alter_resources(ctx.gateway, body, replace_all, may_on_config(ctx, authz.Op.ALTER_CONFIGS))
