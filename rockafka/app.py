"""One all-in-one node: the store, then each listener, torn down in reverse on shutdown.

A component is anything with ``async start()`` / ``async stop()`` and a ``name``; after
``start()`` a listener exposes the port it bound as ``port`` (config port 0 = ephemeral, which
tests use). Shutdown order is the reverse of start order, and the store goes last so that
flush, checkpoint and removal of ``abort`` happen after the last write.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any, Protocol

import structlog

from engine.config import NodeConfig
from engine.store import MessageStore

log = structlog.get_logger("rockafka.node")


class Component(Protocol):
    name: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


def build_components(store: MessageStore, config: NodeConfig) -> list[Any]:
    """The listeners of a node, in start order. Each gateway adds itself here."""
    components: list[Any] = []
    # -- native gateway (NameServer first: the broker registers with it) --
    from gateway_native.broker import Broker
    from gateway_native.namesrv import NameServer

    namesrv = NameServer(config.host, config.namesrv_port,
                         kv_config_path=store.config_dir / "namesrv_kvConfig.json",
                         broker_expired_ms=config.extra_int("broker_channel_expired_time", 120_000),
                         scan_interval_ms=config.extra_int("namesrv_scan_interval", 5_000))
    own_host = "127.0.0.1" if config.host in ("0.0.0.0", "::", "") else config.host
    components.append(namesrv)
    broker = Broker(store, config, namesrv_resolver=lambda: [f"{own_host}:{namesrv.port}"])
    components.append(broker)
    # -- kafka gateway --
    from gateway_kafka.server import KafkaGateway

    kafka = KafkaGateway(store, config)
    components.append(kafka)
    # a native offset reset must not rewind a Kafka group that has live members
    broker.foreign_group_state = kafka.coordinator.state_of
    # -- the broker group: what each member tells the NameServer, and the Kafka view built from it --
    from .group import GroupViewRefresher, registration_extras

    broker.registration_extras = lambda: registration_extras(store, config, kafka)
    if broker.replicas is not None:  # Kafka's ElectLeaders asks the failover controller
        kafka.elect_master = broker.replicas.elect
    components.append(GroupViewRefresher(broker, kafka, config.extra_int("cluster_view_refresh_ms", 1000)))
    # -- RocketMQ 5 gRPC proxy front --
    from gateway_grpc.server import GrpcGateway

    grpc = GrpcGateway(store, config)
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
                                   "broker": lambda: native_view.connection_count(broker)},
                      node_info=node_info,
                      # the NameServers the broker registers with (a group's shared one when namesrvAddr is set)
                      namesrv_addr=lambda: (broker.namesrv_addrs() or [f"{own_host}:{namesrv.port}"])[0])
    components.append(AdminHttp(store, config, views))
    return components


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
        await loop.run_in_executor(None, self.store.start)
        self.components = build_components(self.store, self.config)
        started: list[Any] = []
        try:
            for comp in self.components:
                await comp.start()
                started.append(comp)
        except BaseException:
            for comp in reversed(started):
                await comp.stop()
            await loop.run_in_executor(None, self.store.shutdown)
            raise
        ports = {c.name: getattr(c, "port", None) for c in self.components}
        log.info("node_ready", data_dir=self.config.data_dir, host=self.config.host, **{f"{k}_port": v for k, v in ports.items()})

    async def stop(self) -> None:
        loop = asyncio.get_running_loop()
        for comp in reversed(self.components):
            try:
                await comp.stop()
            except Exception:  # keep tearing down; the store must still close cleanly
                log.exception("component_stop_failed", component=comp.name)
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
