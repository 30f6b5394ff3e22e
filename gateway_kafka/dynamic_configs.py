"""Dynamic broker configs: what operators change at run time with ``kafka-configs --entity-type
brokers`` (AlterConfigs / IncrementalAlterConfigs on the BROKER resource).

Owns the overrides per broker (resource name = node id) and cluster-wide (resource name ""),
each set a record of ``__consumer_offsets`` (``log_table.LogTable``, key version
``BROKER_CONFIG_KIND``), stored before the change is answered, replicated to slaves with the log
and replayed at start like the coordinators' state (``docs/design/coordinator-state.md``).
Record value (JSON): ``{"v": 1, "doc": {name: value}}``.

Older versions kept them in ``config/kafkaDynamicConfig.json`` (``{"version": 1, "brokers":
{"": {...}, "<node id>": {...}}}``): on a master's first start with such a file, every set not
yet in the log is written to it and the file renamed ``kafkaDynamicConfig.json.migrated``.

Broker configs take effect at once for the keys Rockafka enforces (``ENFORCED``): the gateway's
``message.max.bytes`` and ``min.insync.replicas``, the node's connection limits; every other key
Kafka allows to change at run time is stored and reported ("recorded only"). A per-broker value
wins over the cluster-wide one, which wins over the static setting (Kafka's order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import structlog

from gateway_kafka.log_table import LogTable, NotStored

log = structlog.get_logger("rockafka.kafka.dynamic_configs")

LEGACY_FILE_NAME = "kafkaDynamicConfig.json"
BROKER_CONFIG_KIND = 32100   # group-record key version (engine.consumer_offset.store_group_record)
CLUSTER_DEFAULT = ""         # the resource name of the cluster-wide default

# Kafka 4.4's broker configs that may change at run time (DescribeConfigs read_only=false), with
# their config type; those Rockafka enforces are in ENFORCED.
T_BOOLEAN, T_STRING, T_INT, T_SHORT, T_LONG, T_DOUBLE, T_LIST, T_CLASS, T_PASSWORD = 1, 2, 3, 4, 5, 6, 7, 8, 9
DYNAMIC_BROKER_CONFIGS: dict[str, int] = {
    "background.threads": T_INT, "compression.gzip.level": T_INT, "compression.lz4.level": T_INT,
    "compression.type": T_STRING, "compression.zstd.level": T_INT, "config.providers": T_LIST,
    "cordoned.log.dirs": T_LIST, "errors.deadletterqueue.auto.create.topics.enable": T_BOOLEAN,
    "errors.deadletterqueue.topic.name.prefix": T_STRING, "follower.fetch.last.tiered.offset.enable": T_BOOLEAN,
    "group.consumer.assignment.interval.ms": T_INT, "group.coordinator.cached.buffer.max.bytes": T_INT,
    "group.share.assignment.interval.ms": T_INT, "group.streams.assignment.interval.ms": T_INT,
    "listener.security.protocol.map": T_STRING, "listeners": T_LIST, "log.cleaner.backoff.ms": T_LONG,
    "log.cleaner.dedupe.buffer.size": T_LONG, "log.cleaner.delete.retention.ms": T_LONG,
    "log.cleaner.io.buffer.load.factor": T_DOUBLE, "log.cleaner.io.buffer.size": T_INT,
    "log.cleaner.io.max.bytes.per.second": T_DOUBLE, "log.cleaner.max.compaction.lag.ms": T_LONG,
    "log.cleaner.min.cleanable.ratio": T_DOUBLE, "log.cleaner.min.compaction.lag.ms": T_LONG,
    "log.cleaner.threads": T_INT, "log.cleanup.policy": T_LIST, "log.flush.interval.messages": T_LONG,
    "log.flush.interval.ms": T_LONG, "log.index.interval.bytes": T_INT, "log.index.size.max.bytes": T_INT,
    "log.local.retention.bytes": T_LONG, "log.local.retention.ms": T_LONG,
    "log.message.timestamp.after.max.ms": T_LONG, "log.message.timestamp.before.max.ms": T_LONG,
    "log.message.timestamp.type": T_STRING, "log.preallocate": T_BOOLEAN, "log.remote.copy.lag.bytes": T_LONG,
    "log.remote.copy.lag.ms": T_LONG, "log.retention.bytes": T_LONG, "log.retention.ms": T_LONG,
    "log.roll.jitter.ms": T_LONG, "log.roll.ms": T_LONG, "log.segment.bytes": T_INT,
    "log.segment.delete.delay.ms": T_LONG, "max.connection.creation.rate": T_INT, "max.connections": T_INT,
    "max.connections.per.ip": T_INT, "max.connections.per.ip.overrides": T_STRING,
    "max.decompressed.message.bytes": T_INT, "message.max.bytes": T_INT, "metric.reporters": T_LIST,
    "min.insync.replicas": T_INT, "num.io.threads": T_INT, "num.network.threads": T_INT,
    "num.recovery.threads.per.data.dir": T_INT, "num.replica.fetchers": T_INT, "principal.builder.class": T_CLASS,
    "producer.id.expiration.ms": T_INT, "remote.fetch.max.wait.ms": T_INT,
    "remote.list.offsets.request.timeout.ms": T_LONG, "remote.log.index.file.cache.total.size.bytes": T_LONG,
    "remote.log.manager.copier.thread.pool.size": T_INT, "remote.log.manager.copy.max.bytes.per.second": T_LONG,
    "remote.log.manager.expiration.thread.pool.size": T_INT, "remote.log.manager.fetch.max.bytes.per.second": T_LONG,
    "remote.log.manager.follower.thread.pool.size": T_INT, "remote.log.reader.threads": T_INT,
    "sasl.enabled.mechanisms": T_LIST, "sasl.jaas.config": T_PASSWORD, "sasl.kerberos.kinit.cmd": T_STRING,
    "sasl.kerberos.min.time.before.relogin": T_LONG, "sasl.kerberos.principal.to.local.rules": T_LIST,
    "sasl.kerberos.service.name": T_STRING, "sasl.kerberos.ticket.renew.jitter": T_DOUBLE,
    "sasl.kerberos.ticket.renew.window.factor": T_DOUBLE, "sasl.login.refresh.buffer.seconds": T_SHORT,
    "sasl.login.refresh.min.period.seconds": T_SHORT, "sasl.login.refresh.window.factor": T_DOUBLE,
    "sasl.login.refresh.window.jitter": T_DOUBLE, "sasl.mechanism.inter.broker.protocol": T_STRING,
    "share.coordinator.cached.buffer.max.bytes": T_INT, "ssl.cipher.suites": T_LIST, "ssl.client.auth": T_STRING,
    "ssl.enabled.protocols": T_LIST, "ssl.endpoint.identification.algorithm": T_STRING,
    "ssl.engine.factory.class": T_CLASS, "ssl.key.password": T_PASSWORD, "ssl.keymanager.algorithm": T_STRING,
    "ssl.keystore.certificate.chain": T_PASSWORD, "ssl.keystore.key": T_PASSWORD, "ssl.keystore.location": T_STRING,
    "ssl.keystore.password": T_PASSWORD, "ssl.keystore.type": T_STRING, "ssl.protocol": T_STRING,
    "ssl.provider": T_STRING, "ssl.secure.random.implementation": T_STRING, "ssl.trustmanager.algorithm": T_STRING,
    "ssl.truststore.certificates": T_PASSWORD, "ssl.truststore.location": T_STRING,
    "ssl.truststore.password": T_PASSWORD, "ssl.truststore.type": T_STRING,
    "transaction.partition.verification.enable": T_BOOLEAN, "unclean.leader.election.enable": T_BOOLEAN,
}
# keys the running node reads (``DynamicConfigs.apply``)
ENFORCED = {"message.max.bytes", "min.insync.replicas", "max.connections", "max.connections.per.ip"}


class DynamicConfigs:
    def __init__(self, store: Any, gateway: Any = None, put: Callable[..., Any] | None = None):
        self.store = store
        self.gateway = gateway
        self.table = LogTable(store, BROKER_CONFIG_KIND, put)
        self._static: dict[str, Any] = {}

    def restore(self) -> None:
        """At start and after a role change: the sets the log holds (migrating an old side file
        on a master), applied to the running node."""
        self.table.restore()
        if not getattr(self.store, "is_slave", False):
            self._migrate_legacy_file()
        self.apply()

    def _migrate_legacy_file(self) -> None:
        from engine.state_log import load_checkpoint

        config_dir = getattr(self.store, "config_dir", None)
        if config_dir is None:
            return
        path = Path(config_dir) / LEGACY_FILE_NAME
        if not (path.exists() or path.with_name(path.name + ".bak").exists()):
            return
        doc = load_checkpoint(path) or {}
        moved = []
        for name, configs in (doc.get("brokers") or {}).items():
            configs = {str(k): str(v) for k, v in (configs or {}).items()}
            if configs and str(name) not in self.table.table:
                try:
                    self.table.replace_now(str(name), configs)
                except NotStored as exc:
                    log.error("dynamic_configs_not_migrated", broker=name, error=str(exc))
                    return   # the file stays: the next start tries again
                moved.append(str(name) or "<default>")
        for candidate in (path, path.with_name(path.name + ".bak")):
            if candidate.exists():
                candidate.replace(candidate.with_name(candidate.name + ".migrated"))
        log.info("dynamic_configs_migrated", file=str(path), brokers=moved)

    # -- broker configs --------------------------------------------------------------------
    def broker_overrides(self, name: str) -> dict[str, str]:
        return self.table.get(name)

    def resolve(self, key: str, node_id: int) -> tuple[str | None, str | None]:
        """(value, where) of ``key`` for this broker: where = the resource name that set it
        (the node id, or CLUSTER_DEFAULT), (None, None) when neither does."""
        for name in (str(node_id), CLUSTER_DEFAULT):
            value = self.table.table.get(name, {}).get(key)
            if value is not None:
                return value, name
        return None, None

    def effective(self, key: str, node_id: int) -> str | None:
        return self.resolve(key, node_id)[0]

    async def replace_broker(self, name: str, configs: dict[str, str]) -> None:
        """Store the broker's (or the cluster default's) whole set, then apply it."""
        await self.table.replace(name, configs)
        log.info("broker_configs_altered", broker=name or "<default>", configs=sorted(configs))
        self.apply()

    def apply(self) -> None:
        """Push the enforced keys into the running gateway (static value when no override)."""
        gw = self.gateway
        if gw is None:
            return
        s, limits = gw.settings, gw.config.limits
        targets = {"message.max.bytes": (s, "message_max_bytes"), "min.insync.replicas": (s, "min_insync_replicas"),
                   "max.connections": (limits, "max_connections"),
                   "max.connections.per.ip": (limits, "max_connections_per_ip")}
        for key, (obj, attr) in targets.items():
            self._static.setdefault(key, getattr(obj, attr))
            raw = self.effective(key, s.node_id)
            try:
                setattr(obj, attr, int(raw) if raw is not None else self._static[key])
            except ValueError:
                setattr(obj, attr, self._static[key])
