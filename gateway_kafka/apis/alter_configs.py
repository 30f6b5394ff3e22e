"""AlterConfigs (key 33), versions 0-2 — the legacy, non-incremental form.

For a topic, the given configs *replace* its whole set of overrides (configs not named go
back to their defaults), as Kafka's AlterConfigs does. Names and values are validated
(INVALID_CONFIG) before anything changes; ``validate_only`` changes nothing. Broker configs
are static here: INVALID_REQUEST. Stored in the engine topic's attributes.
"""

from __future__ import annotations

import dataclasses

from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import blocking, find_topic
from gateway_kafka.apis._configs import BROKER_RESOURCE, TOPIC_CONFIGS, TOPIC_RESOURCE, validate_topic_config


def non_config_attributes(attributes: dict[str, str]) -> dict[str, str]:
    """Attributes that are not Kafka topic configs (set by RocketMQ tools): always kept."""
    return {k: v for k, v in attributes.items() if k not in TOPIC_CONFIGS}


@api(key=33, min=0, max=2)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    out = []
    for r in body.get("resources") or ():
        rtype, rname = r.get("resource_type", 0), r.get("resource_name", "")
        code, msg = E.NONE, None
        if rtype == TOPIC_RESOURCE:
            tc = find_topic(gw, rname)
            if tc is None:
                code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {rname!r} does not exist"
            else:
                new = {}
                for c in r.get("configs") or ():
                    why = validate_topic_config(c.get("name", ""), c.get("value"))
                    if why:
                        code, msg = E.INVALID_CONFIG, why
                        break
                    new[c["name"]] = c["value"]
                if code == E.NONE and not body.get("validate_only", False):
                    attrs = {**non_config_attributes(tc.attributes), **new}
                    await blocking(gw.store.topic_config.create_or_update, dataclasses.replace(tc, attributes=attrs))
                    gw.log.info("topic_configs_replaced", topic=rname, configs=new)
        elif rtype == BROKER_RESOURCE:
            code, msg = E.INVALID_REQUEST, "broker configs are static; set them with --set at start"
        else:
            code, msg = E.INVALID_REQUEST, f"resource type {rtype} is not supported"
        out.append({"error_code": code, "error_message": msg, "resource_type": rtype, "resource_name": rname})
    return {"throttle_time_ms": 0, "responses": out}
