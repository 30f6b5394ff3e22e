"""DescribeConfigs (key 32), versions 0-4.

Topic resources (type 2): every topic config Kafka 4.4 defines with its value — set ones from
the topic's attributes (source TOPIC_CONFIG), others their defaults (DEFAULT_CONFIG) — filtered
by ``configuration_keys``; synonyms (v1+) on request; documentation (v3+) says what Rockafka does
with each, and "Recorded only: ..." for the ones it stores and reports without enforcing.
Broker resources (type 4, name = this node's id or "" for the cluster default): static settings
read-only, Kafka's dynamic keys read-write with their dynamic values. Group resources (type 32):
Kafka 4.4's group configs, set ones (source GROUP_CONFIG) and broker defaults.
Unknown topics UNKNOWN_TOPIC_OR_PARTITION; other resource types INVALID_REQUEST.
"""

from __future__ import annotations

from gateway_kafka import authz
from gateway_kafka import error_codes as E
from gateway_kafka.apis import RequestContext, api
from gateway_kafka.apis._common import find_topic
from gateway_kafka.apis._configs import (BROKER_RESOURCE, GROUP_RESOURCE, TOPIC_RESOURCE, denied_code, describe_broker,
                                         describe_group, describe_topic, may_on_config)


@api(key=32, min=0, max=4)
async def handle(ctx: RequestContext, body: dict) -> dict:
    gw = ctx.gateway
    synonyms, docs = body.get("include_synonyms", False), body.get("include_documentation", False)
    may = may_on_config(ctx, authz.Op.DESCRIBE_CONFIGS)
    results = []
    for r in body.get("resources") or ():
        rtype, rname = r.get("resource_type", 0), r.get("resource_name", "")
        keys = r.get("configuration_keys")
        entry = {"error_code": E.NONE, "error_message": None, "resource_type": rtype, "resource_name": rname,
                 "configs": []}
        if rtype in (TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE) and not may(rtype, rname):
            entry.update(error_code=denied_code(rtype), error_message="not allowed to DESCRIBE_CONFIGS")
        elif rtype == TOPIC_RESOURCE:
            tc = find_topic(gw, rname)
            if tc is None:
                entry.update(error_code=E.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"topic {rname!r} does not exist")
            else:
                entry["configs"] = describe_topic(gw, tc.attributes, keys, synonyms, docs)
        elif rtype == BROKER_RESOURCE:
            if rname not in ("", str(gw.settings.node_id)):
                entry.update(error_code=E.INVALID_REQUEST, error_message=f"broker {rname!r} is not this node")
            else:
                entry["configs"] = describe_broker(gw, rname, keys, synonyms, docs)
        elif rtype == GROUP_RESOURCE:
            if not rname:
                entry.update(error_code=E.INVALID_REQUEST, error_message="a group config resource needs a group id")
            else:
                entry["configs"] = describe_group(gw, rname, keys, synonyms, docs)
        else:
            entry.update(error_code=E.INVALID_REQUEST, error_message=f"resource type {rtype} is not supported")
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}
