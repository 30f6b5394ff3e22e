"""The Kafka listener: an asyncio shell around the sans-IO codec and the API table.

Per connection the loop is: read the 4-byte size, refuse (close) a size that is not positive
or above ``socket_request_max_bytes`` *before* buffering anything, wait for that many bytes of
the node's request budget (``broker.listener_limits``: meanwhile the socket is read only
until the connection's 256 KiB head buffer is full), receive the frame into a buffer of its own
(``broker.frame_reader``) within ``request_receive_timeout_ms``, decode it, await the handler
registered for the API key, write the response, give the budget back.

Limits (``engine.config.ListenerLimits``, node-wide): a connection over ``max_connections``,
``max_connections_per_ip`` or too close to the open-files limit is closed as soon as it is
accepted; one with no request for ``connections.max.idle.ms`` is closed.

Invariants:
- Responses on one connection go out strictly in request order: requests on a connection are
  handled one at a time, as a Kafka broker does (it mutes a channel while a request is in
  flight). Clients may still pipeline; the next request waits in the socket buffer.
- Produce with acks=0 gets no response (the handler returns ``None``).
- A malformed frame, an unknown API key or an unsupported version (other than ApiVersions,
  which answers UNSUPPORTED_VERSION in a v0 body per KIP-511) closes that connection only; an
  exception escaping a handler is logged and closes that connection only. Other connections
  never notice.
- Store calls that may wait on disk run in the default thread executor; the event loop only
  does protocol work and memory-mapped reads.

Also owns the gateway-wide services handlers share: the group coordinator, the transaction
coordinator (which also hands out producer ids), per-partition produce locks and the arrival hub
that wakes long-polling fetches. Their state is in the engine's log
(docs/design/coordinator-state.md): nothing here writes files of its own.
"""

from __future__ import annotations

import asyncio
import ipaddress
import functools
import socket
from collections import defaultdict
from typing import Any

import structlog

from broker.put_path import PutPath
from broker.read_path import ArrivalHub
from broker.replication import Replication
from engine.consumer_offset import name_problem
from gateway_kafka import apis
from gateway_kafka import error_codes as E
from gateway_kafka.apis import ConnectionState, RequestContext
from gateway_kafka.authz import REQUEST_CHECKS as _CHECKED, refused as _authz_refused
from gateway_kafka.cluster import BrokerNode, LocalReplication
from gateway_kafka.cluster_view import ClusterView
from gateway_kafka.coordinator import GroupCoordinator
from gateway_kafka.wire_out import plain_fd, send_with_runs, worth_sendfile, write_chunks
from broker.frame_reader import FrameReader, frame_protocol_factory
from broker.listener_limits import BUSY, ListenerGuard, Watch, start_server

log = structlog.get_logger("rockafka.kafka")

MiB = 1024 * 1024
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
WRITE_HIGH_WATER = 4 * MiB
_PRE_AUTH_APIS = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate
_HELD = "request_budget_bytes"  # ConnectionState.extra: budget held by the request in hand
_THROTTLE = "throttle_time_ms"  # set by a handler under flow control (see apis/produce.py)


# Group and transaction requests whose strings end up in internal topics' records (group
# metadata, group records, transaction state: int16-length strings): one longer than a record
# can hold is answered with the API's error code here, where the request is decoded -- the
# group or transactional id with its own code, any other string (a member or instance id, a
# protocol name) INVALID_REQUEST. (OffsetCommit and TxnOffsetCommit answer per partition:
# their handlers check the group id; their other strings are not stored.)
_NAMED_APIS: dict[int, int] = {  # api key -> the code for an over-long group / transactional id
    11: E.INVALID_GROUP_ID, 12: E.INVALID_GROUP_ID, 13: E.INVALID_GROUP_ID, 14: E.INVALID_GROUP_ID,
    68: E.INVALID_GROUP_ID, 76: E.INVALID_GROUP_ID, 88: E.INVALID_GROUP_ID, 47: E.INVALID_GROUP_ID,
    22: E.INVALID_REQUEST, 26: E.INVALID_REQUEST, 25: E.INVALID_REQUEST,
}


def _too_long(node: Any, path: str = "") -> tuple[str, str] | None:
    """(field path, problem) of the first string in ``node`` no record can hold."""
    if isinstance(node, str):
        problem = name_problem(path or "string", node) if len(node) > 8191 else None
        return (path, problem) if problem else None
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, (str, dict, list)):
                hit = _too_long(v, k)
                if hit:
                    return hit
    elif isinstance(node, list):
        for v in node:
            if isinstance(v, (str, dict, list)):
                hit = _too_long(v, path)
                if hit:
                    return hit
    return None


def _name_refused(api_key: int, api_version: int, body: dict) -> dict | None:
    hit = _too_long(body)
    if hit is None:
        return None
    field, problem = hit
    from gateway_kafka.protocol.codec import body_defaults

    answer = body_defaults(api_key, api_version)
    if "error_code" not in answer:
        return None
    answer["error_code"] = _NAMED_APIS[api_key] if field in ("group_id", "transactional_id") else E.INVALID_REQUEST
    if "error_message" in answer:
        answer["error_message"] = problem
    log.info("request_refused", reason="string_too_long", api_key=api_key, field=field, error=problem)
    return answer


class KafkaSettings:
    """Gateway settings from ``NodeConfig.extra`` (``--set key=value``); see kafka-gateway.md."""

    def __init__(self, config: Any):
        self.host: str = config.host
        self.port: int = config.kafka_port
        self.advertised_host: str | None = config.extra_str("advertised_host")
        self.advertised_port: int = config.extra_int("advertised_port", 0)
        self.node_id: int = config.extra_int("kafka_node_id", config.broker.broker_id)
        self.cluster_id: str = config.extra_str("kafka_cluster_id", config.broker.broker_cluster_name)
        self.num_partitions: int = config.extra_int("num_partitions", 1)
        self.auto_create_topics_enable: bool = config.extra_bool(
            "auto_create_topics_enable", config.broker.auto_create_topic_enable)
        self.socket_request_max_bytes: int = config.limits.socket_request_max_bytes
        # Fetch on plain TCP sends stored batches from the segment files with sendfile (no copy
        # through the interpreter); false keeps the copy path everywhere
        self.fetch_sendfile: bool = config.extra_bool("kafka_fetch_sendfile", True)
        # Kafka's connections.max.idle.ms: a connection with no request for this long is closed
        # (clients reconnect on demand); 0 keeps connections forever.
        self.connections_max_idle_ms: int = config.limits.connections_max_idle_ms
        self.group_min_session_timeout_ms: int = config.extra_int("group_min_session_timeout_ms", 6000)
        self.group_max_session_timeout_ms: int = config.extra_int("group_max_session_timeout_ms", 1_800_000)
        # Kafka's default is 3000 ms; a short delay keeps tests and small deployments snappy
        # while still batching members that start together.
        self.group_initial_rebalance_delay_ms: int = config.extra_int("group_initial_rebalance_delay_ms", 100)
        self.group_max_size: int = config.extra_int("group_max_size", 1000)
        self.offset_metadata_max_bytes: int = config.extra_int("offset_metadata_max_bytes", 4096)
        _modern_group_settings(self, config)
        self.message_max_bytes: int = config.extra_int("message_max_bytes", config.store.max_message_size)
        self.list_offsets_time_skew_ms: int = config.extra_int("list_offsets_time_skew_ms", 600_000)
        # Kafka's broker.rack (follower fetching) and min.insync.replicas (acks=all), broker-wide defaults
        self.broker_rack: str | None = config.broker.broker_rack
        self.min_insync_replicas: int = config.extra_int("min_insync_replicas", 1)
        self.delete_topic_enable: bool = config.extra_bool("delete_topic_enable", True)
        from gateway_kafka.listeners import listener_specs, sasl_mechanisms

        self.sasl_mechanisms: list[str] = sasl_mechanisms(config)
        self.listeners = listener_specs(config)
        # Under ASYNC_FLUSH a put only copies into the mapped commitlog, so it runs on the event
        # loop (an executor hop costs more than the put); SYNC_FLUSH puts wait on disk and go
        # through the executor.
        self.direct_put: bool = config.extra_bool("kafka_direct_put", config.store.flush_disk_type == "ASYNC_FLUSH")


def _modern_group_settings(s: Any, config: Any) -> None:
    """KIP-848 consumer groups and KIP-932 share groups: Kafka's broker defaults
    (``group.consumer.*`` / ``group.share.*``, here with underscores); the group configs
    (``group_configs.py``) override them per group within the min/max bounds."""
    s.consumer_session_timeout_ms = config.extra_int("group_consumer_session_timeout_ms", 45_000)
    # Kafka's group.coordinator.rebalance.protocols: without "streams" the broker neither
    # advertises nor answers StreamsGroupHeartbeat / StreamsGroupDescribe (KIP-1071)
    s.rebalance_protocols = {p.strip().lower() for p in (config.extra_str(
        "group_coordinator_rebalance_protocols", "classic,consumer,streams") or "").split(",") if p.strip()}
    s.consumer_min_session_timeout_ms = config.extra_int("group_consumer_min_session_timeout_ms", 45_000)
    s.consumer_max_session_timeout_ms = config.extra_int("group_consumer_max_session_timeout_ms", 60_000)
    s.consumer_heartbeat_interval_ms = config.extra_int("group_consumer_heartbeat_interval_ms", 5_000)
    s.consumer_min_heartbeat_interval_ms = config.extra_int("group_consumer_min_heartbeat_interval_ms", 5_000)
    s.consumer_max_heartbeat_interval_ms = config.extra_int("group_consumer_max_heartbeat_interval_ms", 15_000)
    s.consumer_max_size = config.extra_int("group_consumer_max_size", 2_147_483_647)
    s.consumer_assignment_interval_ms = config.extra_int("group_consumer_assignment_interval_ms", 1_000)
    s.assignor_offload_enable = False
    s.share_session_timeout_ms = config.extra_int("group_share_session_timeout_ms", 45_000)
    s.share_min_session_timeout_ms = config.extra_int("group_share_min_session_timeout_ms", 45_000)
    s.share_max_session_timeout_ms = config.extra_int("group_share_max_session_timeout_ms", 60_000)
    s.share_heartbeat_interval_ms = config.extra_int("group_share_heartbeat_interval_ms", 5_000)
    s.share_min_heartbeat_interval_ms = config.extra_int("group_share_min_heartbeat_interval_ms", 5_000)
    s.share_max_heartbeat_interval_ms = config.extra_int("group_share_max_heartbeat_interval_ms", 15_000)
    s.share_max_size = config.extra_int("group_share_max_size", 200)
    s.share_record_lock_duration_ms = config.extra_int("group_share_record_lock_duration_ms", 30_000)
    s.share_delivery_count_limit = config.extra_int("group_share_delivery_count_limit", 5)
    s.share_partition_max_record_locks = config.extra_int("group_share_partition_max_record_locks", 2_000)
    s.share_record_redelivery_delay_level = config.extra_int("group_share_record_redelivery_delay_level", 0)
    s.delay_level_count = len(config.store.message_delay_level.split())
    s.share_assignment_interval_ms = config.extra_int("group_share_assignment_interval_ms", 1_000)
    s.share_auto_offset_reset = "latest"
    s.share_isolation_level = "read_uncommitted"
    s.share_renew_acknowledge_enable = True
    s.share_dlq_topic = ""           # "" = the engine's %DLQ%<group>
    s.share_dlq_copy_record = True
    s.streams_session_timeout_ms = 45_000
    s.streams_heartbeat_interval_ms = 5_000
    s.streams_num_standby_replicas = 0
    s.streams_initial_rebalance_delay_ms = 3_000
    s.streams_assignment_interval_ms = 1_000
    s.streams_rack_aware_assignment_tags = ""
    s.streams_task_offset_interval_ms = 60_000
    s.streams_num_warmup_replicas = 2
    s.streams_acceptable_recovery_lag = 10_000
    s.streams_assignor_name = "sticky"


def _local_replication(store: Any) -> LocalReplication:
    """The engine's live replication state, as the cluster view needs it."""
    ha = Replication(store)
    if not ha.available:
        return LocalReplication()

    def slave_nodes() -> dict[int, BrokerNode]:
        out = {}
        for broker_id, ident in ha.slave_identities().items():
            if all(k in ident for k in ("kafkaNodeId", "kafkaHost", "kafkaPort")):
                out[broker_id] = BrokerNode(int(ident["kafkaNodeId"]), str(ident["kafkaHost"]),
                                            int(ident["kafkaPort"]), ident.get("brokerRack") or None)
        return out

    # a master whose lease ran out (cut off from the controller) no longer claims to lead
    return LocalReplication(is_master=lambda: ha.is_master and ha.lease_valid(),
                            in_sync_broker_ids=ha.in_sync_slave_ids,
                            slave_nodes=slave_nodes,
                            leader_epochs=bool(store.broker_config.enable_controller_mode),
                            master_epoch=lambda: ha.master_epoch)


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


class KafkaGateway:
    name = "kafka"

    def __init__(self, store: Any, config: Any, guard: ListenerGuard | None = None, put_path: PutPath | None = None):
        self.store = store
        self.config = config
        self.log = log
        self.settings = KafkaSettings(config)
        from engine import security

        self.security = security.for_store(store, config)  # who is this, may it (docs/design/security.md)
        self.guard = guard or ListenerGuard(config.limits)  # the node passes the one all listeners share
        # the node's one put path (write scheduling, flow control); its own when started alone
        self.writes, self._owns_writes = PutPath.for_gateway(store, config, put_path)
        self.port: int | None = None
        self.cluster: ClusterView | None = None
        # how topics reach other broker groups (topic_placement.RemoteGroups); None: this group only
        self.remote_groups: Any = None
        self.coordinator = GroupCoordinator(
            min_session_timeout_ms=self.settings.group_min_session_timeout_ms,
            max_session_timeout_ms=self.settings.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.settings.group_initial_rebalance_delay_ms,
            max_group_size=self.settings.group_max_size, store=store, put=self.put)
        from gateway_kafka.consumer_groups import ModernGroupCoordinator
        from gateway_kafka.group_configs import GroupConfigs
        self.group_configs = GroupConfigs(self.settings, store, self.put)
        from gateway_kafka.dynamic_configs import DynamicConfigs
        self.dynamic_configs = DynamicConfigs(store, self, self.put)
        from gateway_kafka.quotas import ClientQuotas
        self.quotas = ClientQuotas(store, self.put)
        from gateway_kafka.fetch_sessions import FetchSessions
        self.fetch_sessions = FetchSessions(self)
        self.modern_groups = ModernGroupCoordinator(self, self.coordinator, self.group_configs)
        from gateway_kafka.streams_groups import StreamsGroupCoordinator
        self.streams_groups = StreamsGroupCoordinator(self, self.group_configs)
        from gateway_kafka.txn_coordinator import TransactionCoordinator
        self.txn = TransactionCoordinator(self)
        self.partition_locks: dict[tuple[str, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        # under a failover controller: async (broker id or None) -> (ok, reason), asks the
        # controller to elect a master (ElectLeaders); set by the node, None without one
        self.elect_master: Any = None
        self.arrivals: ArrivalHub | None = None
        self._server: Any = None
        self._servers: list[Any] = []
        self.listener_ports: dict[str, int] = {}
        self._connections: set[asyncio.Task] = set()
        self._stopping = False
        self._loop: asyncio.AbstractEventLoop | None = None

    def _coordinator_partition(self, key: str, key_type: int) -> tuple[str, int] | None:
        """Where a group id (0) or transactional id (1) keeps its state, as Kafka places it."""
        from engine.state_log import CONSUMER_OFFSETS, TRANSACTION_STATE

        if key_type == 0 and getattr(self.store, "consumer_offsets", None) is not None:
            return CONSUMER_OFFSETS, self.store.consumer_offsets.partition_of(key)
        if key_type == 1 and self.txn.log is not None:
            return TRANSACTION_STATE, self.txn.log.partition_for(key)
        return None

    def _coordinated_partitions(self, topic: str) -> set[int]:
        """Partitions of an internal topic this node's coordinators hold state in: groups with
        metadata (joined at least once), transactional ids."""
        where = self._coordinator_partition
        key_type = 0 if topic == "__consumer_offsets" else 1
        keys = self.coordinator.groups if key_type == 0 else self.txn.txns
        out = set()
        for key in list(keys):
            found = where(key, key_type)
            if found is not None:
                out.add(found[1])
        return out

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        apis.load_all()
        loop = self._loop = asyncio.get_running_loop()
        self.arrivals = ArrivalHub(loop)
        self.arrivals.attach(self.store)
        await self.txn.start()
        self.coordinator.restore()
        self.group_configs.restore()
        self.dynamic_configs.restore()
        self.quotas.restore()
        self.modern_groups.restore()
        self.streams_groups.restore()
        await self._start_listeners()
        primary = self.settings.listeners[0]
        # a listener bound to loopback is reachable there only: never advertised on another address
        host = (primary.advertised_host or (primary.host if _is_loopback(primary.host) else None)
                or self.settings.advertised_host or self._default_advertised_host())
        self.cluster = ClusterView(self.settings.cluster_id, self.settings.node_id, host,
                                   primary.advertised_port or self.settings.advertised_port or self.port,
                                   rack=self.settings.broker_rack,
                                   broker_name=self.config.broker.broker_name, broker_id=self.config.broker.broker_id,
                                   local=_local_replication(self.store), local_topics=self.store.topic_config.all,
                                   local_topic=self.store.topic_config.get,
                                   coordinator_partition=self._coordinator_partition,
                                   local_coordinator_partitions=self._coordinated_partitions)
        self.store.role_listeners.append(self._role_changed)
        log.info("kafka_gateway_started", host=self.settings.host, port=self.port, advertised=f"{host}:"
                 f"{self.cluster.self_node.port}", apis=len(apis.REGISTRY),
                 listeners=",".join(f"{s.name}:{s.protocol}:{self.listener_ports[s.name]}" for s in self.settings.listeners))

    async def _start_listeners(self) -> None:
        from broker.listener_limits import ListenerTls
        from broker import tls as sec_tls

        contexts: dict[str, Any] = {}
        for spec in self.settings.listeners:
            tls = None
            if spec.tls:
                # SSL listeners ask for client certificates as tlsServerNeedClientAuth says;
                # SASL_SSL ones never (the login names the principal), as Kafka's do
                kind = "SASL_SSL" if spec.sasl else "SSL"
                if kind not in contexts:
                    contexts[kind] = sec_tls.server_context(self.config, self._default_advertised_host(),
                                                            "none" if spec.sasl else None)
                tls = ListenerTls(contexts[kind], "enforcing", on_failure=self._tls_failed)
            try:
                # requests are received into their own buffers (broker/frame_reader.py): a large
                # produce is copied by nobody on its way in
                server = await start_server(self.guard, "kafka", spec.host, spec.port,
                                            frame_protocol_factory(functools.partial(self._on_connection, spec)),
                                            tls=tls)
            except BaseException:
                for srv in self._servers:
                    srv.close()
                raise
            self._servers.append(server)
            self.listener_ports[spec.name] = server.sockets[0].getsockname()[1]
        self._server = self._servers[0]
        self.port = self.listener_ports[self.settings.listeners[0].name]

    def _tls_failed(self, listener: str, peer: str, reason: str) -> None:
        self.security.failed("kafka", "tls_handshake", peer, error=reason)

    def advertised(self, spec: Any, node: BrokerNode) -> BrokerNode:
        """``node`` as a client on listener ``spec`` must reach it: this node's own entry gets
        that listener's address (other members are advertised as they registered)."""
        if spec is None or self.cluster is None or node.node_id != self.cluster.self_node.node_id \
                or spec is self.settings.listeners[0]:
            return node
        wildcard_host = (self.cluster.self_node.host if not _is_loopback(self.cluster.self_node.host)
                         else self.settings.advertised_host or self._default_advertised_host())
        host = spec.advertised_host or (spec.host if spec.host not in ("0.0.0.0", "::", "") else wildcard_host)
        return BrokerNode(node.node_id, host, spec.advertised_port or self.listener_ports.get(spec.name, node.port),
                          node.rack)

    def _role_changed(self, role: str, epoch: int) -> None:
        """The store changed role (failover, docs/design/failover.md; runs in the role change's
        thread, before a new master's lease lets writes in). Idempotence state needs nothing: the
        engine's producer table followed every replicated batch. The coordinators recover from the
        log the node now holds, as at a start: the transaction coordinator refuses requests from
        here until it has replayed ``__transaction_state``; groups come back from
        ``__consumer_offsets``. A demoted node stops coordinating (COORDINATOR_NOT_AVAILABLE sends
        clients to FindCoordinator, which names the new master)."""
        master = role != "SLAVE"
        self.txn.role_changing(master)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            asyncio.run_coroutine_threadsafe(self._follow_role(master), loop)

    async def _follow_role(self, master: bool) -> None:
        try:
            await self.txn.follow_role(master)
            self.coordinator.follow_role(master)
            self.dynamic_configs.restore()
            self.quotas.restore()
        except Exception:
            log.exception("coordinator_role_change_failed", master=master)

    def _default_advertised_host(self) -> str:
        host = self.settings.host
        if host in ("0.0.0.0", "::", ""):
            return self.config.broker.broker_ip1 or socket.gethostname()
        return host

    async def stop(self) -> None:
        self._stopping = True
        if self._role_changed in self.store.role_listeners:
            self.store.role_listeners.remove(self._role_changed)
        for srv in self._servers:
            srv.close()
        self.coordinator.close()
        self.modern_groups.close()
        self.streams_groups.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        for srv in self._servers:
            await srv.wait_closed()
        await self.txn.stop()
        if self.arrivals is not None:
            self.arrivals.detach(self.store)
        if self._owns_writes:
            self.writes.shutdown()
        log.info("kafka_gateway_stopped", port=self.port)

    async def connect_node(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to another node's primary Kafka listener (the same listeners on every
        node of the cluster), logged in as this node: TLS when the listener is SSL / SASL_SSL
        (the node's client context: its certificate is presented when asked for), then SASL PLAIN
        with ``innerClientAuthenticationCredentials`` (a super user: cluster action) when the
        listener is SASL_*. PermissionError when the login is refused or cannot be made."""
        from broker.tls import client_context
        from gateway_kafka.protocol.codec import decode_response, encode_request

        spec = self.settings.listeners[0]
        ssl_ctx = client_context(self.config) if spec.tls else None
        reader, writer = await asyncio.open_connection(host, port, ssl=ssl_ctx)
        if not spec.sasl:
            return reader, writer
        inner = self.security.inner
        if inner is None or "PLAIN" not in self.settings.sasl_mechanisms:
            writer.close()
            raise PermissionError(f"node-to-node Kafka requests on listener {spec.name} ({spec.protocol}) need PLAIN "
                                  f"among the SASL mechanisms and innerClientAuthenticationCredentials")
        for key, version, body in ((17, 1, {"mechanism": "PLAIN"}),
                                   (36, 1, {"auth_bytes": b"\0" + inner[0].encode() + b"\0" + inner[1].encode()})):
            writer.write(encode_request(key, version, 0, body, "rockafka-node"))
            size = int.from_bytes(await reader.readexactly(4), "big")
            _corr, resp = decode_response(key, version, await reader.readexactly(size))
            if resp.get("error_code"):
                writer.close()
                raise PermissionError(f"node login refused: {resp.get('error_message') or resp['error_code']}")
        return reader, writer

    async def put(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A coordinator's state write through the node's put path (broker.put_path): on the loop
        when it only copies into the mapped commitlog (``direct_put``), else queued; never
        refused for waiting (a group or offset record is not a producer that can back off)."""
        return await self.writes.run(fn, *args, inline=self.settings.direct_put, fast_failure=False, **kwargs)

    # -- connections -----------------------------------------------------------------------
    async def _on_connection(self, spec: Any, reader: FrameReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        sock = writer.get_extra_info("socket")
        ticket = self.guard.admit("kafka", str(peer[0]), sock.fileno() if sock is not None else -1)
        if ticket is None:  # over a connection limit: closed unread, as Kafka does
            writer.close()
            return
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        conn = ConnectionState(str(peer[0]), int(peer[1]), listener=spec)
        if spec.tls:  # a verified client certificate names the principal (SASL may override it)
            from broker import tls as sec_tls

            mapper = self.__dict__.get("_principal_mapper")
            if mapper is None:
                mapper = self._principal_mapper = sec_tls.PrincipalMapper(
                    self.config.security.ssl_principal_mapping_rules)
            cert_principal = sec_tls.peer_principal(writer.get_extra_info("ssl_object"), mapper)
            if cert_principal is not None:
                conn.principal = cert_principal
                self.security.succeeded("kafka", "SSL", cert_principal, f"{conn.peer_host}:{conn.peer_port}")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # clients that vanish without a FIN (power loss, partitions) are found by the
                # kernel's keepalive rather than holding a connection task forever
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:
                pass
        # idle connections and requests slower than request_receive_timeout_ms are closed by
        # the guard's timer (one for the node), which aborts the transport under the reads
        idle_ms = self.settings.connections_max_idle_ms
        watch = self.guard.watch("kafka", f"{conn.peer_host}:{conn.peer_port}", writer.transport.abort,
                                 idle_ms / 1000.0 if idle_ms > 0 else 0.0, buffered=reader.buffered)
        try:
            await self._serve(conn, reader, writer, watch)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection_failed", peer=f"{conn.peer_host}:{conn.peer_port}")
        finally:
            self._connections.discard(task)
            self.guard.unwatch(watch)
            self.guard.release(ticket)
            self.guard.budget.release(conn.extra.pop(_HELD, 0))
            try:
                writer.close()
            except Exception:
                pass

    async def _serve(self, conn: ConnectionState, reader: FrameReader, writer: asyncio.StreamWriter,
                     watch: Watch) -> None:
        from gateway_kafka.protocol import (MalformedRequestError, UnsupportedVersionError, decode_request,
                                            encode_response_chunks)

        max_bytes = self.settings.socket_request_max_bytes
        sasl_required = conn.listener is not None and conn.listener.sasl
        registry = apis.REGISTRY
        transport = writer.transport
        peer = f"{conn.peer_host}:{conn.peer_port}"
        budget = self.guard.budget
        extra = conn.extra
        clock = asyncio.get_running_loop().time
        out_fd = plain_fd(writer)  # -1 for TLS: responses then always go through the transport
        if out_fd >= 0 and self.settings.fetch_sendfile:
            extra["sendfile"] = True  # Fetch may answer with file runs (gateway_kafka.wire_out.FileRun)
        while not self._stopping:
            budget.release(extra.pop(_HELD, 0))  # the previous request is answered
            watch.last_read, watch.receiving_since = clock(), 0.0
            try:
                size = await reader.frame_size()
            except asyncio.IncompleteReadError:
                return  # clean close between requests (or closed by the guard: idle)
            if size <= 0 or size > max_bytes:
                log.warning("request_refused", peer=peer, reason="frame_size", size=size, max=max_bytes)
                return
            watch.receiving_since = BUSY
            extra[_HELD] = await budget.acquire(size)  # waits (reading nothing) while the node holds too much
            watch.receiving_since = clock()
            frame = await reader.frame(size)  # its own buffer; the body mostly received straight into it
            watch.receiving_since = BUSY
            try:
                req = decode_request(frame)
            except MalformedRequestError as exc:
                log.warning("request_refused", peer=peer, reason="malformed", error=str(exc))
                return
            except UnsupportedVersionError as exc:
                if exc.api_key == API_VERSIONS_KEY:
                    # KIP-511: answer a too-new ApiVersions in a v0 body so the client can
                    # downgrade instead of giving up.
                    body = {"error_code": UNSUPPORTED_VERSION, "api_keys": self._api_version_entries()}
                    writer.writelines(encode_response_chunks(API_VERSIONS_KEY, 0, exc.correlation_id, body))
                    await writer.drain()
                    continue
                log.warning("request_refused", peer=peer, reason="unsupported_version", api_key=exc.api_key,
                            api_version=exc.api_version)
                return
            header = req.header
            spec = registry.get(header.api_key)
            if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
                log.warning("request_refused", peer=peer, reason="unsupported_api", api_key=header.api_key,
                            api_version=header.api_version)
                return
            if sasl_required and header.api_key not in _PRE_AUTH_APIS:
                if conn.authenticated_principal is None:
                    log.warning("request_refused", peer=peer, reason="not_authenticated", api_key=header.api_key)
                    await asyncio.sleep(self.security.failed("kafka", "not_authenticated", peer))
                    return
                expires = conn.session_expires_at
                if expires and clock() > expires:  # KIP-368: the session ended without re-authentication
                    log.info("session_expired", peer=peer, principal=conn.principal, api_key=header.api_key)
                    return
            if header.client_id is not None:
                conn.client_id = header.client_id
            ctx = RequestContext(self, conn, header.api_key, header.api_version, header.correlation_id,
                                 header.client_id)
            started = clock()
            body = _authz_refused(ctx, header.api_key, req.body) if header.api_key in _CHECKED else None
            if body is None and header.api_key in _NAMED_APIS:
                body = _name_refused(header.api_key, header.api_version, req.body)
            if body is None:
                body = await spec.handler(ctx, req.body)
            quotas = self.quotas
            if body is None:
                if conn.extra.pop("close_now", False):
                    return
                if quotas.active:  # acks=0: no answer, the quota still counts and mutes
                    ms = max(extra.pop(_THROTTLE, 0), quotas.throttle_ms(
                        conn.principal, conn.client_id, header.api_key, size, 0, (clock() - started) * 1000))
                    if ms:
                        await asyncio.sleep(ms / 1000.0)
                continue
            chunks = encode_response_chunks(header.api_key, header.api_version, header.correlation_id, body)
            if quotas.active:  # client quotas: answer with throttle_time_ms, then mute (KIP-219)
                ms = quotas.throttle_ms(conn.principal, conn.client_id, header.api_key, size,
                                        sum(map(len, chunks)), (clock() - started) * 1000)
                if ms > body.get("throttle_time_ms", 0) and "throttle_time_ms" in body:
                    body["throttle_time_ms"] = ms
                    chunks = encode_response_chunks(header.api_key, header.api_version, header.correlation_id, body)
                extra[_THROTTLE] = max(extra.get(_THROTTLE, 0), ms)
            if header.api_key == 1 and out_fd >= 0 and worth_sendfile(chunks):
                await send_with_runs(writer, chunks, out_fd)  # stored batches straight from the files
            else:
                write_chunks(writer, chunks, out_fd, header.api_key == 1)
            if conn.extra.get("close_after_response"):
                await writer.drain()
                return
            if transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                await writer.drain()
            throttle_ms = extra.pop(_THROTTLE, 0)
            if throttle_ms:  # flow control: the client was told throttle_time_ms; read nothing until then
                await asyncio.sleep(throttle_ms / 1000.0)
        # fall through: gateway stopping

    def _api_version_entries(self) -> list[dict]:
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in apis.advertised()]
