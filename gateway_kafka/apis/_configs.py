"""Kafka configs as the gateway exposes them: topics (resource type 2), brokers (4) and groups (32).

- **Topic configs** set by clients are kept in ``TopicConfig.attributes`` under their Kafka names.
  Every name Kafka 4.4 defines for a topic is known (MirrorMaker 2 copies them all): unknown
  names are INVALID_CONFIG, as Kafka answers, values are type-checked, unset ones report their
  defaults (derived from the engine's settings where one exists). Those the engine enforces
  (``Def.enforced``) say what they do in DescribeConfigs' documentation; the others say
  "Recorded only" and why.
- **Broker configs**: the node's settings under Kafka's names. The keys Kafka lets operators change
  at run time (``dynamic_configs.DYNAMIC_BROKER_CONFIGS``) are read-write: per broker (resource
  name = node id) or cluster-wide (name ""), stored in ``dynamic_configs.DynamicConfigs``; the
  rest are read-only (static, set with ``--set`` at start).
- **Group configs** (``group_configs.py``): records of ``__consumer_offsets``.

``alter_resources`` is the resource loop AlterConfigs and IncrementalAlterConfigs share.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, NamedTuple

from gateway_kafka import error_codes as E
from gateway_kafka.apis._common import blocking, find_topic
from gateway_kafka.dynamic_configs import CLUSTER_DEFAULT, DYNAMIC_BROKER_CONFIGS, ENFORCED as BROKER_ENFORCED
from gateway_kafka.log_table import NotStored
from gateway_kafka.group_configs import GROUP_CONFIGS

# ConfigSource and ConfigType values of DescribeConfigs
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST, TYPE_CLASS, TYPE_PASSWORD = \
    1, 2, 3, 4, 5, 6, 7, 8, 9

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
BROKER_LOGGER_RESOURCE = 8
GROUP_RESOURCE = 32

_RECORDED = "Recorded only: "
_ONE_LOG = "all topics share one commitlog, so "
_CLEANER = ("The cleaner's trigger: once it has run, consumers read only each key's latest record "
            "(docs/design/compaction.md).")


class ConfigDef(NamedTuple):
    type: int
    choices: tuple[str, ...] = ()
    doc: str = ""
    enforced: bool = False


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef(TYPE_LIST, ("delete", "compact"),
                                "delete: records go with retention.ms / retention.bytes; compact: the latest record of "
                                "each key is kept for good (docs/design/compaction.md); compact,delete: both.", True),
    "compression.gzip.level": ConfigDef(TYPE_INT, (), _RECORDED + "batches are stored as the producer compressed them."),
    "compression.lz4.level": ConfigDef(TYPE_INT, (), _RECORDED + "batches are stored as the producer compressed them."),
    "compression.type": ConfigDef(TYPE_STRING, ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
                                  _RECORDED + "batches are stored as the producer compressed them (producer)."),
    "compression.zstd.level": ConfigDef(TYPE_INT, (), _RECORDED + "batches are stored as the producer compressed them."),
    "delete.retention.ms": ConfigDef(TYPE_LONG, (), "How long a tombstone stays in a compacted topic (from its "
                                     "timestamp).", True),
    "errors.deadletterqueue.group.enable": ConfigDef(TYPE_BOOLEAN, (), _RECORDED + "any topic may be a share group's "
                                                     "dead-letter topic (errors.deadletterqueue.topic.name)."),
    "file.delete.delay.ms": ConfigDef(TYPE_LONG, (), _RECORDED + _ONE_LOG + "its segments go with fileReservedTime."),
    "flush.messages": ConfigDef(TYPE_LONG, (), _RECORDED + "flushing is the store's flushDiskType."),
    "flush.ms": ConfigDef(TYPE_LONG, (), _RECORDED + "flushing is the store's flushDiskType."),
    "follower.replication.throttled.replicas": ConfigDef(TYPE_LIST, (), _RECORDED + "replication is not throttled."),
    "index.interval.bytes": ConfigDef(TYPE_INT, (), _RECORDED + "every record is in the consume queue."),
    "leader.replication.throttled.replicas": ConfigDef(TYPE_LIST, (), _RECORDED + "replication is not throttled."),
    "local.retention.bytes": ConfigDef(TYPE_LONG, (), "Tiered topic: how much of a partition the local tier serves "
                                       "once uploaded (-2: as retention.bytes).", True),
    "local.retention.ms": ConfigDef(TYPE_LONG, (), "Tiered topic: how long the local tier serves records once "
                                    "uploaded (-2: as retention.ms).", True),
    "max.compaction.lag.ms": ConfigDef(TYPE_LONG, (), _CLEANER, True),
    "max.decompressed.message.bytes": ConfigDef(TYPE_INT, (), _RECORDED + "batches are not decompressed on produce."),
    "max.message.bytes": ConfigDef(TYPE_INT, (), "Largest record batch the topic takes.", True),
    "message.timestamp.after.max.ms": ConfigDef(TYPE_LONG, (), "When set on the topic: batches whose latest timestamp is "
                                                "further in the future are refused (INVALID_TIMESTAMP).", True),
    "message.timestamp.before.max.ms": ConfigDef(TYPE_LONG, (), "When set on the topic: batches whose first timestamp "
                                                 "is further in the past are refused (INVALID_TIMESTAMP).", True),
    "message.timestamp.type": ConfigDef(TYPE_STRING, ("CreateTime", "LogAppendTime"),
                                        "LogAppendTime: the broker's append time replaces the producer's.", True),
    "min.cleanable.dirty.ratio": ConfigDef(TYPE_DOUBLE, (), _CLEANER, True),
    "min.compaction.lag.ms": ConfigDef(TYPE_LONG, (), _CLEANER, True),
    "min.insync.replicas": ConfigDef(TYPE_INT, (), "acks=all needs this many in-sync replicas.", True),
    "preallocate": ConfigDef(TYPE_BOOLEAN, (), _RECORDED + _ONE_LOG + "preallocation is warmMapedFileEnable."),
    "remote.copy.lag.bytes": ConfigDef(TYPE_LONG, (), _RECORDED + "there is no tiered storage."),
    "remote.copy.lag.ms": ConfigDef(TYPE_LONG, (), _RECORDED + "there is no tiered storage."),
    "remote.log.copy.disable": ConfigDef(TYPE_BOOLEAN, (), _RECORDED + "there is no tiered storage."),
    "remote.log.delete.on.disable": ConfigDef(TYPE_BOOLEAN, (), "Must be true to set remote.storage.enable=false on a "
                                              "tiered topic.", True),
    "remote.storage.enable": ConfigDef(TYPE_BOOLEAN, (), "true: closed data is uploaded to the broker's object store "
                                       "and read from it once it left the disk (docs/design/tiered-storage.md); "
                                       "refused when the broker has no remote tier.", True),
    "retention.bytes": ConfigDef(TYPE_LONG, (), "Largest size of a partition; older records go first.", True),
    "retention.ms": ConfigDef(TYPE_LONG, (), "Records stored longer ago are deleted (never longer than the store's "
                              "fileReservedTime, except the latest of each key of a compacted topic).", True),
    "segment.bytes": ConfigDef(TYPE_INT, (), _ONE_LOG + "segments are mapedFileSizeCommitLog; on a compacted "
                               "topic the cleaner never cleans the newest segment.bytes of records (Kafka's active "
                               "segment).", True),
    "segment.index.bytes": ConfigDef(TYPE_INT, (), _RECORDED + _ONE_LOG + "consume queues are fixed size."),
    "segment.jitter.ms": ConfigDef(TYPE_LONG, (), _RECORDED + _ONE_LOG + "segments roll by size."),
    "segment.ms": ConfigDef(TYPE_LONG, (), _ONE_LOG + "segments roll by size; on a compacted topic the "
                            "cleaner replays Kafka's time roll to find the active segment it never cleans.", True),
    "unclean.leader.election.enable": ConfigDef(TYPE_BOOLEAN, (), _RECORDED + "a slave becomes master only in sync."),
}
# accepted for topics copied from older clusters (Kafka < 4.0), never reported unless set
LEGACY_TOPIC_CONFIGS = {"message.timestamp.difference.max.ms": ConfigDef(TYPE_LONG),
                        "message.downconversion.enable": ConfigDef(TYPE_BOOLEAN),
                        "message.format.version": ConfigDef(TYPE_STRING)}


def topic_defaults(gw: Any) -> dict[str, str]:
    store = gw.config.store
    return {
        "cleanup.policy": "delete",
        "compression.gzip.level": "-1",
        "compression.lz4.level": "9",
        "compression.type": "producer",
        "compression.zstd.level": "3",
        "delete.retention.ms": "86400000",
        "errors.deadletterqueue.group.enable": "false",
        "file.delete.delay.ms": "60000",
        "flush.messages": "9223372036854775807",
        "flush.ms": str(store.flush_interval_commit_log),
        "follower.replication.throttled.replicas": "",
        "index.interval.bytes": "4096",
        "leader.replication.throttled.replicas": "",
        "local.retention.bytes": "-2",
        "local.retention.ms": "-2",
        "max.compaction.lag.ms": "9223372036854775807",
        "max.decompressed.message.bytes": "2147483639",
        "max.message.bytes": str(gw.settings.message_max_bytes),
        "message.timestamp.after.max.ms": "3600000",
        "message.timestamp.before.max.ms": "9223372036854775807",
        "message.timestamp.type": "CreateTime",
        "min.cleanable.dirty.ratio": "0.5",
        "min.compaction.lag.ms": "0",
        "min.insync.replicas": str(gw.settings.min_insync_replicas),
        "preallocate": "false",
        "remote.copy.lag.bytes": "-1",
        "remote.copy.lag.ms": "0",
        "remote.log.copy.disable": "false",
        "remote.log.delete.on.disable": "false",
        "remote.storage.enable": "false",
        "retention.bytes": "-1",
        "retention.ms": str(store.file_reserved_time * 3_600_000),
        "segment.bytes": str(min(store.mapped_file_size_commit_log, 2**31 - 1)),
        "segment.index.bytes": "10485760",
        "segment.jitter.ms": "0",
        "segment.ms": "604800000",
        "unclean.leader.election.enable": "false",
    }


def broker_configs(gw: Any) -> dict[str, tuple[str | None, bool, int]]:
    """name -> (value, read_only, type) for the broker resource: the static ones from the node's
    settings, then every dynamic key with its current (static or default) value."""
    s = gw.settings
    store = gw.config.store
    limits = gw.config.limits
    dyn = gw.dynamic_configs
    out: dict[str, tuple[str | None, bool, int]] = {
        "broker.id": (str(s.node_id), True, TYPE_INT),
        "node.id": (str(s.node_id), True, TYPE_INT),
        "num.partitions": (str(s.num_partitions), True, TYPE_INT),
        "default.replication.factor": ("1", True, TYPE_INT),
        "auto.create.topics.enable": (str(s.auto_create_topics_enable).lower(), True, TYPE_BOOLEAN),
        "delete.topic.enable": (str(s.delete_topic_enable).lower(), True, TYPE_BOOLEAN),
        "socket.request.max.bytes": (str(s.socket_request_max_bytes), True, TYPE_INT),
        "log.retention.hours": (str(store.file_reserved_time), True, TYPE_INT),
        "group.min.session.timeout.ms": (str(s.group_min_session_timeout_ms), True, TYPE_INT),
        "group.max.session.timeout.ms": (str(s.group_max_session_timeout_ms), True, TYPE_INT),
        "group.initial.rebalance.delay.ms": (str(s.group_initial_rebalance_delay_ms), True, TYPE_INT),
        "group.coordinator.rebalance.protocols": (",".join(sorted(s.rebalance_protocols)), True, TYPE_LIST),
        "group.consumer.session.timeout.ms": (str(s.consumer_session_timeout_ms), True, TYPE_INT),
        "group.consumer.heartbeat.interval.ms": (str(s.consumer_heartbeat_interval_ms), True, TYPE_INT),
        "group.share.session.timeout.ms": (str(s.share_session_timeout_ms), True, TYPE_INT),
        "group.share.heartbeat.interval.ms": (str(s.share_heartbeat_interval_ms), True, TYPE_INT),
        "group.share.record.lock.duration.ms": (str(s.share_record_lock_duration_ms), True, TYPE_INT),
        "group.share.delivery.count.limit": (str(s.share_delivery_count_limit), True, TYPE_INT),
        "offset.metadata.max.bytes": (str(s.offset_metadata_max_bytes), True, TYPE_INT),
        "offsets.topic.num.partitions": (str(store.offsets_topic_num_partitions), True, TYPE_INT),
        "connections.max.idle.ms": (str(s.connections_max_idle_ms), True, TYPE_LONG),
    }
    current = {"message.max.bytes": s.message_max_bytes, "min.insync.replicas": s.min_insync_replicas,
               "max.connections": limits.max_connections, "max.connections.per.ip": limits.max_connections_per_ip,
               "log.flush.interval.ms": store.flush_interval_commit_log, "log.segment.bytes":
               min(store.mapped_file_size_commit_log, 2**31 - 1), "log.retention.ms": None,
               "producer.id.expiration.ms": store.producer_id_expiration_ms, "log.cleanup.policy": "delete",
               "compression.type": "producer", "log.message.timestamp.type": "CreateTime"}
    for name, ctype in DYNAMIC_BROKER_CONFIGS.items():
        value = dyn.effective(name, s.node_id) if name not in BROKER_ENFORCED else None
        if value is None:
            v = current.get(name, "")
            value = None if v is None else str(v)
        if ctype == TYPE_PASSWORD:
            value = None
        out[name] = (value, False, ctype)
    return out


def validate_typed(name: str, value: str | None, d: ConfigDef) -> str | None:
    if value is None:
        return f"config {name!r} needs a value"
    if d.choices:
        items = [v.strip() for v in value.split(",")] if d.type == TYPE_LIST else [value]
        bad = [v for v in items if v not in d.choices]
        if bad or not items:
            return f"invalid value {value!r} for {name!r}: expected one of {', '.join(d.choices)}"
        return None
    try:
        if d.type in (TYPE_INT, TYPE_LONG, TYPE_SHORT):
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


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Why (name, value) is not acceptable for a topic, or None."""
    d = TOPIC_CONFIGS.get(name) or LEGACY_TOPIC_CONFIGS.get(name)
    if d is None:
        return f"unknown topic config name {name!r}"
    why = validate_typed(name, value, d)
    if why:
        return why
    if name == "min.cleanable.dirty.ratio" and not 0 <= float(value) <= 1:
        return f"invalid value {value!r} for {name!r}: must be between 0 and 1"
    if name in ("delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
                "message.timestamp.after.max.ms", "message.timestamp.before.max.ms") and int(value) < 0:
        return f"invalid value {value!r} for {name!r}: must be at least 0"
    if name == "max.compaction.lag.ms" and int(value) < 1:
        return f"invalid value {value!r} for {name!r}: must be at least 1"
    return None


def check_tiering(gw: Any, topic: str, configs: dict[str, str]) -> str | None:
    """Why a topic's whole set of configs is refused by the tiering rules (``broker/tiered.py``,
    the same for every protocol), or None."""
    from broker import tiered

    return tiered.refusal(gw.config.store, topic, configs)


_TYPE_NAMES = {TYPE_BOOLEAN: "boolean", TYPE_STRING: "string", TYPE_INT: "32-bit integer", TYPE_LONG: "64-bit integer",
               TYPE_SHORT: "16-bit integer", TYPE_DOUBLE: "number", TYPE_LIST: "list", TYPE_CLASS: "class name",
               TYPE_PASSWORD: "password"}


def _entry(name: str, value: str | None, read_only: bool, source: int, ctype: int, doc: str | None,
           synonyms: list[dict], sensitive: bool = False) -> dict:
    return {"name": name, "value": value, "read_only": read_only, "is_default": source == SOURCE_DEFAULT,
            "config_source": source, "is_sensitive": sensitive, "synonyms": synonyms, "config_type": ctype,
            "documentation": doc}


def describe_topic(gw: Any, attributes: dict[str, str], keys: list[str] | None, synonyms: bool,
                   documentation: bool) -> list[dict]:
    out = []
    names = dict(topic_defaults(gw))
    for legacy in LEGACY_TOPIC_CONFIGS:
        if legacy in attributes:
            names[legacy] = ""
    for name, default in sorted(names.items()):
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
        d = TOPIC_CONFIGS.get(name) or LEGACY_TOPIC_CONFIGS[name]
        out.append(_entry(name, value, False, source, d.type, d.doc if documentation else None, syn))
    return out


def describe_broker(gw: Any, name: str, keys: list[str] | None, synonyms: bool, documentation: bool) -> list[dict]:
    out = []
    dyn = gw.dynamic_configs
    for key, (value, ro, ctype) in sorted(broker_configs(gw).items()):
        if keys is not None and key not in keys:
            continue
        source = SOURCE_STATIC_BROKER if ro else SOURCE_DEFAULT
        syn = []
        set_value, where = (None, None) if ro else dyn.resolve(key, int(name) if name else -1)
        if where is not None:
            value = set_value
            source = SOURCE_DYNAMIC_DEFAULT_BROKER if where == CLUSTER_DEFAULT else SOURCE_DYNAMIC_BROKER
        if synonyms and source != SOURCE_DEFAULT:
            syn.append({"name": key, "value": value, "source": source})
        doc = None
        if documentation:
            doc = "Read-only: set with --set at start." if ro else (
                "Changes at run time." if key in BROKER_ENFORCED else _RECORDED + "Rockafka has no equivalent setting.")
        sensitive = ctype == TYPE_PASSWORD
        out.append(_entry(key, None if sensitive else value, ro, source, ctype, doc, syn, sensitive))
    return out


def describe_group(gw: Any, group: str, keys: list[str] | None, synonyms: bool, documentation: bool) -> list[dict]:
    out = []
    configs = gw.group_configs
    overrides = configs.overrides(group)
    for name, d in sorted(GROUP_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        set_here = name in overrides
        value = overrides[name] if set_here else configs.default(name)
        source = SOURCE_GROUP if set_here else SOURCE_DEFAULT
        syn = [{"name": name, "value": value, "source": source}] if synonyms else []
        doc = (d.doc if d.enforced else _RECORDED + d.doc) if documentation else None
        out.append(_entry(name, value, False, source, d.type, doc, syn))
    return out


class Target(NamedTuple):
    """One resource AlterConfigs / IncrementalAlterConfigs may change."""
    current: dict[str, str]
    validate: Callable[[str, str | None], str | None]
    is_list: Callable[[str], bool]
    default: Callable[[str], str]
    store: Callable[[dict[str, str]], Any]      # async: store the resource's new overrides


def _target(gw: Any, rtype: int, rname: str) -> tuple[Target | None, int, str | None]:
    if rtype == TOPIC_RESOURCE:
        tc = find_topic(gw, rname)
        if tc is None:
            return None, E.UNKNOWN_TOPIC_OR_PARTITION, f"topic {rname!r} does not exist"
        known = set(TOPIC_CONFIGS) | set(LEGACY_TOPIC_CONFIGS)
        current = {k: v for k, v in tc.attributes.items() if k in known}
        others = {k: v for k, v in tc.attributes.items() if k not in known}  # set by RocketMQ tools: kept

        async def store_topic(new: dict[str, str]) -> None:
            await blocking(gw.store.topic_config.create_or_update, dataclasses.replace(tc, attributes={**others, **new}))
            gw.log.info("topic_configs_altered", topic=rname)

        defaults = topic_defaults(gw)
        return Target(current, validate_topic_config, lambda n: (TOPIC_CONFIGS.get(n) or ConfigDef(0)).type == TYPE_LIST,
                      lambda n: defaults.get(n, ""), store_topic), E.NONE, None
    if rtype == BROKER_RESOURCE:
        if rname not in ("", str(gw.settings.node_id)):
            return None, E.INVALID_REQUEST, f"broker {rname!r} is not this node (id {gw.settings.node_id})"
        static = broker_configs(gw)

        def validate_broker(n: str, v: str | None) -> str | None:
            if n in static and static[n][1]:
                return f"cannot update {n!r} dynamically: it takes effect only when the node starts"
            ctype = DYNAMIC_BROKER_CONFIGS.get(n)
            if ctype is None:
                return f"unknown broker config {n!r}"
            why = validate_typed(n, v, ConfigDef(ctype))
            if why is None and n in BROKER_ENFORCED and int(v) < 1:
                why = f"invalid value {v!r} for {n!r}: must be at least 1"
            return why

        async def store_broker(new: dict[str, str]) -> None:
            try:
                await gw.dynamic_configs.replace_broker(rname, new)
            except NotStored as exc:
                raise _NotStored(f"the broker's configs could not be stored ({exc}); retry") from None

        return Target(gw.dynamic_configs.broker_overrides(rname), validate_broker,
                      lambda n: DYNAMIC_BROKER_CONFIGS.get(n) == TYPE_LIST,
                      lambda n: str(static.get(n, ("", False, 0))[0] or ""), store_broker), E.NONE, None
    if rtype == GROUP_RESOURCE:
        if not rname:
            return None, E.INVALID_REQUEST, "a group config resource needs a group id"
        configs = gw.group_configs

        async def store_group(new: dict[str, str]) -> None:
            res = await configs.replace(rname, new)
            if res is not None and not res.stored:
                raise _NotStored(f"the group's configs could not be stored ({res.status.name}); retry")

        return Target(configs.overrides(rname), configs.validate,
                      lambda n: GROUP_CONFIGS[n].type == TYPE_LIST if n in GROUP_CONFIGS else False,
                      configs.default, store_group), E.NONE, None
    return None, E.INVALID_REQUEST, f"resource type {rtype} is not supported"


class _NotStored(Exception):
    pass


def may_on_config(ctx: Any, op: Any) -> Callable[[int, str], bool]:
    """``may(resource_type, name)`` for ``op`` (DESCRIBE_CONFIGS / ALTER_CONFIGS) on a topic, a
    group or the broker (the cluster, as Kafka checks broker configs)."""
    from gateway_kafka import authz

    def may(rtype: int, name: str) -> bool:
        if rtype == TOPIC_RESOURCE:
            return authz.topic(ctx, op, name)
        if rtype == GROUP_RESOURCE:
            return authz.group(ctx, op, name)
        return authz.cluster(ctx, op)
    return may


def denied_code(rtype: int) -> int:
    return {TOPIC_RESOURCE: E.TOPIC_AUTHORIZATION_FAILED, GROUP_RESOURCE: E.GROUP_AUTHORIZATION_FAILED}.get(
        rtype, E.CLUSTER_AUTHORIZATION_FAILED)


async def alter_resources(gw: Any, body: dict, compute: Callable[[Target, dict], tuple[dict | None, str | None]],
                          may: Callable[[int, str], bool] | None = None) -> dict:
    """For each resource: ``compute(target, resource)`` -> (new overrides, None) or (None, why);
    ``why`` answers INVALID_CONFIG and changes nothing; ``validate_only`` stores nothing.
    ``may(resource_type, name)`` says whether the caller may ALTER_CONFIGS it
    (TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED otherwise)."""
    out = []
    for r in body.get("resources") or ():
        rtype, rname = r.get("resource_type", 0), r.get("resource_name", "")
        if may is not None and not may(rtype, rname):
            out.append({"error_code": denied_code(rtype), "error_message": "not allowed to ALTER_CONFIGS",
                        "resource_type": rtype, "resource_name": rname})
            continue
        target, code, msg = _target(gw, rtype, rname)
        if target is not None:
            new, why = compute(target, r)
            if not why and rtype == TOPIC_RESOURCE:
                was_tiered = str(target.current.get("remote.storage.enable", "false")).lower() == "true"
                why = check_tiering(gw, rname, new)
                if not why and was_tiered and str(new.get("remote.storage.enable", "false")).lower() != "true" \
                        and str(new.get("remote.log.delete.on.disable", "false")).lower() != "true":
                    why = ("remote.storage.enable=false on a tiered topic needs remote.log.delete.on.disable=true "
                           "(its remote data would be deleted)")
            if why:
                code, msg = E.INVALID_CONFIG, why
            elif not body.get("validate_only", False):
                try:
                    await target.store(new)
                except _NotStored as exc:
                    code, msg = E.COORDINATOR_NOT_AVAILABLE, str(exc)
        out.append({"error_code": code, "error_message": msg, "resource_type": rtype, "resource_name": rname})
    return {"throttle_time_ms": 0, "responses": out}
