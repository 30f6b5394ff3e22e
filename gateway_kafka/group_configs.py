"""Dynamic group configs (resource type GROUP, 32): DescribeConfigs / IncrementalAlterConfigs /
AlterConfigs on a group id, ``kafka-configs --entity-type groups``.

Owns the configs set per group. They are records of ``__consumer_offsets`` (``GroupConfigValue``
under key version ``GROUP_CONFIG_KIND`` in the group's partition, the whole set per record;
a tombstone when the last one is removed), stored before the change is answered, replayed at
start and carried to slaves with the log like every other piece of coordinator state
(``docs/design/coordinator-state.md``). A group that does not exist may have configs (Kafka
allows configuring a group before its first member joins); deleting the group (DeleteGroups)
deletes them with its other records.

The names are Kafka 4.4's ``GroupConfig``; each value is validated as Kafka does (type and
range, against the broker's bounds where Kafka checks them). Values a group does not set fall
back to the broker defaults (``group.consumer.*`` / ``group.share.*`` settings).

Invariants: all methods run on the event loop; ``get`` never blocks.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, NamedTuple

import structlog

from gateway_kafka.protocol import records

log = structlog.get_logger("rockafka.kafka.group_configs")

T_BOOLEAN, T_STRING, T_INT, T_LONG, T_LIST = 1, 2, 3, 5, 7   # DescribeConfigs ConfigType


class GroupConfigDef(NamedTuple):
    type: int
    setting: str          # the KafkaSettings attribute that holds the broker default
    doc: str
    enforced: bool = True


# Kafka 4.4's GroupConfig names (org.apache.kafka.coordinator.group.GroupConfig).
GROUP_CONFIGS: dict[str, GroupConfigDef] = {
    "consumer.session.timeout.ms": GroupConfigDef(T_INT, "consumer_session_timeout_ms",
                                                  "Session timeout of members of a consumer group."),
    "consumer.heartbeat.interval.ms": GroupConfigDef(T_INT, "consumer_heartbeat_interval_ms",
                                                     "Heartbeat interval given to members of a consumer group."),
    "consumer.assignment.interval.ms": GroupConfigDef(T_INT, "consumer_assignment_interval_ms",
                                                      "Recorded only: Rockafka computes a new target assignment at once.",
                                                      False),
    "share.session.timeout.ms": GroupConfigDef(T_INT, "share_session_timeout_ms",
                                               "Session timeout of members of a share group."),
    "share.heartbeat.interval.ms": GroupConfigDef(T_INT, "share_heartbeat_interval_ms",
                                                  "Heartbeat interval given to members of a share group."),
    "share.record.lock.duration.ms": GroupConfigDef(T_INT, "share_record_lock_duration_ms",
                                                    "Acquisition lock of a share group's records: the engine's "
                                                    "POP invisible time."),
    "share.delivery.count.limit": GroupConfigDef(T_INT, "share_delivery_count_limit",
                                                 "Deliveries of a record before it goes to the group's dead-letter "
                                                 "topic."),
    "share.record.redelivery.delay.level": GroupConfigDef(
        T_INT, "share_record_redelivery_delay_level",
        "Rockafka: the engine's delay level (messageDelayLevel, 1 = its first delay) a released or "
        "lock-expired record waits before it is delivered again; each later redelivery waits one level "
        "more, up to the last, as RocketMQ retries do. 0 (the default): at once, as Kafka."),
    "share.partition.max.record.locks": GroupConfigDef(T_INT, "share_partition_max_record_locks",
                                                       "Most records of one partition acquired at a time."),
    "share.auto.offset.reset": GroupConfigDef(T_STRING, "share_auto_offset_reset",
                                              "Where a share group starts on a partition: earliest, latest or "
                                              "by_duration:<ISO-8601 duration>."),
    "share.isolation.level": GroupConfigDef(T_STRING, "share_isolation_level",
                                            "read_committed delivers only committed transactional records."),
    "share.renew.acknowledge.enable": GroupConfigDef(T_BOOLEAN, "share_renew_acknowledge_enable",
                                                     "Whether RENEW acknowledgements are accepted."),
    "share.assignment.interval.ms": GroupConfigDef(T_INT, "share_assignment_interval_ms",
                                                   "Recorded only: Rockafka computes a new target assignment at once.",
                                                   False),
    "errors.deadletterqueue.topic.name": GroupConfigDef(
        T_STRING, "share_dlq_topic",
        "Dead-letter topic of a share group: rejected records and records out of deliveries go there. "
        "Unset, Rockafka uses the engine's %DLQ%<group> (listed and resent by `rockafka admin dlq`, the "
        "console and mqadmin)."),
    "errors.deadletterqueue.copy.record.enable": GroupConfigDef(
        T_BOOLEAN, "share_dlq_copy_record",
        "Recorded only: the record is always copied, so it can be resent from the dead-letter topic.", False),
    "streams.session.timeout.ms": GroupConfigDef(T_INT, "streams_session_timeout_ms",
                                                 "Recorded only: streams groups (KIP-1071) are not offered.", False),
    "streams.heartbeat.interval.ms": GroupConfigDef(T_INT, "streams_heartbeat_interval_ms",
                                                    "Recorded only: streams groups are not offered.", False),
    "streams.num.standby.replicas": GroupConfigDef(T_INT, "streams_num_standby_replicas",
                                                   "Recorded only: streams groups are not offered.", False),
    "streams.initial.rebalance.delay.ms": GroupConfigDef(T_INT, "streams_initial_rebalance_delay_ms",
                                                         "Recorded only: streams groups are not offered.", False),
    "streams.assignment.interval.ms": GroupConfigDef(T_INT, "streams_assignment_interval_ms",
                                                     "Recorded only: streams groups are not offered.", False),
    "streams.rack.aware.assignment.tags": GroupConfigDef(T_LIST, "streams_rack_aware_assignment_tags",
                                                         "Recorded only: streams groups are not offered.", False),
    "streams.assignor.name": GroupConfigDef(T_STRING, "streams_assignor_name",
                                            "Recorded only: streams groups are not offered.", False),
}


class GroupConfigs:
    def __init__(self, settings: Any, store: Any = None, put: Callable[..., Any] | None = None):
        self.settings = settings
        self.offsets = store.consumer_offsets if store is not None else None
        self._put = put
        self.table: dict[str, dict[str, str]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def restore(self) -> None:
        if self.offsets is None:
            return
        for group_id, value in self.offsets.group_records(records.GROUP_CONFIG_KIND).items():
            try:
                doc = records.decode("GroupConfigValue", value)
            except records.RecordDecodeError as exc:
                log.warning("group_configs_not_restored", group=group_id, error=str(exc))
                continue
            self.table[group_id] = {c["name"]: c["value"] for c in doc["configs"]}

    def default(self, name: str) -> str:
        v = getattr(self.settings, GROUP_CONFIGS[name].setting)
        return str(v).lower() if isinstance(v, bool) else str(v)

    def get(self, group_id: str, name: str) -> str:
        return self.table.get(group_id, {}).get(name) or self.default(name)

    def get_int(self, group_id: str, name: str) -> int:
        try:
            return int(self.get(group_id, name))
        except ValueError:
            return int(self.default(name))

    def overrides(self, group_id: str) -> dict[str, str]:
        return dict(self.table.get(group_id, {}))

    def validate(self, name: str, value: str | None) -> str | None:
        """Why ``value`` is not acceptable for ``name`` (Kafka's GroupConfig checks), or None."""
        d = GROUP_CONFIGS.get(name)
        if d is None:
            return f"unknown group config name {name!r}"
        if value is None:
            return f"group config {name!r} needs a value"
        s = self.settings
        if d.type in (T_INT, T_LONG):
            try:
                n = int(value)
            except ValueError:
                return f"invalid value {value!r} for {name!r}: expected an integer"
            bounds = {
                "consumer.session.timeout.ms": (s.consumer_min_session_timeout_ms, s.consumer_max_session_timeout_ms),
                "consumer.heartbeat.interval.ms": (s.consumer_min_heartbeat_interval_ms,
                                                   s.consumer_max_heartbeat_interval_ms),
                "share.session.timeout.ms": (s.share_min_session_timeout_ms, s.share_max_session_timeout_ms),
                "share.heartbeat.interval.ms": (s.share_min_heartbeat_interval_ms, s.share_max_heartbeat_interval_ms),
                "share.record.lock.duration.ms": (1000, 3_600_000),
                "share.delivery.count.limit": (2, 10),
                "share.partition.max.record.locks": (100, 10_000),
                "share.record.redelivery.delay.level": (0, s.delay_level_count),
            }.get(name, (0, 2**63 - 1))
            if not bounds[0] <= n <= bounds[1]:
                return f"invalid value {n} for {name!r}: must be between {bounds[0]} and {bounds[1]}"
        elif d.type == T_BOOLEAN and value.lower() not in ("true", "false"):
            return f"invalid value {value!r} for {name!r}: expected true or false"
        elif name == "share.auto.offset.reset":
            if value not in ("earliest", "latest") and not (value.startswith("by_duration:")
                                                            and parse_iso_duration_ms(value[12:]) is not None):
                return f"invalid value {value!r} for {name!r}: expected earliest, latest or by_duration:<PnDTnHnMn.nS>"
        elif name == "share.isolation.level" and value not in ("read_committed", "read_uncommitted"):
            return f"invalid value {value!r} for {name!r}: expected read_committed or read_uncommitted"
        elif name == "errors.deadletterqueue.topic.name" and value:
            from gateway_kafka.apis._common import topic_name_error
            if value.startswith("%DLQ%"):
                return None
            why = topic_name_error(value)
            if why:
                return f"invalid value for {name!r}: {why}"
        return None

    async def replace(self, group_id: str, configs: dict[str, str]) -> Any:
        """Store the group's whole config set (empty: a tombstone), then apply it."""
        lock = self._locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            value = None if not configs else records.encode("GroupConfigValue", {
                "configs": [{"name": k, "value": v} for k, v in sorted(configs.items())]})
            if self.offsets is not None and self._put is not None:
                res = await self._put(self.offsets.store_group_record, group_id, records.GROUP_CONFIG_KIND, value)
                if not res.stored:
                    return res
            else:
                res = None
            if configs:
                self.table[group_id] = dict(configs)
            else:
                self.table.pop(group_id, None)
            log.info("group_configs_altered", group=group_id, configs=sorted(configs))
            return res

    def forget(self, group_id: str) -> None:
        """The group was deleted (its tombstones include this kind)."""
        self.table.pop(group_id, None)


def parse_iso_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration ``PnDTnHnMn.nS`` (Java's Duration.parse), or None."""
    import re

    m = re.fullmatch(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?", text.strip().upper())
    if not m or text.strip().upper() in ("P", "PT"):
        return None
    d, h, mi, s = m.groups()
    return int(((int(d or 0) * 24 + int(h or 0)) * 60 + int(mi or 0)) * 60_000 + float(s or 0) * 1000)
