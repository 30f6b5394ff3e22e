"""Typed configuration, in one place, with Apache RocketMQ's key names and defaults.

Every field is the snake_case form of a RocketMQ ``broker.conf`` key (``flushDiskType`` ->
``flush_disk_type``). ``load_node_config`` merges, lowest precedence first: the defaults below,
a ``broker.conf`` file (``key=value`` lines, ``#`` comments), environment variables
``ROCKAFKA_<KEY>`` (either spelling, upper-cased), then explicit overrides (CLI flags).

Defaults that differ from RocketMQ say why next to the field.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

GiB = 1024 * 1024 * 1024
MiB = 1024 * 1024

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"


class ConfigError(ValueError):
    """A configuration value a person must fix; the message names the key and the problem."""


@dataclass
class MessageStoreConfig:
    """RocketMQ's ``MessageStoreConfig`` (store keys)."""

    # Relative to the working directory, so `rockafka serve` keeps data in ./data
    # (RocketMQ defaults to ~/store).
    store_path_root_dir: str = "./data"
    mapped_file_size_commit_log: int = 1 * GiB
    mapped_file_size_consume_queue: int = 300_000 * 20
    flush_disk_type: str = "ASYNC_FLUSH"  # or SYNC_FLUSH
    flush_interval_commit_log: int = 500  # ms, ASYNC_FLUSH flush period
    flush_interval_consume_queue: int = 1000  # ms
    flush_commit_log_least_pages: int = 4
    sync_flush_timeout: int = 5000  # ms before FLUSH_DISK_TIMEOUT
    max_message_size: int = 4 * MiB
    max_topic_length: int = 249  # Kafka's limit; topics over 127 bytes use MAGICCODE V2 units (RocketMQ: 127)
    max_properties_length: int = 32767  # properties length is a short in the unit layout
    file_reserved_time: int = 72  # hours
    delete_when: str = "04"  # hours of day (`;`-separated) when expired files are deleted
    disk_max_used_space_ratio: int = 75  # percent; above it expired files go regardless
    clean_resource_interval: int = 10000  # ms between retention passes
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 5_000_000 * 4
    message_index_enable: bool = True
    broker_role: str = "ASYNC_MASTER"  # ASYNC_MASTER, SYNC_MASTER, SLAVE
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    timer_max_delay_sec: int = 3 * 86400  # RocketMQ 5: timer messages may be at most 3 days away
    timer_precision_ms: int = 1000  # timer wheel step
    # Act on the Kafka record headers rmq.delay.level / rmq.deliver.ms (Rockafka-only key); costs a
    # byte search per produced batch and a decompression per compressed batch.
    kafka_delay_headers_enable: bool = True
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    check_crc_on_recover: bool = True
    # Index the keys of Kafka records (valid UTF-8) so query_message finds them; costs a record
    # decode per batch in the dispatcher thread (Rockafka-only key).
    index_kafka_record_keys: bool = True
    disk_space_clean_forcibly_ratio: int = 85  # percent; above it even unexpired files go
    disk_space_warning_level_ratio: int = 90  # percent; above it puts are refused (disk full)
    flush_consumer_offset_interval: int = 5000  # ms between native consumer offset flushes to the log
    # Internal state topics (docs/design/coordinator-state.md); Kafka's key names and defaults.
    offsets_topic_num_partitions: int = 50  # __consumer_offsets partitions, fixed once created
    producer_id_expiration_ms: int = 86_400_000  # idle producers' sequence state is dropped
    # ms between snapshots of the producer state (Rockafka-only key): after a crash the
    # commitlog is scanned from the last one
    producer_state_snapshot_interval: int = 1000
    # ms between checkpoints of state kept in internal topics (Rockafka-only key); a checkpoint
    # only shortens the replay at start and lets retention delete older segments
    state_checkpoint_interval: int = 30_000
    # Reserve a segment's blocks when it is created (posix_fallocate) instead of sparse files.
    warm_mapped_file_enable: bool = False

    @property
    def store_path_commit_log(self) -> str:
        return str(Path(self.store_path_root_dir) / "commitlog")


@dataclass
class BrokerConfig:
    """RocketMQ's ``BrokerConfig`` (broker identity, routing, topic defaults)."""

    broker_cluster_name: str = "DefaultCluster"
    broker_name: str = "broker-a"
    broker_id: int = 0  # 0 = master
    namesrv_addr: str | None = None  # `;`-separated; `rockafka serve` uses its own NameServer
    broker_ip1: str | None = None  # address advertised to clients; defaults to the listen host
    listen_port: int = 10911
    ha_listen_port: int = 10912
    auto_create_topic_enable: bool = True
    auto_create_subscription_group: bool = True
    default_topic_queue_nums: int = 8  # TBW102's queue count, as in RocketMQ
    # Upper bound on a topic's queue (partition) count, for both protocols. RocketMQ and Kafka
    # set none; a bound keeps one request from creating millions of consume-queue files.
    max_topic_queue_nums: int = 100_000
    register_broker_timeout_mills: int = 6000
    register_name_server_period: int = 30000  # ms
    transaction_time_out: int = 6000  # ms
    transaction_check_max: int = 15
    transaction_check_interval: int = 60000  # ms
    max_reconsume_times: int = 16
    long_polling_enable: bool = True
    serialize_type: str = "JSON"  # reply serialization of remoting headers: JSON or ROCKETMQ


@dataclass
class NodeConfig:
    """An all-in-one node: the store, the broker identity and every listener."""

    host: str = "0.0.0.0"
    kafka_port: int = 9092
    namesrv_port: int = 9876
    admin_port: int = 8080
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    # Keys no dataclass above declares, for gateways' own settings (e.g. Kafka's
    # ``advertised_host``, ``num_partitions``); snake_case, values as strings.
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def data_dir(self) -> str:
        return self.store.store_path_root_dir

    @property
    def broker_port(self) -> int:
        return self.broker.listen_port

    @property
    def ha_port(self) -> int:
        return self.broker.ha_listen_port

    def extra_int(self, key: str, default: int) -> int:
        raw = self.extra.get(key)
        return default if raw is None else _convert(key, raw, int)

    def extra_str(self, key: str, default: str | None = None) -> str | None:
        return self.extra.get(key, default)

    def extra_bool(self, key: str, default: bool) -> bool:
        raw = self.extra.get(key)
        return default if raw is None else _convert(key, raw, bool)


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
# Node-level keys and their aliases (RocketMQ spells the broker port `listenPort`).
_NODE_KEYS = {"host", "kafka_port", "namesrv_port", "admin_port"}
_ALIASES = {
    "broker_port": "listen_port",
    "ha_port": "ha_listen_port",
    "data_dir": "store_path_root_dir",
    "store_path_rootdir": "store_path_root_dir",
    "store_path_root_dir": "store_path_root_dir",
}


def snake_case(key: str) -> str:
    """``flushDiskType`` -> ``flush_disk_type``; ``--data-dir`` -> ``data_dir``."""
    key = key.strip().lstrip("-").replace("-", "_")
    return _CAMEL.sub(r"_\1", key).lower()


def _convert(key: str, raw: Any, typ: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    text = raw.strip()
    try:
        if typ is bool or typ == "bool":
            low = text.lower()
            if low in ("true", "1", "yes", "on"):
                return True
            if low in ("false", "0", "no", "off"):
                return False
            raise ValueError(text)
        if typ is int or typ == "int":
            return int(text)
        if typ in ("str | None", "str"):
            return text
    except ValueError:
        raise ConfigError(f"config key {key!r}: {raw!r} is not a valid {typ}") from None
    return text


def _field_types(cls: type) -> dict[str, Any]:
    hints = {}
    for f in fields(cls):
        t = f.type
        if t in ("int", int):
            hints[f.name] = int
        elif t in ("bool", bool):
            hints[f.name] = bool
        else:
            hints[f.name] = "str"
    return hints


def read_broker_conf(path: str | os.PathLike[str]) -> dict[str, str]:
    """Parse a RocketMQ-style ``broker.conf`` (Java properties subset: ``k=v`` / ``k: v``)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}:{lineno}: expected key=value, got {line!r}")
        out[m.group(1)] = m.group(2).strip()
    return out


def apply(config: NodeConfig, values: Mapping[str, Any]) -> NodeConfig:
    """Apply ``values`` (any spelling of a key) onto ``config``; unknown keys go to ``extra``."""
    store_types = _field_types(MessageStoreConfig)
    broker_types = _field_types(BrokerConfig)
    for raw_key, raw in values.items():
        if raw is None:
            continue
        key = snake_case(raw_key)
        key = _ALIASES.get(key, key)
        if key in _NODE_KEYS:
            typ = str if key == "host" else int
            setattr(config, key, _convert(key, raw, typ) if typ is int else str(raw))
        elif key in store_types:
            setattr(config.store, key, _convert(key, raw, store_types[key]))
        elif key in broker_types:
            setattr(config.broker, key, _convert(key, raw, broker_types[key]))
        else:
            config.extra[key] = str(raw)
    validate(config)
    return config


def validate(config: NodeConfig) -> None:
    s = config.store
    if s.flush_disk_type not in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        raise ConfigError(f"flushDiskType must be ASYNC_FLUSH or SYNC_FLUSH, got {s.flush_disk_type!r}")
    if s.broker_role not in ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE"):
        raise ConfigError(f"brokerRole must be ASYNC_MASTER, SYNC_MASTER or SLAVE, got {s.broker_role!r}")
    if s.mapped_file_size_consume_queue % 20:
        raise ConfigError("mappedFileSizeConsumeQueue must be a multiple of the 20-byte unit")
    if s.max_message_size <= 0:
        raise ConfigError("maxMessageSize must be positive")
    for key in ("mapped_file_size_commit_log", "mapped_file_size_consume_queue", "max_hash_slot_num",
                "flush_interval_commit_log", "flush_interval_consume_queue", "sync_flush_timeout"):
        if getattr(s, key) <= 0:
            raise ConfigError(f"{key} must be positive, got {getattr(s, key)}")
    if s.max_index_num < 2:
        raise ConfigError(f"max_index_num must be at least 2 (entry 0 is unused), got {s.max_index_num}")
    for key in ("disk_max_used_space_ratio", "disk_space_clean_forcibly_ratio", "disk_space_warning_level_ratio"):
        if not 0 <= getattr(s, key) <= 100:
            raise ConfigError(f"{key} is a percentage 0..100, got {getattr(s, key)}")
    for hour in filter(None, (h.strip() for h in s.delete_when.split(";"))):
        if not hour.isdigit() or not 0 <= int(hour) <= 23:
            raise ConfigError(f"deleteWhen lists hours of the day 00..23 separated by ';', got {s.delete_when!r}")
    for name in ("kafka_port", "namesrv_port", "admin_port"):
        port = getattr(config, name)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name} must be 0..65535, got {port}")


ENV_PREFIX = "ROCKAFKA_"


def env_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k[len(ENV_PREFIX):]: v for k, v in environ.items() if k.startswith(ENV_PREFIX)}


def load_node_config(
    conf_file: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> NodeConfig:
    config = NodeConfig()
    if conf_file:
        apply(config, read_broker_conf(conf_file))
    apply(config, env_values(environ))
    if overrides:
        apply(config, overrides)
    return config


def replace_store(config: MessageStoreConfig, **changes: Any) -> MessageStoreConfig:
    return dataclasses.replace(config, **changes)
