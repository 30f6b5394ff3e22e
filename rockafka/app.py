"""One all-in-one node: the store, then each listener, torn down in reverse on shutdown.

A component is anything with ``async start()`` / ``async stop()`` and a ``name``; after
``start()`` a listener exposes the port it bound as ``port`` (config port 0 = ephemeral, which
tests use). Shutdown order is the reverse of start order, and the store goes last so that
flush, checkpoint and removal of ``abort`` happen after the last write.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from typing import Any, Protocol

import structlog

from engine.config import NodeConfig
from broker.listener_limits import ListenerGuard
from broker.put_path import PutPath
from broker.replication import Replication
from broker.send_queue import SendQueue
from engine.errors import StoreError
from engine.store import MessageStore

from .loop_thread import OwnLoop

log = structlog.get_logger("rockafka.node")


class Component(Protocol):
    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def build_components(store: MessageStore, config: NodeConfig) -> list[Any]:
    """The listeners of a node, in start order. Each gateway adds itself here."""
    components: list[Any] = []
    # one set of connection and request-memory limits for the listeners on the node's loop (the
    # NameServer, on a loop of its own, has a sibling guard: its own timer and request budget,
    # the same node-wide connection counts), and one send queue (flow control) for the writes
    # of both protocols
    guard = ListenerGuard(config.limits)
    put_path = PutPath(store, SendQueue.from_config(config.broker))  # the one put path of every gateway
    # -- native gateway (NameServer first: the broker registers with it) --
    from gateway_native.broker import Broker
    from gateway_native.namesrv import NameServer

    namesrv = NameServer(config.host, config.namesrv_port,
                         kv_config_path=store.config_dir / "namesrv_kvConfig.json",
                         broker_expired_ms=config.extra_int("broker_channel_expired_time", 120_000),
                         scan_interval_ms=config.extra_int("namesrv_scan_interval", 5_000),
                         guard=guard.sibling())
    own_host = "127.0.0.1" if config.host in ("0.0.0.0", "::", "") else config.host
    # its own loop and thread: a route query never waits behind broker or Kafka work
    components.append(OwnLoop(namesrv))
    broker = Broker(store, config, namesrv_resolver=lambda: [f"{own_host}:{namesrv.port}"], guard=guard,
                    put_path=put_path)
    components.append(broker)
    # -- security: one model every listener asks (docs/design/security.md) --
    from engine import security as engine_security
    from gateway_native.security import secure_server

    security = engine_security.for_store(store, config)
    secure_server(namesrv.server, security, config)
    if config.security.authentication_enabled:
        # users of other broker groups registering here are checked by their own masters
        from gateway_native.namesrv import BrokerAuthDelegate

        namesrv.server.gate.delegate = BrokerAuthDelegate(namesrv, config)
    secure_server(broker.server, security, config)
    # -- kafka gateway --
    from gateway_kafka.server import KafkaGateway

    kafka = KafkaGateway(store, config, guard=guard, put_path=put_path)
    components.append(kafka)
    # a native offset reset must not rewind a Kafka group that has live members
    broker.foreign_group_state = kafka.coordinator.state_of
    # -- the broker group: what each member tells the NameServer, and the Kafka view built from it --
    from .group import GroupViewRefresher, ha_runtime_fields, registration_extras

    broker.registration_extras = lambda: registration_extras(store, config, kafka)
    broker.runtime_info_providers.append(lambda: ha_runtime_fields(store.ha.runtime_info()))
    if broker.replicas is not None:  # Kafka's ElectLeaders asks the failover controller
        kafka.elect_master = broker.replicas.elect
    refresher = GroupViewRefresher(broker, kafka, config.extra_int("cluster_view_refresh_ms", 1000))
    components.append(refresher)
    # -- the cluster: Kafka topics placed over every group, coordinators where their state is (cluster.md) --
    from .cluster_ops import CoordinatorPlacementWatch, RemoteGroups

    kafka.remote_groups = RemoteGroups(broker, refresh_view=refresher.refresh, view_refresh_s=refresher.interval)
    refresher.on_refresh.append(CoordinatorPlacementWatch(broker, kafka).check)
    # -- RocketMQ 5 gRPC proxy front --
    from gateway_grpc.server import GrpcGateway

    grpc = GrpcGateway(store, config, guard=guard, put_path=put_path)
    components.append(grpc)
    # -- admin http: sees the gateways only through these read-only views --
    from gateway_kafka import ops_view as kafka_view
    from gateway_native import ops_view as native_view

    from .admin_http import AdminHttp
    from .admin_state import NodeViews

    def node_info() -> dict[str, Any]:
        return {"cluster_name": config.broker.broker_cluster_name, "broker_name": config.broker.broker_name,
                "broker_id": config.broker.broker_id, "role": config.store.broker_role,
                "data_dir": config.data_dir, "started_ms": int(broker.started_at * 1000),
                "replication": store.ha.runtime_info(),
                "listeners": {"kafka": f"{kafka.cluster.self_node.host}:{kafka.cluster.self_node.port}" if kafka.cluster else "",
                              "broker": broker.addr, "namesrv": f"{own_host}:{namesrv.port}"}}

    views = NodeViews(group_views=[lambda: kafka_view.group_views(kafka), lambda: native_view.group_views(broker)],
                      connections={"kafka": lambda: kafka_view.connection_count(kafka),
                                   "broker": lambda: native_view.connection_count(broker),
                                   # on its own loop: reading its table's size from here is safe
                                   "namesrv": lambda: native_view.connection_count(namesrv),
                                   "admin": lambda: guard.book.per_listener["admin"],
                                   "grpc": lambda: guard.book.per_listener["grpc"]},
                      node_info=node_info,
                      # the NameServers the broker registers with (a group's shared one when namesrvAddr is set)
                      namesrv_addr=lambda: (broker.namesrv_addrs() or [f"{own_host}:{namesrv.port}"])[0])
    components.append(AdminHttp(store, config, views, guard=guard, send_queue=put_path.send_queue))
    components.insert(0, _SharedServices(put_path))  # started first, stopped after every listener
    # -- the remote tier (docs/design/tiered-storage.md): before the listeners serve reads of it --
    from broker import tiered

    tier = tiered.tier_of(store)
    if tier is not None:
        components.insert(1, tiered.TieredService(tier))
    return components


class _SharedServices:
    """What the listeners share and nobody else stops: the put path's send-queue threads."""

    name = "shared"

    def __init__(self, put_path: PutPath):
        self.put_path = put_path

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        await asyncio.get_running_loop().run_in_executor(None, self.put_path.shutdown)


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def warn_if_open(config: NodeConfig, components: list[Any]) -> None:
    """Say loudly, once at start, which listeners anyone on the network may use as they like."""
    sec = config.security
    open_listeners = []
    if not sec.authentication_enabled and not _loopback(config.host):
        open_listeners += [f"{c.name}:{config.host}:{getattr(c, 'port', '?')}" for c in components
                           if c.name in ("namesrv", "broker", "grpc_proxy") and getattr(c, "port", None)]
        open_listeners.append(f"ha:{config.host}:{config.ha_port}")
    kafka = next((c for c in components if c.name == "kafka"), None)
    if kafka is not None and not (sec.authorization_enabled or sec.super_users):
        for spec in kafka.settings.listeners:
            if not spec.sasl and not _loopback(spec.host):
                open_listeners.append(f"kafka/{spec.name}:{spec.host}:{kafka.listener_ports.get(spec.name)}")
    if not sec.authentication_enabled and not _loopback(sec.admin_host):
        open_listeners.append(f"admin:{sec.admin_host}:{config.admin_port}")
    if open_listeners:
        log.warning("security_disabled_on_network", listeners=",".join(open_listeners),
                    hint="anyone who can reach these may read, write and delete: set authenticationEnabled=true "
                         "and authorizationEnabled=true (docs/design/security.md), or listen on 127.0.0.1")


def secure_replication(store: MessageStore, config: NodeConfig) -> None:
    """The HA port under the node's security (docs/design/security.md): TLS as tlsServerMode
    says, a slave's HELLO signed with the inner credentials (or a client certificate) of a
    principal allowed CLUSTER_ACTION; required when authenticationEnabled."""
    from engine import security as engine_security
    from broker import tls as sec_tls

    ha = store.ha
    sec_cfg = config.security
    mode = sec_tls.tls_mode(config)
    if mode != "disabled":
        ha.tls_server = (mode, sec_tls.server_context(config, config.broker.broker_ip1 or config.host))
        mapper = sec_tls.PrincipalMapper(sec_cfg.ssl_principal_mapping_rules)
        ha.cert_principal = lambda sock: sec_tls.peer_principal(sock if hasattr(sock, "getpeercert") else None, mapper)
    if sec_cfg.tls_enable:
        ha.tls_client = sec_tls.client_context(config)
    ha.auth_required = sec_cfg.authentication_enabled

    def service() -> engine_security.SecurityService:
        return engine_security.for_store(store, config)

    def verify(identity: bytes, auth: Any) -> tuple[str | None, str]:
        principal, why = service().verify_hello(identity, auth)
        if principal is None and (auth is not None or sec_cfg.authentication_enabled):
            service().failed("ha", "bad_signature" if auth is not None else "not_authenticated", "slave", why=why)
        return principal, why

    ha.hello_verifier = verify
    ha.may_replicate = lambda principal: service().authorize_cluster(principal, engine_security.Operation.CLUSTER_ACTION)
    inner = engine_security.parse_pair(sec_cfg.inner_client_authentication_credentials, "accessKey", "secretKey")
    if inner is not None:
        ha.hello_signer = lambda identity: engine_security.hello_signature(inner, identity)


def raise_open_files_limit() -> None:
    """Lift the soft limit on open files to the hard limit, as Go's runtime does for servers.

    Every consume-queue segment is a mapped file holding one descriptor, so a
    node with thousands of queues needs far more than the common soft default of 1024.
    """
    try:
        import resource
    except ImportError:  # not a POSIX system
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        log.info("open_files_limit_raised", soft_before=soft, soft=target, hard=hard)
    except (ValueError, OSError) as exc:
        log.warning("open_files_limit_not_raised", soft=soft, hard=hard, error=str(exc))


class Node:
    def __init__(self, config: NodeConfig):
        self.config = config
        if config.broker.broker_ip1 is None and config.host in ("0.0.0.0", "::", ""):
            # RocketMQ's default brokerIP1: the machine's own address, so that the NameServer
            # routes, message ids (store host) and Kafka metadata send remote clients here
            from gateway_native.broker import local_address

            config.broker.broker_ip1 = local_address()
        sec = config.security
        if (sec.authentication_enabled or sec.authorization_enabled) and not sec.inner_client_authentication_credentials:
            # the node's own broker must still register with its own NameServer: a credential
            # for this process alone (a broker group needs the same one configured on every node)
            import secrets

            sec.inner_client_authentication_credentials = f"node-{secrets.token_hex(4)}:{secrets.token_urlsafe(24)}"
            log.info("inner_credentials_generated",
                     hint="set innerClientAuthenticationCredentials (the same on every node) for broker groups")
        from broker.tls import tls_mode

        if tls_mode(config) == "enforcing" and not sec.tls_enable and not config.broker.namesrv_addr:
            # the broker registers with this node's own NameServer, which takes TLS only: its
            # own connections speak TLS too (RocketMQ would need tls.enable for that)
            sec.tls_enable = True
            log.info("tls_enable_implied", reason="tlsServerMode=enforcing and the node's own NameServer")
        self.store = MessageStore(config.store, broker_config=config.broker)
        if config.broker.enable_controller_mode:
            # the controller says who leads (docs/design/failover.md): start as a slave that knows
            # no master; brokerRole only says which master this broker becomes when elected
            config.store.broker_role = "SLAVE"
        self.components: list[Any] = []
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        raise_open_files_limit()
        loop = asyncio.get_running_loop()
        from .group import ha_identity

        self.store.ha.bind_host = self.config.host
        self.store.ha.identity = ha_identity(self.config)
        secure_replication(self.store, self.config)
        Replication(self.store).read_acks_on(loop)  # slaves' ACKs answer SYNC_MASTER sends on this loop
        from broker import tiered

        tiered.prepare(self.store, self.config.store)  # its guard holds retention until it has loaded
        try:
            await loop.run_in_executor(None, self.store.start)
        except BaseException:
            # failed after the store opened (the HA port in use, ...): close it cleanly, so the
            # next start finds no `abort` and runs no crash recovery
            await loop.run_in_executor(None, self.store.shutdown)
            raise
        self.components = build_components(self.store, self.config)
        started: list[Any] = []
        try:
            for comp in self.components:
                await comp.start()
                started.append(comp)
            self._check_registered()
        except BaseException:
            for comp in reversed(started):
                await comp.stop()
            await loop.run_in_executor(None, self.store.shutdown)
            raise
        warn_if_open(self.config, self.components)
        # Everything built so far (modules, tables, the components) lives as long as the node:
        # moved out of the cyclic collector's reach, a full collection later only walks what
        # was created since -- under 1 ms instead of 10-100 ms that held every request up
        # (refcounting still frees these objects; only cycles among them would stay).
        gc.collect()
        gc.freeze()
        ports = {c.name: getattr(c, "port", None) for c in self.components}
        log.info("node_ready", data_dir=self.config.data_dir, host=self.config.host, **{f"{k}_port": v for k, v in ports.items()})

    def _check_registered(self) -> None:
        """A lone node (no ``namesrvAddr``) is ready only once its broker is in its own
        NameServer's routes: otherwise no RocketMQ client could find it (e.g. TLS or
        credentials the NameServer refuses); the node stops with the reason instead."""
        if self.config.broker.namesrv_addr:
            return
        from gateway_native.namesrv import NameServer

        names = [getattr(c, "component", c) for c in self.components]
        ns = next((c for c in names if isinstance(c, NameServer)), None)
        if ns is None or self.config.broker.enable_controller_mode:
            return
        if self.config.broker.broker_name not in ns.routes.broker_addr_table:
            raise StoreError(f"the broker could not register with this node's own NameServer (see "
                             f"register_broker_refused/register_broker_failed above): check "
                             f"tlsServerMode/tlsEnable and innerClientAuthenticationCredentials")

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        # first: no retention pass once the components below take their retention guards away
        await loop.run_in_executor(None, self.store.stop_retention)
        for comp in reversed(self.components):
            try:
                await comp.stop()
            except Exception:  # keep tearing down; the store must still close cleanly
                log.exception("component_stop_failed", component=comp.name)
        security = getattr(self.store, "_security_service", None)
        if security is not None:
            security.stop()  # its arrival listener and retention guard go with it
        await loop.run_in_executor(None, self.store.shutdown)
        log.info("node_stopped", data_dir=self.config.data_dir)

    def request_stop(self) -> None:
        self._stopped.set()

    async def run_until_signal(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        await self.start()
        try:
            await self._stopped.wait()
            log.info("shutdown_requested")
        finally:
            await self.stop()
