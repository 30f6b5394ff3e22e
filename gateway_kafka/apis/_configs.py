"""Kafka topic and broker configs as the gateway exposes them.

Topic configs set by clients are kept in ``TopicConfig.attributes`` under their Kafka names;
a config not set there reports its default (derived from the engine's settings where one
exists, e.g. retention.ms from fileReservedTime). Only the names below are accepted — an
unknown name is INVALID_CONFIG, as Kafka answers — and values are type-checked. retention.ms
is enforced by the engine's retention pass (``MessageStore.apply_topic_retention``); most others
are recorded and reported only; the design note lists which.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from gateway_kafka import error_codes as E
from gateway_kafka.apis._common import blocking, find_topic

# ConfigSource and ConfigType values of DescribeConfigs
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8


class ConfigDef(NamedTuple):
    type: int
    choices: tuple[str, ...] = ()
    doc: str = ""


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef(TYPE_LIST, ("delete", "compact")),
    "compression.type": ConfigDef(TYPE_STRING, ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    "delete.retention.ms": ConfigDef(TYPE_LONG),
    "file.delete.delay.ms": ConfigDef(TYPE_LONG),
    "flush.messages": ConfigDef(TYPE_LONG),
    "flush.ms": ConfigDef(TYPE_LONG),
    "index.interval.bytes": ConfigDef(TYPE_INT),
    "max.compaction.lag.ms": ConfigDef(TYPE_LONG),
    "max.message.bytes": ConfigDef(TYPE_INT),
    "message.timestamp.type": ConfigDef(TYPE_STRING, ("CreateTime", "LogAppendTime")),
    "message.timestamp.difference.max.ms": ConfigDef(TYPE_LONG),
    "min.cleanable.dirty.ratio": ConfigDef(TYPE_DOUBLE),
    "min.compaction.lag.ms": ConfigDef(TYPE_LONG),
    "min.insync.replicas": ConfigDef(TYPE_INT),
    "preallocate": ConfigDef(TYPE_BOOLEAN),
    "retention.bytes": ConfigDef(TYPE_LONG),
    "retention.ms": ConfigDef(TYPE_LONG),
    "segment.bytes": ConfigDef(TYPE_INT),
    "segment.ms": ConfigDef(TYPE_LONG),
    "unclean.leader.election.enable": ConfigDef(TYPE_BOOLEAN),
}


def topic_defaults(gw: Any) -> dict[str, str]:
    store = gw.config.store
    return {
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "delete.retention.ms": "86400000",
        "file.delete.delay.ms": "60000",
        "flush.messages": "9223372036854775807",
        "flush.ms": str(store.flush_interval_commit_log),
        "index.interval.bytes": "4096",
        "max.compaction.lag.ms": "9223372036854775807",
        "max.message.bytes": str(gw.settings.message_max_bytes),
        "message.timestamp.type": "CreateTime",
        "message.timestamp.difference.max.ms": "9223372036854775807",
        "min.cleanable.dirty.ratio": "0.5",
        "min.compaction.lag.ms": "0",
        "min.insync.replicas": str(gw.settings.min_insync_replicas),
        "preallocate": "false",
        "retention.bytes": "-1",
        "retention.ms": str(store.file_reserved_time * 3_600_000),
        "segment.bytes": str(min(store.mapped_file_size_commit_log, 2**31 - 1)),
        "segment.ms": "604800000",
        "unclean.leader.election.enable": "false",
    }


def broker_configs(gw: Any) -> dict[str, tuple[str, bool]]:
    """name -> (value, read_only) for the broker resource."""
    s = gw.settings
    store = gw.config.store
    return {
        "broker.id": (str(s.node_id), True),
        "num.partitions": (str(s.num_partitions), True),
        "default.replication.factor": ("1", True),
        "auto.create.topics.enable": (str(s.auto_create_topics_enable).lower(), True),
        "delete.topic.enable": (str(s.delete_topic_enable).lower(), True),
        "message.max.bytes": (str(s.message_max_bytes), True),
        "socket.request.max.bytes": (str(s.socket_request_max_bytes), True),
        "log.retention.hours": (str(store.file_reserved_time), True),
        "log.flush.interval.ms": (str(store.flush_interval_commit_log), True),
        "group.min.session.timeout.ms": (str(s.group_min_session_timeout_ms), True),
        "group.max.session.timeout.ms": (str(s.group_max_session_timeout_ms), True),
        "group.initial.rebalance.delay.ms": (str(s.group_initial_rebalance_delay_ms), True),
        "offset.metadata.max.bytes": (str(s.offset_metadata_max_bytes), True),
    }


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why (name, value) is not acceptable, or None."""
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return f"unknown topic config name {name!r}"
    if value is None:
        return f"topic config {name!r} needs a value"
    if d.choices:
        items = [v.strip() for v in value.split(",")] if d.type == TYPE_LIST else [value]
        bad = [v for v in items if v not in d.choices]
        if bad or not items:
            return f"invalid value {value!r} for {name!r}: expected one of {', '.join(d.choices)}"
        return None
    try:
        if d.type in (TYPE_INT, TYPE_LONG):
            n = int(value)
            if d.type == TYPE_INT and not -(2**31) <= n < 2**31:
                raise ValueError
        elif d.type == TYPE_DOUBLE:
            float(value)
        elif d.type == TYPE_BOOLEAN and value.lower() not in ("true", "false"):
            raise ValueError
    except ValueError:
        return f"invalid value {value!r} for {name!r}: expected a {_TYPE_NAMES[d.type]}"
    return None


_TYPE_NAMES = {TYPE_BOOLEAN: "boolean", TYPE_STRING: "string", TYPE_INT: "32-bit integer", TYPE_LONG: "64-bit integer",
               TYPE_DOUBLE: "number", TYPE_LIST: "list"}


def describe_topic(gw: Any, attributes: dict[str, str], keys: list[str] | None, synonyms: bool,
                   documentation: bool) -> list[dict]:
    out = []
    for name, default in sorted(topic_defaults(gw).items()):
        if keys is not None and name not in keys:
            continue
        overridden = name in attributes
        value = attributes[name] if overridden else default
        source = SOURCE_TOPIC if overridden else SOURCE_DEFAULT
        syn = []
        if synonyms:
            if overridden:
                syn.append({"name": name, "value": value, "source": SOURCE_TOPIC})
            syn.append({"name": name, "value": default, "source": SOURCE_DEFAULT})
        out.append({"name": name, "value": value, "read_only": False, "is_default": not overridden,
                    "config_source": source, "is_sensitive": False, "synonyms": syn,
                    "config_type": TOPIC_CONFIGS[name].type, "documentation": None})
    return out


def describe_broker(gw: Any, keys: list[str] | None) -> list[dict]:
    out = []
    for name, (value, ro) in sorted(broker_configs(gw).items()):
        if keys is not None and name not in keys:
            continue
        out.append({"name": name, "value": value, "read_only": ro, "is_default": False,
                    "config_source": SOURCE_STATIC_BROKER, "is_sensitive": False, "synonyms": [],
                    "config_type": TYPE_STRING, "documentation": None})
    return out


def may_on_config(ctx: Any, op: Any):
    """``may(resource_type, name)`` for ``op`` (DESCRIBE_CONFIGS / ALTER_CONFIGS) on a topic or
    the broker (the cluster, as Kafka checks broker configs)."""
    from gateway_kafka import authz

    def may(rtype: int, name: str) -> bool:
        return authz.topic(ctx, op, name) if rtype == TOPIC_RESOURCE else authz.cluster(ctx, op)
    return may


async def alter_topic_resources(gw: Any, body: dict, new_attributes, event: str, may=None) -> dict:
    """The resource loop AlterConfigs and IncrementalAlterConfigs share.

    ``new_attributes(topic_config, resource)`` returns (attributes, None) or (None, why);
    ``why`` answers INVALID_CONFIG and changes nothing. Unknown topics answer
    UNKNOWN_TOPIC_OR_PARTITION; broker configs are static here (INVALID_REQUEST);
    ``validate_only`` validates without storing. ``may(resource_type, name)`` says whether the
    caller may ALTER_CONFIGS it (TOPIC_/CLUSTER_AUTHORIZATION_FAILED otherwise).
    """
    out = []
    for r in body.get("resources") or ():
        rtype, rname = r.get("resource_type", 0), r.get("resource_name", "")
        code, msg = E.NONE, None
        if may is not None and not may(rtype, rname):
            code = E.TOPIC_AUTHORIZATION_FAILED if rtype == TOPIC_RESOURCE else E.CLUSTER_AUTHORIZATION_FAILED
            out.append({"error_code": code, "error_message": "not allowed to ALTER_CONFIGS", "resource_type": rtype,
                        "resource_name": rname})
            continue
        if rtype == TOPIC_RESOURCE:
            tc = find_topic(gw, rname)
            if tc is None:
                code, msg = E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {rname!r} does not exist"
            else:
                attrs, why = new_attributes(tc, r)
                if why:
                    code, msg = E.INVALID_CONFIG, why
                elif not body.get("validate_only", False):
                    await blocking(gw.store.topic_config.create_or_update, dataclasses.replace(tc, attributes=attrs))
                    gw.log.info(event, topic=rname)
        elif rtype == BROKER_RESOURCE:
            code, msg = E.INVALID_REQUEST, "broker configs are static; set them with --set at start"
        else:
            code, msg = E.INVALID_REQUEST, f"resource type {rtype} is not supported"
        out.append({"error_code": code, "error_message": msg, "resource_type": rtype, "resource_name": rname})
    return {"throttle_time_ms": 0, "responses": out}
