"""The native broker endpoint: remoting server + the state its processors share.

Owns:
- ``ConsumerManager``: per consumer group, the live client channels (client id -> connection,
  last heartbeat) and the group's subscriptions, consume type, message model and
  consume-from-where, as the latest heartbeat announced them. Group membership changes notify
  every member (NOTIFY_CONSUMER_IDS_CHANGED, oneway) so they rebalance at once.
- ``ProducerManager``: producer group -> client channels (transaction check-back targets).
- ``PullHoldService``: held long-polling pulls, woken by the store's arrival listener (called
  from the store's dispatch thread; wake-ups hop onto the event loop) or by their deadline.
- registration with every configured NameServer every ``register_name_server_period`` ms and
  at once when topics change.

Invariants: a channel not heard from within ``channel_expired_ms`` (120 s) or whose connection
closed leaves its groups; the store is only touched through ``engine.store.MessageStore``;
blocking store writes go through an executor so the event loop keeps serving reads.
"""

from __future__ import annotations

import asyncio
import json
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker.put_path import PutStatus
from broker.replication import Replication
from broker.send_queue import SendQueueBusy
from engine.topic_config import PERM_INHERIT, PERM_READ, PERM_WRITE

from . import broker_stats
from .addresses import interface_addresses, local_address  # noqa: F401  (re-exported)
from .channels import ClientChannel, topic_config_json
from .dispatch import RemotingServer
from .remoting.codes import RequestCode as RC, ResponseCode as R
from .remoting.command import RemotingCommand
from .subscription import SubscriptionData
from .transport import Connection, ConnectionClosedError, RemotingTimeoutError, open_connection

log = structlog.get_logger("rockafka.native.broker")

AUTO_CREATE_TOPIC_KEY_TOPIC = "TBW102"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str = "CONSUME_PASSIVELY"
    message_model: str = "CLUSTERING"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    channels: dict[str, ClientChannel] = field(default_factory=dict)
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return sorted(self.channels)


class ConsumerManager:
    def __init__(self, broker: "Broker"):
        self.broker = broker
        self.groups: dict[str, ConsumerGroupInfo] = {}

    def register(self, group: str, channel: ClientChannel, consume_type: str, message_model: str,
                 consume_from_where: str, subs: list[SubscriptionData]) -> None:
        info = self.groups.get(group)
        if info is None:
            info = self.groups[group] = ConsumerGroupInfo(group)
        info.consume_type, info.message_model, info.consume_from_where = consume_type, message_model, consume_from_where
        old = info.channels.get(channel.client_id)
        members_changed = old is None or old.conn is not channel.conn
        info.channels[channel.client_id] = channel
        new_subs = {s.topic: s for s in subs}
        subs_changed = set(new_subs) != set(info.subscriptions) or any(
            info.subscriptions[t].sub_string != s.sub_string or info.subscriptions[t].expression_type != s.expression_type
            for t, s in new_subs.items())
        for topic, sd in new_subs.items():
            cur = info.subscriptions.get(topic)
            # keep the newest version a client announced
            if cur is None or sd.sub_version >= cur.sub_version or subs_changed:
                info.subscriptions[topic] = sd
        for topic in list(info.subscriptions):
            if topic not in new_subs:
                del info.subscriptions[topic]
        if members_changed:
            log.info("consumer_registered", group=group, client_id=channel.client_id, members=len(info.channels))
            self.notify(group)
        elif subs_changed:
            self.notify(group)

    def unregister(self, group: str, client_id: str, reason: str) -> None:
        info = self.groups.get(group)
        if info is None or client_id not in info.channels:
            return
        del info.channels[client_id]
        log.info("consumer_unregistered", group=group, client_id=client_id, reason=reason, members=len(info.channels))
        if not info.channels:
            del self.groups[group]
        else:
            self.notify(group)

    def connection_closed(self, conn: Connection) -> None:
        for group, info in list(self.groups.items()):
            for cid, ch in list(info.channels.items()):
                if ch.conn is conn:
                    self.unregister(group, cid, "connection_closed")

    def expire(self, max_age_s: float) -> None:
        now = time.monotonic()
        for group, info in list(self.groups.items()):
            for cid, ch in list(info.channels.items()):
                if now - ch.last_update > max_age_s:
                    ch.conn.close()
                    self.unregister(group, cid, "expired")

    def notify(self, group: str) -> None:
        info = self.groups.get(group)
        if info is None:
            return
        for ch in list(info.channels.values()):
            cmd = RemotingCommand.request(RC.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, oneway=True)
            cmd.language = 0  # JAVA: the broker speaks as Apache RocketMQ's does
            cmd.serialize_type = self.broker.serialize_type
            try:
                ch.conn.send(cmd)
            except ConnectionClosedError:
                pass


class ProducerManager:
    def __init__(self) -> None:
        self.groups: dict[str, dict[str, ClientChannel]] = {}

    def register(self, group: str, channel: ClientChannel) -> None:
        self.groups.setdefault(group, {})[channel.client_id] = channel

    def unregister(self, group: str, client_id: str) -> None:
        chans = self.groups.get(group)
        if chans is not None:
            chans.pop(client_id, None)
            if not chans:
                del self.groups[group]

    def connection_closed(self, conn: Connection) -> None:
        for group, chans in list(self.groups.items()):
            for cid, ch in list(chans.items()):
                if ch.conn is conn:
                    self.unregister(group, cid)

    def expire(self, max_age_s: float) -> None:
        now = time.monotonic()
        for group, chans in list(self.groups.items()):
            for cid, ch in list(chans.items()):
                if now - ch.last_update > max_age_s:
                    self.unregister(group, cid)


class PullHoldService:
    """Waiters per (topic, queue id), woken when the store reports new messages there."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def on_arrival(self, topic: str, queue_id: int, max_offset: int, *_: Any) -> None:
        """Store arrival listener; runs on the thread that put (the loop for an inline put)."""
        loop = self._loop
        if loop is not None and (topic, queue_id) in self._waiters:
            if asyncio._get_running_loop() is loop:
                self._wake(topic, queue_id)
                return
            try:
                loop.call_soon_threadsafe(self._wake, topic, queue_id)
            except RuntimeError:  # loop closed during shutdown
                pass

    def _wake(self, topic: str, queue_id: int) -> None:
        for ev in self._waiters.get((topic, queue_id), ()):
            ev.set()

    def waiter(self, topic: str, queue_id: int, ev: asyncio.Event | None = None) -> asyncio.Event:
        """An event set on the next arrival at (topic, queue); pass ``ev`` to share one event
        between several queues (a POP of every queue of a topic)."""
        ev = asyncio.Event() if ev is None else ev
        self._waiters.setdefault((topic, queue_id), set()).add(ev)
        return ev

    def remove(self, topic: str, queue_id: int, ev: asyncio.Event) -> None:
        s = self._waiters.get((topic, queue_id))
        if s is not None:
            s.discard(ev)
            if not s:
                del self._waiters[(topic, queue_id)]

    def wake_all(self) -> None:
        for s in self._waiters.values():
            for ev in s:
                ev.set()

    @property
    def held(self) -> int:
        return sum(len(s) for s in self._waiters.values())


class Broker:
    """The broker component: ``name="broker"``, ``port`` after ``start``."""

    name = "broker"

    def __init__(self, store: Any, config: Any, *, namesrv_addrs: list[str] | None = None,
                 namesrv_resolver: Any = None, guard: Any = None, put_path: Any = None):
        self.store = store
        self.config = config
        self.broker_config = config.broker
        self.host = config.host
        from .processors import BROKER_PROCESSORS  # the table imports this module's types

        from broker.listener_limits import ListenerGuard

        self.server = RemotingServer("broker", config.host, config.broker_port, BROKER_PROCESSORS, self,
                                     guard=guard or ListenerGuard(config.limits))
        self.serialize_type = 1 if str(self.broker_config.serialize_type).upper() == "ROCKETMQ" else 0
        self.consumers = ConsumerManager(self)
        self.producers = ProducerManager()
        self.pull_hold = PullHoldService()
        self._namesrv_addrs = namesrv_addrs
        self._namesrv_resolver = namesrv_resolver  # callable -> list[str], for the node's own NameServer
        self._namesrv_conns: dict[str, Connection] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._register_now = asyncio.Event()
        # extra registration facts (Kafka listener, rack, replication state) the node adds:
        # a callable -> dict, sent as the body's "rockafka" object (docs/design/replication.md)
        self.registration_extras: Any = None
        # SYNC_MASTER sends wait for the slaves' acks in these threads: more of them, so one
        # round trip to the slaves does not cap the whole broker at four sends in flight
        workers = 32 if getattr(store, "master_role", config.store.broker_role) == "SYNC_MASTER" else 4
        self.executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="broker-store")
        # the node's one put path (write scheduling, flow control: broker.put_path); its own when
        # the broker is started alone
        from broker.put_path import PutPath

        self.writes, self._owns_writes = PutPath.for_gateway(store, config, put_path)
        self.replication = Replication(store)
        self.channel_expired_ms = config.extra_int("channel_expired_timeout", 120_000)
        self.short_polling_ms = config.extra_int("short_polling_time_mills", 1000)
        self.data_version_counter = 0
        self._data_version = (-1, 0)  # (counter, timestamp of its last change)
        self.state_version = int(time.time() * 1000)
        self.started_at = time.time()
        # callables returning extra GET_BROKER_RUNTIME_INFO fields (e.g. replication state)
        self.runtime_info_providers: list[Any] = []
        # controller mode (docs/design/failover.md): roles come from the failover controller
        self.replicas: Any = None
        if self.broker_config.enable_controller_mode:
            from .replicas_manager import ReplicasManager

            self.replicas = ReplicasManager(self)

    # -- identity -----------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self.server.port

    @property
    def advertised_ip(self) -> str:
        """brokerIP1, else the listen address; on a wildcard listen address, this machine's
        own address as RocketMQ picks it (clients elsewhere must be able to reach it)."""
        ip = self.broker_config.broker_ip1 or self.host
        if ip not in ("0.0.0.0", "", "::"):
            return ip
        return local_address()

    @property
    def addr(self) -> str:
        return f"{self.advertised_ip}:{self.port}"

    @property
    def is_master_only(self) -> bool:
        """No slave serves reads (slaveReadEnable off), so pulls are never redirected to one."""
        return not (self.broker_config.slave_read_enable or self.config.extra_bool("slave_read_enable", False))

    @property
    def is_master(self) -> bool:
        """The store's role decides (it may change at run time), not the configured id."""
        return not self.store.is_slave

    def registered_broker_id(self) -> int:
        """brokerId in NameServer registrations: the configured one, or in controller mode 0
        while this broker is the master with a valid lease, else its own id."""
        if self.replicas is not None:
            return self.replicas.registered_broker_id()
        return self.broker_config.broker_id

    def on_role_changed(self) -> None:
        """The controller made this broker master or slave: tell the NameServers at once."""
        self.state_version = int(time.time() * 1000)
        self._register_now.set()
        self.pull_hold.wake_all()

    @property
    def ha_server_addr(self) -> str:
        port = Replication(self.store).listen_port or self.config.ha_port
        return f"{self.advertised_ip}:{port}"

    def namesrv_addrs(self) -> list[str]:
        if self._namesrv_addrs is not None:
            return self._namesrv_addrs
        if self.broker_config.namesrv_addr:
            return [a.strip() for a in str(self.broker_config.namesrv_addr).split(";") if a.strip()]
        if self._namesrv_resolver is not None:
            return list(self._namesrv_resolver())
        return []

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self.pull_hold.bind(loop)
        self.ensure_system_topics()
        self.store.add_arrival_listener(self.pull_hold.on_arrival)
        broker_stats.for_broker(self)  # counts puts from here on (mqadmin clusterList, statsAll)
        self.server.on_connection_closed.append(self.consumers.connection_closed)
        # a topic created by the Kafka gateway or the console is routed at once: a native producer
        # must not fall back to TBW102's queue count for a topic that exists with fewer queues
        self.store.topic_config.change_listeners.append(
            lambda: loop.call_soon_threadsafe(self._register_now.set) if not loop.is_closed() else None)
        self.server.on_connection_closed.append(self.producers.connection_closed)
        await self.server.start()
        self._tasks.append(asyncio.ensure_future(self._register_loop()))
        self._tasks.append(asyncio.ensure_future(self._scan_loop()))
        from .processors.transaction import check_loop  # half messages left open are checked after a restart too
        self._tasks.append(asyncio.ensure_future(check_loop(self)))
        await self.register_all(first=True)
        if self.replicas is not None:
            self.replicas.start()

    async def stop(self) -> None:
        if self.replicas is not None:
            await self.replicas.stop()
        try:
            self.store.remove_arrival_listener(self.pull_hold.on_arrival)
        except Exception:  # the store may already be gone
            pass
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        await self.unregister_all()
        for conn in self._namesrv_conns.values():
            conn.close()
        self.pull_hold.wake_all()
        await self.server.stop()
        self.executor.shutdown(wait=True)
        if self._owns_writes:
            self.writes.shutdown()

    def ensure_system_topics(self) -> None:
        from engine.topic_config import TopicConfig

        tcm = self.store.topic_config
        if self.broker_config.auto_create_topic_enable and tcm.get(AUTO_CREATE_TOPIC_KEY_TOPIC) is None:
            n = self.broker_config.default_topic_queue_nums
            tcm.create_or_update(TopicConfig(AUTO_CREATE_TOPIC_KEY_TOPIC, read_queue_nums=n, write_queue_nums=n,
                                             perm=PERM_READ | PERM_WRITE | PERM_INHERIT))
        # message trace (enableMsgTrace clients write here, mqadmin queryMsgTraceById reads it):
        # present from the start, as RocketMQ's traceTopicEnable=true makes it
        if self.config.extra_bool("trace_topic_enable", True) and tcm.get(TRACE_TOPIC) is None:
            tcm.create_or_update(TopicConfig(TRACE_TOPIC, read_queue_nums=1, write_queue_nums=1,
                                             perm=PERM_READ | PERM_WRITE))

    # -- NameServer registration -------------------------------------------------------------
    def request_registration(self) -> None:
        """Register with every NameServer at once (what this broker registers changed)."""
        self._register_now.set()

    def topics_changed(self) -> None:
        self.data_version_counter += 1
        self._register_now.set()

    def register_body(self) -> bytes:
        topics = {name: topic_config_json(tc) for name, tc in self.store.topic_config.all().items()}
        counter = self.data_version_counter + int(getattr(getattr(self.store.topic_config, "data_version", None), "counter", 0))
        if counter != self._data_version[0]:
            # RocketMQ's DataVersion: the timestamp is when the topic set last changed, so an
            # unchanged broker re-registers with an equal version (and a NameServer keeps what
            # an operator changed there, e.g. wipeWritePerm)
            self._data_version = (counter, int(time.time() * 1000))
        body = {"topicConfigSerializeWrapper": {
            "topicConfigTable": topics,
            "dataVersion": {"stateVersion": self.state_version, "timestamp": self._data_version[1], "counter": counter}},
            "filterServerList": []}
        if self.registration_extras is not None:
            try:
                body["rockafka"] = self.registration_extras()
            except Exception:
                log.exception("registration_extras_failed")
        return json.dumps(body, separators=(",", ":")).encode()

    async def _namesrv_conn(self, addr: str) -> Connection:
        conn = self._namesrv_conns.get(addr)
        if conn is None or conn.closed:
            from .security import node_client_options

            conn = await open_connection(addr, None, timeout=3.0, **node_client_options(self.config))
            self._namesrv_conns[addr] = conn
        return conn

    async def register_all(self, first: bool = False) -> None:
        body = self.register_body()
        fields = {"brokerAddr": self.addr, "brokerId": self.registered_broker_id(),
                  "brokerName": self.broker_config.broker_name, "clusterName": self.broker_config.broker_cluster_name,
                  "haServerAddr": self.ha_server_addr, "compressed": False,
                  "bodyCrc32": zlib.crc32(body) & 0x7FFFFFFF}
        timeout = self.broker_config.register_broker_timeout_mills / 1000

        async def one(addr: str) -> None:
            try:
                conn = await self._namesrv_conn(addr)
                resp = await conn.invoke(RemotingCommand.request(RC.REGISTER_BROKER, fields, body, language=0), timeout)
                if resp.code != R.SUCCESS:
                    log.warning("register_broker_refused", namesrv=addr, code=resp.code, remark=resp.remark)
                    return
                if first:
                    log.info("register_broker_ok", namesrv=addr, broker_addr=self.addr)
                # a slave learns its master from the answer, as RocketMQ's do (in controller mode the
                # controller names the master; a NameServer may still list the old one)
                if not self.is_master and self.replicas is None:
                    master_ha = resp.ext_fields.get("haServerAddr") if resp.ext_fields else None
                    if master_ha:
                        Replication(self.store).update_master_address(str(master_ha))
            except (ConnectionClosedError, RemotingTimeoutError, OSError, ValueError) as exc:
                log.warning("register_broker_failed", namesrv=addr, error=str(exc))
        await asyncio.gather(*(one(a) for a in self.namesrv_addrs()))

    async def cluster_info(self) -> dict[str, Any] | None:
        """GET_BROKER_CLUSTER_INFO from the first NameServer that answers (None when none does):
        the node builds its Kafka cluster view from it (members, listeners, roles, in-sync sets)."""
        from .namesrv import decode_route_json

        for addr in self.namesrv_addrs():
            try:
                conn = await self._namesrv_conn(addr)
                resp = await conn.invoke(RemotingCommand.request(RC.GET_BROKER_CLUSTER_INFO, {}, language=0), 3.0)
                if resp.code == R.SUCCESS and resp.body:
                    return decode_route_json(bytes(resp.body))
            except (ConnectionClosedError, RemotingTimeoutError, OSError, ValueError):
                continue
        return None

    async def unregister_all(self) -> None:
        fields = {"brokerAddr": self.addr, "brokerId": self.registered_broker_id(),
                  "brokerName": self.broker_config.broker_name, "clusterName": self.broker_config.broker_cluster_name}
        for addr in self.namesrv_addrs():
            conn = self._namesrv_conns.get(addr)
            if conn is None or conn.closed:
                continue
            try:
                await conn.invoke(RemotingCommand.request(RC.UNREGISTER_BROKER, fields, language=0), 2.0)
            except (ConnectionClosedError, RemotingTimeoutError, OSError):
                pass

    def _ha_state_version(self) -> int:
        return Replication(self.store).state_version

    def _knows_master(self) -> bool:
        info = Replication(self.store).runtime_info()
        return bool(info.get("masterAddress"))

    def _store_topics_version(self) -> int:
        return int(getattr(getattr(self.store.topic_config, "data_version", None), "counter", 0))

    async def _register_loop(self) -> None:
        period = max(self.broker_config.register_name_server_period, 100) / 1000
        # topics created elsewhere (the Kafka gateway, admin HTTP) show up within a second
        check = min(period, 1.0)
        seen = self._store_topics_version()
        ha_seen = self._ha_state_version()
        last = time.monotonic()
        while True:
            try:
                await asyncio.wait_for(self._register_now.wait(), check)
            except asyncio.TimeoutError:
                pass
            version = self._store_topics_version()
            ha_version = self._ha_state_version()
            # a slave that does not know its master yet asks every second (the answer names it);
            # a master re-registers when its in-sync slaves change, so routes and ISR follow
            waiting_for_master = not self.is_master and not self._knows_master() and self.replicas is None
            due = (self._register_now.is_set() or version != seen or ha_version != ha_seen
                   or waiting_for_master or time.monotonic() - last >= period)
            if not due:
                continue
            self._register_now.clear()
            seen, ha_seen, last = version, ha_version, time.monotonic()
            try:
                await self.register_all()
            except Exception:
                log.exception("register_broker_loop_failed")

    async def _scan_loop(self) -> None:
        interval = max(1.0, min(10.0, self.channel_expired_ms / 12000))
        while True:
            await asyncio.sleep(interval)
            try:
                self.consumers.expire(self.channel_expired_ms / 1000)
                self.producers.expire(self.channel_expired_ms / 1000)
            except Exception:
                log.exception("channel_scan_failed")

    # -- helpers for processors ----------------------------------------------------------------
    async def run_blocking(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def put(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A store write through the node's put path (broker.put_path): inline under ASYNC_FLUSH
        when it waits for nothing, else through the send queue; one that waited there longer
        than waitTimeMillsInSendQueue is answered SYSTEM_BUSY ``[TIMEOUT_CLEAN_QUEUE]...``
        unstored (RocketMQ's fast failure). Pass ``sync_replicas=False`` when the caller waits
        for the slaves itself (processors/send.py)."""
        try:
            return await self.writes.run(fn, *args, **kwargs)
        except SendQueueBusy as busy:
            from .dispatch import ProcessorError
            from .processors.common import PUT_STATUS

            raise ProcessorError(PUT_STATUS[_SEND_QUEUE_BUSY][0], str(busy)) from None


_SEND_QUEUE_BUSY = PutStatus.SEND_QUEUE_BUSY

