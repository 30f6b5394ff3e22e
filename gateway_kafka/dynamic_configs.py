"""Dynamic broker configs: what operators change at run time with ``kafka-configs --entity-type
brokers`` (AlterConfigs / IncrementalAlterConfigs on the BROKER resource).

Owns ``config/kafkaDynamicConfig.json`` (an engine ``ConfigManager`` file: atomic, with ``.bak``),
written before a change is answered. These are operator configuration like topics (see
coordinator-state.md, "Why RocketMQ's config files stay files"), not state a client relies on.
Document (format 1)::

    {"version": 1,
     "brokers": {"": {name: value}, "<node id>": {name: value}}}      # cluster default, per broker

Broker configs take effect at once for the keys Rockafka enforces (``ENFORCED``): the gateway's
``message.max.bytes`` and ``min.insync.replicas``, the node's connection limits; every other key
Kafka allows to change at run time is stored and reported ("recorded only").
"""

from __future__ import annotations

from typing import Any

import structlog

from engine.config_manager import ConfigManager

log = structlog.get_logger("rockafka.kafka.dynamic_configs")

FILE_NAME = "kafkaDynamicConfig.json"
FORMAT_VERSION = 1

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


class DynamicConfigs(ConfigManager):
    file_name = FILE_NAME

    def __init__(self, config_dir: Any, gateway: Any = None):
        super().__init__(config_dir)
        self.gateway = gateway
        self.brokers: dict[str, dict[str, str]] = {}
        self._static: dict[str, Any] = {}

    # -- ConfigManager ---------------------------------------------------------------------
    def encode(self) -> dict[str, Any]:
        return {"version": FORMAT_VERSION, "brokers": self.brokers}

    def decode(self, doc: dict[str, Any]) -> None:
        self.brokers = {str(k): {str(n): str(v) for n, v in (cfg or {}).items()}
                        for k, cfg in (doc.get("brokers") or {}).items()}

    # -- broker configs --------------------------------------------------------------------
    def broker_overrides(self, name: str) -> dict[str, str]:
        return dict(self.brokers.get(name, {}))

    def effective(self, key: str, node_id: int) -> str | None:
        """The dynamic value of ``key`` for this broker: per broker, else the cluster default."""
        per = self.brokers.get(str(node_id), {})
        if key in per:
            return per[key]
        return self.brokers.get("", {}).get(key)

    def replace_broker(self, name: str, configs: dict[str, str]) -> None:
        with self.lock:
            if configs:
                self.brokers[name] = dict(configs)
            else:
                self.brokers.pop(name, None)
            self.persist()
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
