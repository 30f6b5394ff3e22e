"""The Kafka listener: an asyncio shell around the sans-IO codec and the API table.

Per connection the loop is: read the 4-byte size, refuse (close) a size that is not positive
or above ``socket_request_max_bytes`` *before* buffering anything, ``readexactly`` the frame,
decode it, await the handler registered for the API key, write the response.

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

Also owns the gateway-wide services handlers share: the group coordinator, the producer state
(with its periodic snapshot), per-partition produce locks and the arrival hub that wakes
long-polling fetches.
"""

from __future__ import annotations

import asyncio
import socket
from collections import defaultdict
from typing import Any

import structlog

from gateway_kafka import apis
from gateway_kafka.apis import ConnectionState, RequestContext
from gateway_kafka.cluster import BrokerNode, LocalCluster, LocalReplication
from gateway_kafka.coordinator import GroupCoordinator
from gateway_kafka.producer_state import ProducerStateManager

log = structlog.get_logger("rockafka.kafka")

MiB = 1024 * 1024
API_VERSIONS_KEY = 18
UNSUPPORTED_VERSION = 35
WRITE_HIGH_WATER = 4 * MiB
_PRE_AUTH_APIS = frozenset({18, 17, 36})  # ApiVersions, SaslHandshake, SaslAuthenticate


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
        self.socket_request_max_bytes: int = config.extra_int("socket_request_max_bytes", 100 * MiB)
        # Kafka's connections.max.idle.ms: a connection with no request for this long is closed
        # (clients reconnect on demand); 0 keeps connections forever.
        self.connections_max_idle_ms: int = config.extra_int("connections_max_idle_ms", 600_000)
        self.group_min_session_timeout_ms: int = config.extra_int("group_min_session_timeout_ms", 6000)
        self.group_max_session_timeout_ms: int = config.extra_int("group_max_session_timeout_ms", 1_800_000)
        # Kafka's default is 3000 ms; a short delay keeps tests and small deployments snappy
        # while still batching members that start together.
        self.group_initial_rebalance_delay_ms: int = config.extra_int("group_initial_rebalance_delay_ms", 100)
        self.group_max_size: int = config.extra_int("group_max_size", 1000)
        self.offset_metadata_max_bytes: int = config.extra_int("offset_metadata_max_bytes", 4096)
        self.message_max_bytes: int = config.extra_int("message_max_bytes", config.store.max_message_size)
        self.producer_state_snapshot_ms: int = config.extra_int("producer_state_snapshot_ms", 1000)
        self.producer_id_expiration_ms: int = config.extra_int("producer_id_expiration_ms", 86_400_000)
        self.producer_state_rebuild_max_records: int = config.extra_int("producer_state_rebuild_max_records",
                                                                        100_000)
        self.list_offsets_time_skew_ms: int = config.extra_int("list_offsets_time_skew_ms", 600_000)
        # Kafka's broker.rack (follower fetching) and min.insync.replicas (acks=all), broker-wide defaults
        self.broker_rack: str | None = config.broker.broker_rack
        self.min_insync_replicas: int = config.extra_int("min_insync_replicas", 1)
        self.delete_topic_enable: bool = config.extra_bool("delete_topic_enable", True)
        self.sasl_mechanisms: list[str] = [m.strip().upper() for m in
                                           (config.extra_str("sasl_enabled_mechanisms", "") or "").split(",")
                                           if m.strip().upper() == "PLAIN"]
        self.sasl_plain_users: dict[str, str] = {}
        for pair in (config.extra_str("sasl_plain_users", "") or "").split(","):
            if ":" in pair:
                user, password = pair.split(":", 1)
                self.sasl_plain_users[user.strip()] = password
        # Under ASYNC_FLUSH a put only copies into the mapped commitlog, so it runs on the event
        # loop (an executor hop costs more than the put); SYNC_FLUSH puts wait on disk and go
        # through the executor.
        self.direct_put: bool = config.extra_bool("kafka_direct_put", config.store.flush_disk_type == "ASYNC_FLUSH")


def _local_replication(store: Any) -> LocalReplication:
    """The engine's live replication state, as the cluster view needs it."""
    ha = getattr(store, "ha", None)
    if ha is None:
        return LocalReplication()

    def slave_nodes() -> dict[int, BrokerNode]:
        out = {}
        for c in ha.connections():
            ident = c.identity
            if all(k in ident for k in ("kafkaNodeId", "kafkaHost", "kafkaPort")):
                out[c.broker_id] = BrokerNode(int(ident["kafkaNodeId"]), str(ident["kafkaHost"]),
                                              int(ident["kafkaPort"]), ident.get("brokerRack") or None)
        return out

    # a master whose lease ran out (cut off from the controller) no longer claims to lead
    return LocalReplication(is_master=lambda: ha.is_master and ha.lease_valid(),
                            in_sync_broker_ids=lambda: [v["brokerId"] for v in ha.in_sync_slaves()],
                            slave_nodes=slave_nodes,
                            leader_epochs=bool(store.broker_config.enable_controller_mode),
                            master_epoch=lambda: ha.master_epoch)


class ArrivalHub:
    """Wakes long-polling fetches when the store appends to a queue they wait on.

    The store calls ``on_arrival`` from its dispatch thread; only when some fetch waits on that
    (topic, queue) is a wake-up scheduled onto the loop, so idle queues cost one dict lookup.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self.waiters: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        if self.waiters.get((topic, queue_id)):
            self.loop.call_soon_threadsafe(self._wake, topic, queue_id)

    def _wake(self, topic: str, queue_id: int) -> None:
        for ev in self.waiters.get((topic, queue_id), ()):
            ev.set()

    def register(self, keys: list[tuple[str, int]], ev: asyncio.Event) -> None:
        for k in keys:
            self.waiters[k].add(ev)

    def unregister(self, keys: list[tuple[str, int]], ev: asyncio.Event) -> None:
        for k in keys:
            s = self.waiters.get(k)
            if s is not None:
                s.discard(ev)
                if not s:
                    del self.waiters[k]


class KafkaGateway:
    name = "kafka"

    def __init__(self, store: Any, config: Any):
        self.store = store
        self.config = config
        self.log = log
        self.settings = KafkaSettings(config)
        self.port: int | None = None
        self.cluster: LocalCluster | None = None
        self.coordinator = GroupCoordinator(
            min_session_timeout_ms=self.settings.group_min_session_timeout_ms,
            max_session_timeout_ms=self.settings.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=self.settings.group_initial_rebalance_delay_ms,
            max_group_size=self.settings.group_max_size, state_dir=store.config_dir)
        self.producer_state = ProducerStateManager(store.config_dir)
        from gateway_kafka.txn_coordinator import TransactionCoordinator
        self.txn = TransactionCoordinator(self)
        self.partition_locks: dict[tuple[str, int], asyncio.Lock] = defaultdict(asyncio.Lock)
        # under a failover controller: async (broker id or None) -> (ok, reason), asks the
        # controller to elect a master (ElectLeaders); set by the node, None without one
        self.elect_master: Any = None
        self.arrivals: ArrivalHub | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()
        self._snapshot_task: asyncio.Task | None = None
        self._stopping = False

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        from gateway_kafka import recovery

        apis.load_all()
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, recovery.restore_producer_state, self.store, self.producer_state,
                                   self.settings.producer_state_rebuild_max_records)
        self.arrivals = ArrivalHub(loop)
        self.store.add_arrival_listener(self.arrivals.on_arrival)
        await self.txn.start()
        self.coordinator.restore()
        self._server = await asyncio.start_server(self._on_connection, self.settings.host, self.settings.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        host = self.settings.advertised_host or self._default_advertised_host()
        self.cluster = LocalCluster(self.settings.cluster_id, self.settings.node_id, host,
                                    self.settings.advertised_port or self.port, rack=self.settings.broker_rack,
                                    broker_name=self.config.broker.broker_name, broker_id=self.config.broker.broker_id,
                                    local=_local_replication(self.store))
        self._snapshot_task = asyncio.create_task(self._snapshot_loop())
        self.store.role_listeners.append(self._role_changed)
        log.info("kafka_gateway_started", host=self.settings.host, port=self.port, advertised=f"{host}:"
                 f"{self.settings.advertised_port or self.port}", apis=len(apis.REGISTRY))

    def _role_changed(self, role: str, epoch: int) -> None:
        """Failover made this node master (docs/design/failover.md): idempotence state comes from
        the replicated log before the store lets writes in (runs in the role change's thread)."""
        if role == "SLAVE":
            return
        from gateway_kafka import recovery

        # built aside and swapped in whole: the snapshot loop may save the old one meanwhile
        # (and would otherwise move the replay's starting points under it)
        fresh = ProducerStateManager(self.store.config_dir)
        recovery.rebuild_producer_state_on_promotion(self.store, fresh, epoch,
                                                     self.settings.producer_state_rebuild_max_records)
        self.producer_state = fresh

    def _default_advertised_host(self) -> str:
        host = self.settings.host
        if host in ("0.0.0.0", "::", ""):
            return self.config.broker.broker_ip1 or socket.gethostname()
        return host

    async def stop(self) -> None:
        self._stopping = True
        if self._role_changed in self.store.role_listeners:
            self.store.role_listeners.remove(self._role_changed)
        if self._server is not None:
            self._server.close()
        self.coordinator.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.wait(list(self._connections), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
        if self._snapshot_task is not None:
            self._snapshot_task.cancel()
        await self.txn.stop()
        if self.arrivals is not None:
            self.store.remove_arrival_listener(self.arrivals.on_arrival)
        from gateway_kafka import recovery

        await asyncio.get_running_loop().run_in_executor(None, recovery.save_producer_state, self.store,
                                                         self.producer_state)
        log.info("kafka_gateway_stopped", port=self.port)

    async def _snapshot_loop(self) -> None:
        from gateway_kafka import recovery

        loop = asyncio.get_running_loop()
        interval = max(self.settings.producer_state_snapshot_ms, 50) / 1000.0
        while True:
            await asyncio.sleep(interval)
            if self.producer_state.dirty:
                try:
                    await loop.run_in_executor(None, recovery.save_producer_state, self.store, self.producer_state,
                                               self.settings.producer_id_expiration_ms)
                except Exception:
                    log.exception("producer_state_snapshot_failed")

    # -- connections -----------------------------------------------------------------------
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer = writer.get_extra_info("peername") or ("?", 0)
        conn = ConnectionState(str(peer[0]), int(peer[1]))
        sock = writer.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                # clients that vanish without a FIN (power loss, partitions) are found by the
                # kernel's keepalive rather than holding a connection task forever
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:
                pass
        try:
            await self._serve(conn, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection_failed", peer=f"{conn.peer_host}:{conn.peer_port}")
        finally:
            self._connections.discard(task)
            try:
                writer.close()
            except Exception:
                pass

    async def _serve(self, conn: ConnectionState, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        from gateway_kafka.protocol import (MalformedRequestError, UnsupportedVersionError, decode_request,
                                            encode_response_chunks)

        max_bytes = self.settings.socket_request_max_bytes
        sasl_required = bool(self.settings.sasl_mechanisms)
        idle_s = self.settings.connections_max_idle_ms / 1000.0 if self.settings.connections_max_idle_ms > 0 else None
        registry = apis.REGISTRY
        transport = writer.transport
        peer = f"{conn.peer_host}:{conn.peer_port}"
        while not self._stopping:
            try:
                async with asyncio.timeout(idle_s):
                    head = await reader.readexactly(4)
            except asyncio.IncompleteReadError:
                return  # clean close between requests
            except TimeoutError:
                log.info("connection_idle_closed", peer=peer, idle_ms=self.settings.connections_max_idle_ms)
                return
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0 or size > max_bytes:
                log.warning("request_refused", peer=peer, reason="frame_size", size=size, max=max_bytes)
                return
            frame = await reader.readexactly(size)
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
            if sasl_required and conn.authenticated_principal is None and header.api_key not in _PRE_AUTH_APIS:
                log.warning("request_refused", peer=peer, reason="not_authenticated", api_key=header.api_key)
                return
            if header.client_id is not None:
                conn.client_id = header.client_id
            ctx = RequestContext(self, conn, header.api_key, header.api_version, header.correlation_id,
                                 header.client_id)
            body = await spec.handler(ctx, req.body)
            if body is None:
                if conn.extra.pop("close_now", False):
                    return
                continue
            writer.writelines(encode_response_chunks(header.api_key, header.api_version, header.correlation_id, body))
            if conn.extra.get("close_after_response"):
                await writer.drain()
                return
            if transport.get_write_buffer_size() > WRITE_HIGH_WATER:
                await writer.drain()
        # fall through: gateway stopping

    def _api_version_entries(self) -> list[dict]:
        return [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in apis.advertised()]
