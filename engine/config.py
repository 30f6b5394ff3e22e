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
    # RocketMQ's FlushConsumeQueueService: a queue's file is flushed once this many 4 KiB pages
    # are dirty (or it is full); every queue whatever it holds once per thorough interval, and
    # only then does the checkpoint's logics offset move (docs/design/storage.md)
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000  # ms
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
    # -- replication (docs/design/replication.md) --
    # A slave's master HA address (host:port); unset = learned from the NameServer, as RocketMQ's slaves do.
    ha_master_address: str | None = None
    ha_send_heartbeat_interval: int = 5000  # ms of silence before a heartbeat, both ways
    ha_housekeeping_interval: int = 20000  # ms: a connection silent this long is closed
    # Most bytes per data frame. RocketMQ: 32 KiB; larger frames cost Python less per byte.
    ha_transfer_batch_size: int = 256 * 1024
    ha_max_time_slave_not_catchup: int = 15000  # ms: a slave not caught up this long leaves the in-sync set
    # ms between metadata syncs to slaves (topics, offsets, delay/timer progress). RocketMQ's
    # SlaveSynchronize runs every 10 s; changed documents only are sent, so a short period is cheap.
    ha_sync_metadata_interval: int = 1000
    access_message_in_memory_max_ratio: int = 40  # % of RAM: a pull further behind is "slow" (slave suggested)
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
    clean_file_forcibly_enable: bool = True  # above the forcibly ratio, delete the oldest segments
    # Flow control: a put that waits for the commitlog lock longer than 2.5 times this is refused
    # (OS_PAGE_CACHE_BUSY, "[PC_SYNCHRONIZED]..."); RocketMQ refuses after one window of the
    # holder's, which on a machine short of CPU refused puts a longer wait stored (resources.md).
    os_page_cache_busy_time_out_mills: int = 1000
    flush_consumer_offset_interval: int = 5000  # ms between native consumer offset flushes to the log
    # Kafka's log.cleaner.backoff.ms: how often compacted topics are looked at by the cleaner
    # (engine/compaction.py, docs/design/compaction.md)
    log_cleaner_backoff_ms: int = 15_000
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
    # The remote tier (docs/design/tiered-storage.md): RocketMQ tiered-store names, then
    # Rockafka's own. "none": no object store, topics cannot set remote.storage.enable.
    tiered_backend_service_provider: str = "none"  # none | s3
    tiered_store_file_path: str = ""  # key prefix inside the bucket
    object_store_endpoint: str = ""
    object_store_region: str = "us-east-1"
    object_store_bucket: str = ""
    object_store_access_key: str = ""
    object_store_secret_key: str = ""
    tiered_store_file_reserved_time: int = 72  # hours a tiered topic without retention.ms keeps remotely; -1 forever
    tiered_store_group_commit_size: int = 64 * MiB  # largest remote segment
    tiered_store_upload_concurrency: int = 2
    tiered_store_upload_bandwidth: int = 0  # bytes/s over all uploads; 0 = unlimited
    tiered_store_read_cache_size: int = 256 * MiB
    tiered_store_op_timeout: int = 30_000  # ms, every object-store call
    tiered_store_upload_interval: int = 1000  # ms between upload passes (failures back off to 30 s)

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
    slave_read_enable: bool = False  # masters may redirect pulls of slow consumers to a slave
    broker_rack: str | None = None  # Kafka's broker.rack: follower fetching picks a replica in the client's rack
    # -- failover controller (docs/design/failover.md); RocketMQ 5's keys --
    enable_controller_mode: bool = False  # roles come from the controller quorum
    controller_addr: str | None = None  # `;`-separated controller addresses (NameServers with the controller)
    # In-sync rules of a SYNC_MASTER in controller mode (RocketMQ 5's keys and defaults;
    # docs/design/failover.md, "What each protocol promises"). A put is acknowledged when every
    # member of the controller-confirmed SyncStateSet has the bytes — the set shrinks (a member
    # fell behind or its connection closed) and regrows (it caught up) through the controller.
    # allAckInSyncStateSet=true also waits for a member whose HA connection has closed until the
    # controller confirmed its removal (no acknowledged message is lost even when that member is
    # elected later); false (RocketMQ's default) stops waiting for it at once and proposes its
    # removal: writes resume without the controller's round trip, and an acknowledgement made
    # in that round trip is on every member except the departed one -- lost if the master dies
    # before the controller confirmed the removal and elects the departed member. The default
    # here is therefore true: no acknowledged message is lost is the promise SYNC_MASTER makes.
    all_ack_in_sync_state_set: bool = True
    # Refuse a SYNC_MASTER put before storing it (RocketMQ's IN_SYNC_REPLICAS_NOT_ENOUGH, answered
    # SYSTEM_ERROR "in-sync replicas not enough") while the SyncStateSet, master included, has
    # fewer members than this — the promise Kafka's min.insync.replicas makes for acks=all.
    min_in_sync_replicas: int = 1
    # Without a controller: a SYNC_MASTER with no in-sync slave acknowledges on the master alone
    # while that is at least minInSyncReplicas copies (RocketMQ's automatic downgrade), instead of
    # SLAVE_NOT_AVAILABLE. In controller mode the SyncStateSet is that automatic adjustment.
    enable_auto_in_sync_replicas: bool = False
    sync_broker_metadata_period: int = 5000  # ms: re-read the group's replica info from the controller
    check_sync_state_set_period: int = 1000  # ms: a master proposes SyncStateSet changes (RocketMQ: 5000)
    broker_heartbeat_interval: int = 1000  # ms between heartbeats to the controller
    # ms without a heartbeat before the controller counts a broker dead. RocketMQ: 10000; shorter
    # so a master is replaced within 10 s.
    controller_heart_beat_timeout_mills: int = 6000
    # ms a master keeps acknowledging after the controller last confirmed it (Rockafka-only key);
    # must be shorter than controllerHeartBeatTimeoutMills (fencing, docs/design/failover.md).
    master_lease_mills: int = 4000
    # Flow control (RocketMQ's BrokerFastFailure): a send that waited in the send queue longer
    # than this is answered SYSTEM_BUSY "[TIMEOUT_CLEAN_QUEUE]..." without being stored.
    broker_fast_failure_enable: bool = True
    wait_time_mills_in_send_queue: int = 200
    send_message_thread_pool_nums: int = 4  # store writers for sends that may wait on disk


@dataclass
class ListenerLimits:
    """What one client can take from the node: connections, request sizes, time, memory.

    Kafka's broker keys and defaults where Kafka has one; ``connections.max.idle.ms`` also
    governs the admin listener, RocketMQ's ``serverChannelMaxIdleTimeSeconds`` the remoting
    ones. Connection counts are node-wide (all listeners share the process's descriptors).
    """

    max_connections: int = 2**31 - 1  # Kafka's default: no limit but the descriptors
    # Kafka's default is no limit; one address holding every connection the descriptors allow
    # starves everyone else, so Rockafka limits each address (and sheds the oldest idle
    # connections for newcomers when the node is full, broker/listener_limits.py).
    max_connections_per_ip: int = 1000
    connections_max_idle_ms: int = 600_000  # Kafka listener and admin HTTP
    server_channel_max_idle_time_seconds: int = 120  # remoting listeners (NameServer, broker)
    socket_request_max_bytes: int = 100 * MiB  # Kafka: a larger length prefix closes the connection
    frame_max_length: int = 16 * MiB  # remoting (RocketMQ's com.rocketmq.remoting.frameMaxLength)
    admin_request_max_bytes: int = 1 * MiB  # admin HTTP bodies (aiohttp's client_max_size)
    # Time a request may take to arrive once its length prefix has (neither Kafka nor RocketMQ
    # bound it; a client sending one byte a second would otherwise hold its buffer forever).
    request_receive_timeout_ms: int = 30_000
    # Memory held by requests read but not yet answered, all listeners together. Kafka's
    # queued.max.request.bytes defaults to -1 (unbounded); a bound keeps four 100 MiB
    # requests from taking 400 MiB at once: past it, listeners stop reading sockets. -1 = no
    # bound, as in Kafka.
    queued_max_request_bytes: int = 256 * MiB
    # Descriptors kept free for the store: a new connection is refused when accepting it left
    # fewer than this many below the open-files limit (a quarter of the limit at most).
    open_files_reserve: int = 1024


@dataclass
class SecurityConfig:
    """Authentication and authorization for every listener (docs/design/security.md).

    RocketMQ 5's key names where RocketMQ has one, Kafka's (dots become underscores) where
    only Kafka has one. Everything is off by default, as in both: a node that listens beyond
    loopback without authentication says so loudly at start."""

    authentication_enabled: bool = False  # RocketMQ 5: every remoting request signed, REGISTER_BROKER and HA authenticated
    authorization_enabled: bool = False  # RocketMQ 5 / Kafka's authorizer: deny unless an ACL allows
    super_users: str = ""  # Kafka's super.users: "User:admin;User:broker"
    # RocketMQ 5: {"username":"admin","password":"..."} or admin:password; created once when no
    # credential exists (salted SCRAM + remoting secret, in the log), then the line can go
    init_authentication_user: str | None = None
    # RocketMQ 5: {"accessKey":"...","secretKey":"..."} or ak:sk this node signs with towards
    # other nodes (REGISTER_BROKER, the HA handshake)
    inner_client_authentication_credentials: str | None = None
    connection_failed_authentication_delay_ms: int = 100  # Kafka's key and default
    # Throttled guessing (engine/security/throttle.py), across connections and listeners: failed
    # credential checks a second per user name and per source address (0 = no limit); past
    # the rate, a credential is refused unchecked (Kafka SASL_AUTHENTICATION_FAILED, remoting
    # NO_PERMISSION, gRPC TOO_MANY_REQUESTS, HTTP 429) until a check is due again
    authentication_failure_rate_per_user: float = 5.0
    authentication_failure_rate_per_source: float = 20.0
    # that many failures of one user within the window lock the user for the window (addresses
    # are only rate-limited); an address without a failure in the window is not held by it
    authentication_lockout_threshold: int = 50
    authentication_lockout_window_ms: int = 60_000
    # Key sealing the remoting/gRPC secrets in rmq_sys_SECURITY (AES-256-GCM); empty = the file
    # rockafka-auth.key in the data directory's parent, created 0600 on first use. The variable
    # ROCKAFKA_AUTH_SECRET_KEY (base64 of 32 bytes) wins over the file. Every broker of a group
    # needs the same key (slaves open what the master sealed).
    auth_secret_key_path: str = ""
    connections_max_reauth_ms: int = 0  # Kafka's KIP-368 key: 0 = sessions never expire
    ssl_principal_mapping_rules: str = "DEFAULT"  # Kafka's key: client certificate DN -> principal
    tls_enable: bool = False  # RocketMQ's tls.enable: this node's own connections to other nodes use TLS
    # Admin HTTP binds loopback unless told otherwise (the node's host for every other listener)
    admin_host: str = "127.0.0.1"
    admin_tls_enable: bool = False  # admin HTTP over HTTPS with the node's certificate


@dataclass
class NodeConfig:
    """An all-in-one node: the store, the broker identity and every listener."""

    host: str = "0.0.0.0"
    kafka_port: int = 9092
    namesrv_port: int = 9876
    admin_port: int = 8080
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    broker: BrokerConfig = field(default_factory=BrokerConfig)
    limits: ListenerLimits = field(default_factory=ListenerLimits)
    security: SecurityConfig = field(default_factory=SecurityConfig)
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


# What each typed key does and its unit, for ``rockafka config list`` (one line each; gateway
# keys carry theirs in ``EXTRA_KEYS`` and get a unit from ``_EXTRA_UNITS`` or their name).
FIELD_DOCS: dict[str, tuple[str, str]] = {
    # store
    "store_path_root_dir": ("path", "store root: commitlog, consume queues, index, config"),
    "mapped_file_size_commit_log": ("bytes", "size of one commitlog segment file"),
    "mapped_file_size_consume_queue": ("bytes", "size of one consume-queue file (a multiple of 20)"),
    "flush_disk_type": ("enum", "ASYNC_FLUSH (flush every interval) or SYNC_FLUSH (a put waits)"),
    "flush_interval_commit_log": ("ms", "ASYNC_FLUSH: time between commitlog flushes"),
    "flush_interval_consume_queue": ("ms", "time between consume-queue flushes"),
    "flush_consume_queue_least_pages": ("pages", "dirty 4 KiB pages of a consume queue before a flush (0: every pass)"),
    "flush_consume_queue_thorough_interval": ("ms", "time between flushes of every consume queue (checkpoint)"),
    "flush_commit_log_least_pages": ("pages", "ASYNC_FLUSH: dirty 4 KiB pages before a flush"),
    "sync_flush_timeout": ("ms", "SYNC_FLUSH: wait before FLUSH_DISK_TIMEOUT"),
    "max_message_size": ("bytes", "largest message body (or Kafka batch) accepted"),
    "max_topic_length": ("chars", "longest topic name on every protocol"),
    "max_properties_length": ("bytes", "largest encoded message properties"),
    "file_reserved_time": ("hours", "age after which commitlog segments may be deleted"),
    "tiered_backend_service_provider": ("enum", "remote tier: none, or s3 (an S3-compatible object store)"),
    "tiered_store_file_path": ("text", "remote tier: key prefix inside the bucket"),
    "object_store_endpoint": ("url", "remote tier: the S3 endpoint, e.g. http://127.0.0.1:8333"),
    "object_store_region": ("text", "remote tier: the S3 region"),
    "object_store_bucket": ("text", "remote tier: the bucket (it must exist)"),
    "object_store_access_key": ("text", "remote tier: the S3 access key id"),
    "object_store_secret_key": ("secret", "remote tier: the S3 secret key (never shown)"),
    "tiered_store_file_reserved_time": ("hours", "remote tier: how long a tiered topic without retention.ms keeps records; -1 forever"),
    "tiered_store_group_commit_size": ("bytes", "remote tier: largest remote segment"),
    "tiered_store_upload_concurrency": ("uploads", "remote tier: uploads at once"),
    "tiered_store_upload_bandwidth": ("bytes/s", "remote tier: upload bandwidth over all uploads; 0 unlimited"),
    "tiered_store_read_cache_size": ("bytes", "remote tier: local cache of remote reads"),
    "tiered_store_op_timeout": ("ms", "remote tier: deadline of every object-store call"),
    "tiered_store_upload_interval": ("ms", "remote tier: time between upload passes"),
    "delete_when": ("hours", "hours of day (`;`-separated) when expired files are deleted"),
    "disk_max_used_space_ratio": ("percent", "disk use above which expired files go at any hour"),
    "clean_resource_interval": ("ms", "time between retention passes"),
    "max_hash_slot_num": ("count", "hash slots per index file"),
    "max_index_num": ("count", "entries per index file"),
    "message_index_enable": ("bool", "build the key / message id index"),
    "broker_role": ("enum", "ASYNC_MASTER, SYNC_MASTER or SLAVE"),
    "ha_master_address": ("host:port", "a slave's master HA address (default: from the NameServer)"),
    "ha_send_heartbeat_interval": ("ms", "silence on an HA connection before a heartbeat"),
    "ha_housekeeping_interval": ("ms", "an HA connection silent this long is closed"),
    "ha_transfer_batch_size": ("bytes", "most commitlog bytes per HA transfer"),
    "ha_max_time_slave_not_catchup": ("ms", "a slave behind this long leaves the in-sync set"),
    "ha_sync_metadata_interval": ("ms", "time between a slave's metadata syncs from its master"),
    "access_message_in_memory_max_ratio": ("percent", "share of RAM: a pull further behind is slow"),
    "message_delay_level": ("durations", "the 18 delay levels, space separated (1s 5s ... 2h)"),
    "timer_max_delay_sec": ("s", "farthest delivery time of a timer message"),
    "timer_precision_ms": ("ms", "timer wheel step"),
    "kafka_delay_headers_enable": ("bool", "Kafka records' rmq.delay headers schedule delivery"),
    "max_transfer_bytes_on_message_in_memory": ("bytes", "most bytes one pull returns"),
    "max_transfer_count_on_message_in_memory": ("count", "most messages one pull returns"),
    "check_crc_on_recover": ("bool", "verify body CRCs while recovering the commitlog"),
    "index_kafka_record_keys": ("bool", "index Kafka record keys (query by key)"),
    "disk_space_clean_forcibly_ratio": ("percent", "disk use above which unexpired files go too"),
    "disk_space_warning_level_ratio": ("percent", "disk use above which puts are refused"),
    "clean_file_forcibly_enable": ("bool", "above the forcibly ratio, delete the oldest segments"),
    "os_page_cache_busy_time_out_mills": ("ms", "busy window of the put lock (waited 2.5 times)"),
    "flush_consumer_offset_interval": ("ms", "time between consumer offset flushes"),
    "log_cleaner_backoff_ms": ("ms", "time between looks of the cleaner at compacted topics"),
    "offsets_topic_num_partitions": ("count", "__consumer_offsets partitions, fixed once created"),
    "producer_id_expiration_ms": ("ms", "idle producers' sequence state is dropped after this"),
    "producer_state_snapshot_interval": ("ms", "time between idempotent producer state snapshots"),
    "state_checkpoint_interval": ("ms", "time between coordinator state checkpoints"),
    "warm_mapped_file_enable": ("bool", "touch every page of a new segment before use"),
    # broker
    "broker_cluster_name": ("name", "cluster this broker registers in"),
    "broker_name": ("name", "broker group name (master and slaves share it)"),
    "broker_id": ("id", "0 = master, above 0 = slave"),
    "namesrv_addr": ("host:port", "NameServers to register with, `;`-separated"),
    "broker_ip1": ("host", "address advertised to clients (default: the listen host)"),
    "listen_port": ("port", "RocketMQ remoting broker port"),
    "ha_listen_port": ("port", "HA replication port"),
    "auto_create_topic_enable": ("bool", "create unknown topics on first send"),
    "auto_create_subscription_group": ("bool", "create unknown consumer groups on first use"),
    "default_topic_queue_nums": ("count", "queues of an auto-created topic (TBW102)"),
    "max_topic_queue_nums": ("count", "most queues a topic may have"),
    "register_broker_timeout_mills": ("ms", "timeout of one registration with a NameServer"),
    "register_name_server_period": ("ms", "time between registrations with the NameServers"),
    "transaction_time_out": ("ms", "age of a half message before its first check-back"),
    "transaction_check_max": ("count", "check-backs before a half message is rolled back"),
    "transaction_check_interval": ("ms", "time between transaction check passes"),
    "max_reconsume_times": ("count", "deliveries before a message goes to the DLQ"),
    "long_polling_enable": ("bool", "hold pulls until a message arrives"),
    "serialize_type": ("enum", "remoting header serialization of replies: JSON or ROCKETMQ"),
    "slave_read_enable": ("bool", "masters redirect slow consumers' pulls to a slave"),
    "broker_rack": ("name", "Kafka broker.rack for follower fetching"),
    "enable_controller_mode": ("bool", "roles come from the controller quorum"),
    "controller_addr": ("host:port", "controller addresses, `;`-separated"),
    "all_ack_in_sync_state_set": ("bool", "SYNC_MASTER: every in-sync replica acknowledges"),
    "min_in_sync_replicas": ("count", "SYNC_MASTER refuses a put below this many in-sync copies"),
    "enable_auto_in_sync_replicas": ("bool", "no controller: ack on the master alone when allowed"),
    "sync_broker_metadata_period": ("ms", "time between re-reads of the group's replica info"),
    "check_sync_state_set_period": ("ms", "time between a master's SyncStateSet checks"),
    "broker_heartbeat_interval": ("ms", "time between heartbeats to the controller"),
    "controller_heart_beat_timeout_mills": ("ms", "a broker silent this long is dead to the controller"),
    "master_lease_mills": ("ms", "a master without a controller lease this long steps down"),
    "broker_fast_failure_enable": ("bool", "refuse sends that waited too long in the send queue"),
    "wait_time_mills_in_send_queue": ("ms", "longest wait in the send queue before SYSTEM_BUSY"),
    "send_message_thread_pool_nums": ("threads", "store writers for sends that may wait on disk"),
    # listener limits
    "max_connections": ("count", "connections the node accepts in all"),
    "max_connections_per_ip": ("count", "connections the node accepts from one address"),
    "connections_max_idle_ms": ("ms", "Kafka and admin HTTP connections idle this long close"),
    "server_channel_max_idle_time_seconds": ("s", "remoting connections idle this long close"),
    "socket_request_max_bytes": ("bytes", "largest Kafka request"),
    "frame_max_length": ("bytes", "largest remoting frame"),
    "admin_request_max_bytes": ("bytes", "largest admin HTTP request body"),
    "request_receive_timeout_ms": ("ms", "time a request may take to arrive after its length"),
    "queued_max_request_bytes": ("bytes", "request bytes held at once before reading pauses"),
    "open_files_reserve": ("count", "descriptors kept free for the store"),
    # security
    "authentication_enabled": ("bool", "every client authenticates (SASL, signed requests)"),
    "authorization_enabled": ("bool", "deny unless an ACL allows"),
    "super_users": ("list", "principals allowed everything, `;`-separated (User:admin)"),
    "init_authentication_user": ("json", "first admin user created at start ({username, password})"),
    "inner_client_authentication_credentials": ("json", "credentials of this node's own clients"),
    "connection_failed_authentication_delay_ms": ("ms", "delay before closing after a failed login"),
    "authentication_failure_rate_per_user": ("per second", "failed credential checks a second per user, "
                                             "across connections; past it credentials are refused unchecked"),
    "authentication_failure_rate_per_source": ("per second", "failed credential checks a second per client address"),
    "authentication_lockout_threshold": ("count", "failures of one user within the lockout window that lock it"),
    "authentication_lockout_window_ms": ("ms", "how long a user stays locked (and the window failures count in)"),
    "auth_secret_key_path": ("path", "key file sealing remoting secrets in the log (default: rockafka-auth.key "
                                     "beside the data dir)"),
    "connections_max_reauth_ms": ("ms", "Kafka session lifetime before re-authentication (0 = none)"),
    "ssl_principal_mapping_rules": ("rules", "Kafka's rules from certificate DN to principal"),
    "tls_enable": ("bool", "this node's own connections to other nodes use TLS"),
    "admin_host": ("host", "admin HTTP listen address"),
    "admin_tls_enable": ("bool", "admin HTTP over HTTPS"),
    # node
    "host": ("host", "listen address of every listener"),
    "kafka_port": ("port", "Kafka protocol port"),
    "namesrv_port": ("port", "NameServer port"),
    "admin_port": ("port", "admin HTTP and console port"),
}

# Units of gateway keys whose name does not say it (``*_ms`` = ms, ``*_enable`` = bool, ...).
_EXTRA_UNITS: dict[str, str] = {
    "broker_channel_expired_time": "ms", "channel_expired_timeout": "ms", "namesrv_scan_interval": "ms",
    "rebalance_lock_max_live_time": "ms", "group_consumer_max_size": "count", "group_max_size": "count",
    "group_share_max_size": "count", "kafka_cluster_id": "name", "advertised_listeners": "list",
    "listeners": "list", "listener_security_protocol_map": "list", "group_coordinator_rebalance_protocols": "list",
    "sasl_enabled_mechanisms": "list", "sasl_plain_users": "list", "default_message_request_mode": "enum",
    "ssl_client_auth": "enum", "tls_mode": "enum", "tls_server_mode": "enum", "tls_server_need_client_auth": "enum",
    "producer_id_space": "count", "kafka_direct_put": "bool", "ssl_truststore_location": "path",
    "group_share_record_redelivery_delay_level": "level",
}


def unit_of(key: str, default: str = "") -> str:
    """The unit of ``key`` (snake_case) for ``config list``."""
    if key in FIELD_DOCS:
        return FIELD_DOCS[key][0]
    if key in _EXTRA_UNITS:
        return _EXTRA_UNITS[key]
    k = key.lower()
    for suffixes, unit in ((("_ms", "_mills", "_millis", "_timeout_ms"), "ms"), (("_sec", "_seconds", "_s"), "s"),
                           (("_bytes", "_size", "_bytes_max"), "bytes"), (("_port",), "port"),
                           (("_enable", "_enabled"), "bool"), (("_ratio",), "ratio"), (("_path", "_file", "_dir"), "path"),
                           (("_host",), "host"), (("_id",), "id"), (("_count", "_nums", "_num", "_max", "_partitions",
                                                                     "_records", "_members", "_size_max"), "count")):
        if k.endswith(suffixes):
            return unit
    if default.lower() in ("true", "false"):
        return "bool"
    if default.lstrip("-").isdigit():
        return "count"
    return "text"


# Keys no dataclass above declares, read by the gateways with ``NodeConfig.extra_*``: name ->
# (default as documented, what it does). A key here and nowhere else is accepted; a key in
# neither place is refused at start-up (tests/engine/test_config_keys.py keeps this list and the
# ``extra_*`` readers in step).
EXTRA_KEYS: dict[str, tuple[str, str]] = {
    # Kafka gateway (docs/design/kafka-gateway.md)
    "advertised_host": ("host name or brokerIP1", "host Kafka clients are told to connect to"),
    "advertised_port": ("the Kafka port", "port Kafka clients are told to connect to"),
    "kafka_node_id": ("brokerId", "Kafka node id in Metadata"),
    "kafka_cluster_id": ("brokerClusterName", "Kafka cluster id"),
    "num_partitions": ("1", "partitions of an auto-created Kafka topic"),
    "auto_create_topics_enable": ("autoCreateTopicEnable", "create unknown topics on Metadata/Produce"),
    "group_min_session_timeout_ms": ("6000", "smallest session.timeout.ms a member may ask for"),
    "group_max_session_timeout_ms": ("1800000", "largest session.timeout.ms a member may ask for"),
    "group_initial_rebalance_delay_ms": ("100", "wait for more members before the first rebalance"),
    "group_max_size": ("1000", "members per Kafka group"),
    "offset_metadata_max_bytes": ("4096", "metadata size of a committed offset"),
    # KIP-848 consumer groups and KIP-932 share groups (docs/design/consumer-groups.md, share-groups.md)
    "group_coordinator_rebalance_protocols": ("classic,consumer,streams",
                                              "group protocols on offer; without streams no KIP-1071 APIs"),
    "group_consumer_session_timeout_ms": ("45000", "consumer group session timeout (group config overrides)"),
    "group_consumer_min_session_timeout_ms": ("45000", "smallest consumer.session.timeout.ms of a group"),
    "group_consumer_max_session_timeout_ms": ("60000", "largest consumer.session.timeout.ms of a group"),
    "group_consumer_heartbeat_interval_ms": ("5000", "heartbeat interval of consumer group members"),
    "group_consumer_min_heartbeat_interval_ms": ("5000", "smallest consumer.heartbeat.interval.ms of a group"),
    "group_consumer_max_heartbeat_interval_ms": ("15000", "largest consumer.heartbeat.interval.ms of a group"),
    "group_consumer_max_size": ("2147483647", "members per consumer group"),
    "group_consumer_assignment_interval_ms": ("1000", "recorded only: targets are computed at once"),
    "group_share_session_timeout_ms": ("45000", "share group session timeout (group config overrides)"),
    "group_share_min_session_timeout_ms": ("45000", "smallest share.session.timeout.ms of a group"),
    "group_share_max_session_timeout_ms": ("60000", "largest share.session.timeout.ms of a group"),
    "group_share_heartbeat_interval_ms": ("5000", "heartbeat interval of share group members"),
    "group_share_min_heartbeat_interval_ms": ("5000", "smallest share.heartbeat.interval.ms of a group"),
    "group_share_max_heartbeat_interval_ms": ("15000", "largest share.heartbeat.interval.ms of a group"),
    "group_share_max_size": ("200", "members per share group"),
    "group_share_record_lock_duration_ms": ("30000", "acquisition lock of share group records (POP invisible time)"),
    "group_share_delivery_count_limit": ("5", "deliveries of a share group record before its dead-letter topic"),
    "group_share_partition_max_record_locks": ("2000", "records of a partition acquired at a time by a share group"),
    "group_share_record_redelivery_delay_level": ("0", "delay level before a share group record is redelivered "
                                                  "(0: at once)"),
    "group_share_assignment_interval_ms": ("1000", "recorded only: targets are computed at once"),
    "max_incremental_fetch_session_cache_slots": ("1000", "Kafka fetch sessions (KIP-227) the node keeps"),
    "min_incremental_fetch_session_eviction_ms": ("120000", "idle time before a fetch session may be evicted"),
    "message_max_bytes": ("maxMessageSize", "largest Kafka record batch"),
    "list_offsets_time_skew_ms": ("600000", "tolerated clock skew of ListOffsets by timestamp"),
    "delete_topic_enable": ("true", "allow DeleteTopics"),
    "min_insync_replicas": ("1", "min.insync.replicas for acks=all when the topic sets none"),
    "sasl_enabled_mechanisms": ("", "SASL mechanisms: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    "sasl_plain_users": ("", "user:password pairs for SASL PLAIN in clear text (prefer stored SCRAM credentials)"),
    "listeners": ("PLAINTEXT://host:kafka_port", "Kafka listeners NAME://host:port, comma separated"),
    "advertised_listeners": ("listeners", "Kafka addresses clients are told, per listener name"),
    "listener_security_protocol_map": ("standard names", "Kafka listener NAME:PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL"),
    "kafka_direct_put": ("true under ASYNC_FLUSH", "store produced batches on the event loop"),
    "kafka_fetch_sendfile": ("true", "Fetch on a plain TCP listener sends stored batches from the segment files (sendfile)"),
    "transaction_state_log_num_partitions": ("50", "__transaction_state partitions, fixed once created"),
    "transactional_id_expiration_ms": ("604800000", "forget a transactional id idle this long"),
    "producer_id_space": ("kafka_node_id // 100", "this broker group's share of Kafka producer ids (space << 40)"),
    "transaction_max_timeout_ms": ("900000", "largest transaction.timeout.ms"),
    "transaction_abort_timed_out_transaction_cleanup_interval_ms": ("1000", "timed-out transaction scan period"),
    # native gateway and NameServer (docs/design/native-gateway.md)
    "broker_channel_expired_time": ("120000", "NameServer drops a broker silent this long (ms)"),
    "namesrv_scan_interval": ("5000", "NameServer broker expiry scan period (ms)"),
    "channel_expired_timeout": ("120000", "broker drops a client silent this long (ms)"),
    "short_polling_time_mills": ("1000", "pull hold without long polling (ms)"),
    "rebalance_lock_max_live_time": ("60000", "ordered consumption queue lock lifetime (ms)"),
    "slave_read_enable": ("false", "let consumers read from slaves"),
    # broker groups (docs/design/replication.md)
    "cluster_view_refresh_ms": ("1000", "how often the Kafka cluster view is rebuilt from the NameServer"),
    # RocketMQ 5 gRPC proxy front (docs/design/grpc-proxy.md)
    "grpc_proxy_port": ("8081", "port of the gRPC MessagingService (RocketMQ 5 clients)"),
    "grpc_server_port": ("8081", "RocketMQ proxy's name for grpc_proxy_port"),
    "grpc_client_idle_time_mills": ("120000", "gRPC port: close a connection silent both ways this long (ms, 0 = never)"),
    "tls_server_mode": ("permissive", "gRPC port: permissive (TLS and plaintext), enforcing, disabled"),
    "tls_mode": ("permissive", "RocketMQ's older name for tls_server_mode"),
    "tls_server_cert_path": ("<data dir>/tls, generated", "certificate (PEM) of the gRPC port"),
    "tls_cert_path": ("", "older name for tls_server_cert_path"),
    "tls_server_key_path": ("<data dir>/tls, generated", "private key (PEM) of the gRPC port"),
    "tls_key_path": ("", "older name for tls_server_key_path"),
    "tls_server_trust_cert_path": ("", "CA certificates (PEM) that sign accepted client certificates"),
    "tls_server_need_client_auth": ("none", "client certificates: none, optional or require (Kafka ssl.client.auth)"),
    "tls_client_trust_cert_path": ("tlsServerTrustCertPath", "CAs this node trusts when it connects to other nodes"),
    "ssl_client_auth": ("none", "Kafka's name for tls_server_need_client_auth (requested, required)"),
    "ssl_truststore_location": ("", "Kafka's name for tls_server_trust_cert_path (a PEM file)"),
    "default_invisible_time_mills": ("60000", "invisible time of a push consumer's receive (auto renew)"),
    "renew_slice_time_millis": ("60000", "invisible time added by each automatic renewal"),
    "renew_ahead_time_millis": ("10000", "renew this long before the invisible time ends"),
    "renew_max_time_millis": ("10800000", "stop renewing a message after this long"),
    "recall_message_enable": ("true", "allow RecallMessage (cancel a delayed message)"),
    "default_message_request_mode": ("PULL", "a group's mode until setConsumeMode: PULL or POP"),
    "trace_topic_enable": ("true", "create RMQ_SYS_TRACE_TOPIC for message trace"),
    "broker_trace_enable": ("false", "write trace records (RMQ_SYS_TRACE_TOPIC) for Kafka- and gRPC-produced messages"),
    # admin listener
    "console_sample_interval_ms": ("10000", "console charts: one throughput and lag sample this often"),
}

_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
# Node-level keys and their aliases (RocketMQ spells the broker port `listenPort`).
_NODE_KEYS = {"host", "kafka_port", "namesrv_port", "admin_port"}
_ALIASES = {
    "broker_port": "listen_port",
    "ha_port": "ha_listen_port",
    "data_dir": "store_path_root_dir",
    "store_path_rootdir": "store_path_root_dir",
    "store_path_root_dir": "store_path_root_dir",
    "broker.rack": "broker_rack",
    "min.insync.replicas": "min_insync_replicas",  # Kafka's broker key (a Kafka gateway setting)
    "super.users": "super_users",
}


def snake_case(key: str) -> str:
    """``flushDiskType`` -> ``flush_disk_type``; ``--data-dir`` -> ``data_dir``; Kafka's
    ``max.connections.per.ip`` -> ``max_connections_per_ip``."""
    key = key.strip().lstrip("-").replace("-", "_").replace(".", "_")
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


def known_keys() -> dict[str, str]:
    """Every accepted key (snake_case) -> where it lives: ``node``, ``store``, ``broker``,
    ``limits``, ``extra``."""
    keys = {k: "node" for k in _NODE_KEYS}
    keys.update({f.name: "store" for f in fields(MessageStoreConfig)})
    keys.update({f.name: "broker" for f in fields(BrokerConfig)})
    keys.update({f.name: "limits" for f in fields(ListenerLimits)})
    keys.update({f.name: "security" for f in fields(SecurityConfig)})
    keys.update({k: "extra" for k in EXTRA_KEYS})
    return keys


def _squash(key: str) -> str:
    return key.replace("_", "").lower()


def resolve_key(raw_key: str) -> str:
    """The snake_case key ``raw_key`` names, in any spelling (``flushDiskType``,
    ``flush_disk_type``, ``FLUSHDISKTYPE``); ConfigError with a did-you-mean when none."""
    key = snake_case(raw_key)
    key = _ALIASES.get(key, key)
    known = known_keys()
    if key in known:
        return key
    by_squashed = {_squash(k): k for k in known} | {_squash(a): t for a, t in _ALIASES.items()}
    hit = by_squashed.get(_squash(key))
    if hit is not None:
        return hit
    import difflib

    close = difflib.get_close_matches(_squash(key), list(by_squashed), n=3, cutoff=0.75)
    hint = f"; did you mean {' or '.join(camel_case(by_squashed[c]) for c in close)}?" if close else ""
    raise ConfigError(f"unknown config key {raw_key!r}{hint} (`rockafka config list` shows every key)")


def camel_case(key: str) -> str:
    """``flush_disk_type`` -> ``flushDiskType`` (RocketMQ's spelling); gateway keys keep the
    snake_case their documentation uses (``advertised_host``)."""
    if key in EXTRA_KEYS:
        return key
    if key == "broker_ip1":
        return "brokerIP1"
    head, *rest = key.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# Keys whose values are credentials: shown as MASK wherever a configuration is printed or
# answered (GET_BROKER_CONFIG, `rockafka config list`), as Kafka answers DescribeConfigs for
# password-typed keys with no value.
SECRET_KEYS = frozenset({"sasl_plain_users", "init_authentication_user", "inner_client_authentication_credentials"})
_SECRET_WORDS = ("password", "secret", "credentials")
MASK = "******"


def is_secret_key(key: str) -> bool:
    """True for a key (any spelling) whose value is a credential and must never be shown."""
    name = snake_case(key)
    return name in SECRET_KEYS or any(w in name for w in _SECRET_WORDS)


def shown_value(key: str, value: str) -> str:
    """``value`` as it may be shown to a person or a client: masked for a credential key."""
    return MASK if value and is_secret_key(key) else value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


def describe(config: NodeConfig) -> list[dict[str, str]]:
    """One row per accepted key, RocketMQ spelling, for ``rockafka config list``: its value in
    ``config``, its default and (gateway keys) what it does."""
    defaults = NodeConfig()
    rows = []
    for key, where in sorted(known_keys().items(), key=lambda kv: camel_case(kv[0]).lower()):
        if where == "extra":
            default, about = EXTRA_KEYS[key]
            value = config.extra.get(key, default)
        else:
            about = FIELD_DOCS.get(key, ("", ""))[1]
            owner = {"node": config, "store": config.store, "broker": config.broker, "limits": config.limits,
                     "security": config.security}[where]
            default_owner = {"node": defaults, "store": defaults.store, "broker": defaults.broker,
                             "limits": defaults.limits, "security": defaults.security}[where]
            value, default = getattr(owner, key), getattr(default_owner, key)
        rows.append({"key": camel_case(key), "value": shown_value(key, _text(value)), "default": _text(default),
                     "section": where,
                     "unit": unit_of(key, _text(default)), "about": about})
    return rows


def apply(config: NodeConfig, values: Mapping[str, Any]) -> NodeConfig:
    """Apply ``values`` (any spelling of a key) onto ``config``; unknown keys are refused."""
    store_types = _field_types(MessageStoreConfig)
    broker_types = _field_types(BrokerConfig)
    limit_types = _field_types(ListenerLimits)
    security_types = _field_types(SecurityConfig)
    for raw_key, raw in values.items():
        if raw is None:
            continue
        key = resolve_key(raw_key)
        if key in _NODE_KEYS:
            typ = str if key == "host" else int
            setattr(config, key, _convert(key, raw, typ) if typ is int else str(raw))
        elif key in store_types:
            setattr(config.store, key, _convert(key, raw, store_types[key]))
        elif key in broker_types:
            setattr(config.broker, key, _convert(key, raw, broker_types[key]))
        elif key in limit_types:
            setattr(config.limits, key, _convert(key, raw, limit_types[key]))
        elif key in security_types:
            setattr(config.security, key, _convert(key, raw, security_types[key]))
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
    for key in ("ha_send_heartbeat_interval", "ha_housekeeping_interval", "ha_transfer_batch_size",
                "ha_max_time_slave_not_catchup", "ha_sync_metadata_interval"):
        if getattr(s, key) <= 0:
            raise ConfigError(f"{key} must be positive, got {getattr(s, key)}")
    if s.tiered_backend_service_provider not in ("none", "s3"):
        raise ConfigError("tieredBackendServiceProvider must be none or s3, "
                          f"got {s.tiered_backend_service_provider!r}")
    if s.tiered_backend_service_provider == "s3":
        for key in ("object_store_endpoint", "object_store_bucket"):
            if not getattr(s, key):
                raise ConfigError(f"tieredBackendServiceProvider=s3 needs {camel_case(key)}")
        if not s.object_store_endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"objectStoreEndpoint must be an http(s) URL, got {s.object_store_endpoint!r}")
    for key in ("tiered_store_group_commit_size", "tiered_store_upload_concurrency", "tiered_store_op_timeout",
                "tiered_store_upload_interval"):
        if getattr(s, key) <= 0:
            raise ConfigError(f"{key} must be positive, got {getattr(s, key)}")
    for key in ("tiered_store_upload_bandwidth", "tiered_store_read_cache_size"):
        if getattr(s, key) < 0:
            raise ConfigError(f"{key} must be 0 or more, got {getattr(s, key)}")
    if not 0 <= s.access_message_in_memory_max_ratio <= 100:
        raise ConfigError(f"accessMessageInMemoryMaxRatio is a percentage 0..100, got {s.access_message_in_memory_max_ratio}")
    b = config.broker
    if b.enable_controller_mode:
        if not b.controller_addr:
            raise ConfigError("enableControllerMode=true needs controllerAddr (the controller NameServers, `;`-separated)")
        if b.broker_id < 1:
            raise ConfigError("enableControllerMode=true: brokerId is this replica's identity in its group and must be "
                              ">= 1 (the master registers under 0 while it leads)")
        if not 0 < b.master_lease_mills < b.controller_heart_beat_timeout_mills:
            raise ConfigError(f"masterLeaseMills ({b.master_lease_mills}) must be positive and shorter than "
                              f"controllerHeartBeatTimeoutMills ({b.controller_heart_beat_timeout_mills}): a master "
                              "must stop acknowledging before the controller may elect another")
        if b.min_in_sync_replicas < 1:
            raise ConfigError(f"minInSyncReplicas counts the master and must be >= 1, got {b.min_in_sync_replicas}")
        for key in ("broker_heartbeat_interval", "sync_broker_metadata_period", "check_sync_state_set_period"):
            if getattr(b, key) <= 0:
                raise ConfigError(f"{key} must be positive, got {getattr(b, key)}")
    elif s.broker_role == "SLAVE" and b.broker_id == 0:
        raise ConfigError("brokerRole=SLAVE needs a brokerId other than 0 (brokerId 0 is the master of the group)")
    elif s.broker_role != "SLAVE" and b.broker_id != 0:
        raise ConfigError(f"brokerId {b.broker_id} is a slave id: set brokerRole=SLAVE, or brokerId=0 for a master")
    if s.ha_master_address and ":" not in s.ha_master_address:
        raise ConfigError(f"haMasterAddress must be host:port, got {s.ha_master_address!r}")
    if not 1 <= s.os_page_cache_busy_time_out_mills:
        raise ConfigError(f"osPageCacheBusyTimeOutMills must be positive, got {s.os_page_cache_busy_time_out_mills}")
    for key in ("wait_time_mills_in_send_queue", "send_message_thread_pool_nums"):
        if getattr(b, key) <= 0:
            raise ConfigError(f"{key} must be positive, got {getattr(b, key)}")
    for f in fields(ListenerLimits):
        value = getattr(config.limits, f.name)
        if f.name == "queued_max_request_bytes" and value == -1:
            continue
        if value < 0 or (value == 0 and f.name not in _ZERO_MEANS_OFF):
            raise ConfigError(f"{f.name} must be positive{' (0 = off)' if f.name in _ZERO_MEANS_OFF else ''}, got {value}")
    for key in ("connection_failed_authentication_delay_ms", "connections_max_reauth_ms",
                "authentication_failure_rate_per_user", "authentication_failure_rate_per_source",
                "authentication_lockout_threshold", "authentication_lockout_window_ms"):
        if getattr(config.security, key) < 0:
            raise ConfigError(f"{key} must be 0 or more, got {getattr(config.security, key)}")
    for name in ("kafka_port", "namesrv_port", "admin_port"):
        port = getattr(config, name)
        if not 0 <= port <= 65535:
            raise ConfigError(f"{name} must be 0..65535, got {port}")


@dataclass
class ControllerConfig:
    """The failover controller a NameServer runs (``rockafka namesrv --set``), RocketMQ 5's
    ``ControllerConfig`` keys (docs/design/failover.md)."""

    enable_controller_in_namesrv: bool = False
    # `n0-host:port;n1-host:port;n2-host:port`: the Raft peers (each port is a Raft port)
    controller_d_leger_peers: str | None = None
    controller_d_leger_self_id: str | None = None
    controller_d_leger_group: str = "DefaultControllerGroup"
    controller_store_path: str | None = None  # Raft journal and snapshot; default <data dir>/controller
    enable_elect_unclean_master: bool = False  # elect outside the SyncStateSet when none of it is alive
    # ms between scans for dead masters. RocketMQ: 5000; shorter so failover takes seconds.
    scan_not_active_broker_interval: int = 1000

    def peers(self) -> dict[str, str]:
        """Peer id -> Raft address, from controllerDLegerPeers."""
        out: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in (self.controller_d_leger_peers or "").split(";"))):
            pid, sep, addr = part.partition("-")
            if not sep or ":" not in addr:
                raise ConfigError(f"controllerDLegerPeers: expected id-host:port, got {part!r}")
            out[pid] = addr
        return out


def is_controller_key(raw_key: str) -> bool:
    """``raw_key`` (any spelling) names a ``ControllerConfig`` key."""
    squashed = _squash(snake_case(raw_key))
    return any(_squash(k) == squashed for k in _field_types(ControllerConfig))


def load_controller_config(values: Mapping[str, Any]) -> ControllerConfig:
    """``ControllerConfig`` from ``key=value`` settings in any spelling; unknown keys are refused."""
    cfg = ControllerConfig()
    types = _field_types(ControllerConfig)
    squashed = {_squash(k): k for k in types}
    for raw_key, raw in values.items():
        key = squashed.get(_squash(snake_case(raw_key)))
        if key is None:
            raise ConfigError(f"unknown NameServer key {raw_key!r}; known: "
                              + ", ".join(camel_case(k) for k in sorted(types)))
        setattr(cfg, key, _convert(key, raw, types[key]))
    peers = cfg.peers()  # a malformed peer list is an error even while the controller is off
    if cfg.enable_controller_in_namesrv:
        if len(peers) < 1 or cfg.controller_d_leger_self_id not in peers:
            raise ConfigError("enableControllerInNamesrv=true needs controllerDLegerPeers (id-host:port;...) and "
                              "controllerDLegerSelfId naming one of them")
        if cfg.scan_not_active_broker_interval <= 0:
            raise ConfigError("scanNotActiveBrokerInterval must be positive")
    return cfg


_ZERO_MEANS_OFF = {"connections_max_idle_ms", "server_channel_max_idle_time_seconds", "request_receive_timeout_ms"}

ENV_PREFIX = "ROCKAFKA_"
# ROCKAFKA_* variables that are not node keys: `rockafka admin`'s NameServer, credentials and TLS
# files, `rockafka security`'s admin URL and login, and the key sealing the remoting secrets
# (engine/security/secret_box.py: ROCKAFKA_AUTH_SECRET_KEY, ..._PREVIOUS).
ENV_NOT_KEYS = frozenset({"NAMESRV", "ACCESS_KEY", "SECRET_KEY", "TLS_CERT", "TLS_KEY", "TLS_CA", "ADMIN_URL",
                          "ADMIN_USER", "ADMIN_PASSWORD", "AUTH_SECRET_KEY", "AUTH_SECRET_KEY_PREVIOUS"})


def env_values(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    environ = os.environ if environ is None else environ
    return {k[len(ENV_PREFIX):]: v for k, v in environ.items()
            if k.startswith(ENV_PREFIX) and k[len(ENV_PREFIX):] not in ENV_NOT_KEYS}


def _apply_from(config: NodeConfig, values: Mapping[str, Any], source: str) -> None:
    try:
        apply(config, values)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def load_node_config(
    conf_file: str | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> NodeConfig:
    config = NodeConfig()
    if conf_file:
        _apply_from(config, read_broker_conf(conf_file), str(conf_file))
    _apply_from(config, env_values(environ), f"environment ({ENV_PREFIX}<KEY>)")
    if overrides:
        apply(config, overrides)
    return config


def replace_store(config: MessageStoreConfig, **changes: Any) -> MessageStoreConfig:
    return dataclasses.replace(config, **changes)
