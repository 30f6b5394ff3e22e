"""AlterConfigs (key 33), versions 0-2 — the legacy, non-incremental form.

For a topic, the given configs *replace* its whole set of overrides (configs not named go
back to their defaults), as Kafka's AlterConfigs does. Names and values are validated
(INVALID_CONFIG) before anything changes; ``validate_only`` changes nothing. Broker configs
are static here: INVALID_REQUEST. Stored in the engine topic's attributes.
"""

from __future__ import annotations

from gateway_kafka.apis import RequestContext, api
from gateway_kafka import authz
from gateway_kafka.apis._configs import may_on_config, TOPIC_CONFIGS, alter_topic_resources, validate_topic_config


def non_config_attributes(attributes: dict[str, str]) -> dict[str, str]:
    """Attributes that are not Kafka topic configs (set by RocketMQ tools): always kept."""
    return {k: v for k, v in attributes.items() if k not in TOPIC_CONFIGS}


@api(key=33, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    def replace_all(tc, resource) -> tuple[dict[str, str] | None, str | None]:
        new = {}
        for c in resource.get("configs") or ():
            why = validate_topic_config(c.get("name", ""), c.get("value"))
            if why:
                return None, why
            new[c["name"]] = c["value"]
        return {**non_config_attributes(tc.attributes), **new}, None

    return await alter_topic_resources(ctx.gateway, body, replace_all, "topic_configs_replaced",
                                       may_on_config(ctx, authz.Op.ALTER_CONFIGS))
