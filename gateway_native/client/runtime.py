"""The client runtime (RocketMQ's ``MQClientInstance``): one event-loop thread, connections,
routes, heartbeats and the requests brokers send to clients.

Owns:
- a private asyncio loop on a daemon thread; the public SDK API is synchronous and hops onto it
  (``call``), async sends complete ``concurrent.futures.Future``s;
- one ``Connection`` per address (NameServers and brokers), reopened on demand;
- topic routes fetched from the NameServers (failing over between them) and refreshed every
  ``poll_name_server_interval`` ms, and at once (``broker_failed``) for the topics of a broker a
  request could not reach or that did not answer, with a back-off per address (0.1 s doubling to
  2 s while it keeps failing, reset by an answer) — so a failover reaches every producer and
  consumer of the runtime as soon as the NameServer names the new master, not at the next poll;
  broker address lookup by name and id;
- heartbeats to every broker of every known route every ``heartbeat_broker_interval`` ms;
- answers to broker requests: NOTIFY_CONSUMER_IDS_CHANGED (rebalance now),
  GET_CONSUMER_RUNNING_INFO (a JSON summary).

Invariants: every remote call has a timeout; a dead connection fails its pending calls at once
(``ConnectionClosedError``) and is replaced on the next call; periodic jobs never die on an
error (logged and retried next period).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import random
import socket
import threading
import time
from typing import Any, Awaitable, Callable, TypeVar

import structlog
from engine.topic_config import PERM_READ, PERM_WRITE

from ..remoting.processor_table import ProcessorTable
from ..remoting.route import decode_route_json
from ..remoting.codes import LanguageCode, RequestCode as RC, ResponseCode as R, SerializeType
from ..remoting.command import RemotingCommand
from ..transport import Connection, ConnectionClosedError, RemotingTimeoutError, open_connection
from .message import MessageQueue, MQBrokerError, MQClientError

log = structlog.get_logger("rockafka.client")
T = TypeVar("T")

CLIENT_PROCESSORS = ProcessorTable("client")


def local_ip() -> str:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"


class ClientRuntime:
    def __init__(self, namesrv_addr: str | list[str], *, instance_name: str | None = None, client_ip: str | None = None,
                 serialize_type: str = "JSON", timeout_ms: int = 3000, poll_name_server_interval: int = 30_000,
                 heartbeat_broker_interval: int = 30_000, unit_name: str | None = None,
                 credentials: tuple[str, str] | None = None, tls: Any = None):
        """``credentials`` = (access key, secret key): every request is signed as the Java
        client's AclClientRPCHook signs it; ``tls``: True (any server certificate, as RocketMQ's
        client by default) or an ``ssl.SSLContext``."""
        addrs = namesrv_addr.split(";") if isinstance(namesrv_addr, str) else list(namesrv_addr)
        self.namesrv_addrs = [a.strip() for a in addrs if a and a.strip()]
        if not self.namesrv_addrs:
            raise MQClientError("no NameServer address given (namesrv_addr='host:port[;host:port]')")
        self.client_ip = client_ip or local_ip()
        self.instance_name = instance_name or f"{os.getpid()}#{random.getrandbits(40)}"
        self.client_id = f"{self.client_ip}@{self.instance_name}" + (f"@{unit_name}" if unit_name else "")
        st = serialize_type.upper()
        if st not in ("JSON", "ROCKETMQ"):
            raise MQClientError(f"serialize_type must be JSON or ROCKETMQ, got {serialize_type!r}")
        self.serialize_type = SerializeType[st]
        self.timeout = timeout_ms / 1000
        self.poll_name_server_interval = poll_name_server_interval / 1000
        self.heartbeat_broker_interval = heartbeat_broker_interval / 1000
        self.routes: dict[str, dict[str, Any]] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        self._conns: dict[str, Connection] = {}
        self._conn_locks: dict[str, asyncio.Lock] = {}
        self._namesrv_index = random.randrange(len(self.namesrv_addrs))
        # address -> (monotonic time of the next allowed route re-read, back-off step): brokers
        # that failed a request since they last answered one
        self._failing: dict[str, tuple[float, float]] = {}
        self._route_refresh: asyncio.Task[None] | None = None
        self._probing: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.producers: dict[str, Any] = {}
        self.consumers: dict[str, Any] = {}
        self._dispatch = CLIENT_PROCESSORS.dispatcher(self)
        self.started = False
        from ..remoting import acl

        self._signer = acl.signer(*credentials) if credentials else None
        if tls is True:
            import ssl

            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        self._ssl = tls or None

    # -- loop thread ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.started:
            return
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name=f"rocketmq-client-{self.instance_name}", daemon=True)
        self._thread.start()
        ready.wait(10)
        self.started = True
        self.call(self._start_jobs())

    async def _start_jobs(self) -> None:
        self._tasks.append(asyncio.ensure_future(self._periodic(self.poll_name_server_interval, self.refresh_routes)))
        self._tasks.append(asyncio.ensure_future(self._periodic(self.heartbeat_broker_interval, self.send_heartbeat_to_all)))

    def shutdown(self) -> None:
        if not self.started or self._loop is None:
            return
        self.started = False

        async def stop() -> None:
            for t in self._tasks:
                t.cancel()
            for c in list(self._conns.values()):
                c.close()
            await asyncio.sleep(0)
        try:
            self.call(stop(), timeout=10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            if self._thread is not None:
                self._thread.join(10)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "client not started"
        return self._loop

    def call(self, coro: Awaitable[T], timeout: float | None = None) -> T:
        """Run ``coro`` on the client loop and wait for it (from any other thread)."""
        if self._loop is None:
            raise MQClientError("the client is not started; call start() first")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)  # type: ignore[arg-type]
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise MQClientError(f"operation did not finish within {timeout}s") from None

    def submit(self, coro: Awaitable[T]) -> "concurrent.futures.Future[T]":
        return asyncio.run_coroutine_threadsafe(coro, self.loop)  # type: ignore[arg-type]

    async def _periodic(self, interval: float, fn: Callable[[], Awaitable[Any]]) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("client_periodic_job_failed", job=fn.__name__, error=str(exc))

    # -- connections ---------------------------------------------------------------------------
    def cached_connection(self, addr: str) -> Connection | None:
        """The open connection to ``addr``, if there is one (none is opened)."""
        conn = self._conns.get(addr)
        return conn if conn is not None and not conn.closed else None

    async def connection(self, addr: str) -> Connection:
        conn = self._conns.get(addr)
        if conn is not None and not conn.closed:
            return conn
        lock = self._conn_locks.setdefault(addr, asyncio.Lock())
        async with lock:
            conn = self._conns.get(addr)
            if conn is None or conn.closed:
                conn = await open_connection(addr, self._dispatch, timeout=self.timeout, ssl_context=self._ssl,
                                             signer=self._signer)
                self._conns[addr] = conn
        return conn

    def request(self, code: int, fields: dict[str, Any] | None = None, body: bytes = b"") -> RemotingCommand:
        return RemotingCommand.request(code, fields, body, language=LanguageCode.PYTHON,
                                       serialize_type=self.serialize_type)

    async def invoke(self, addr: str, cmd: RemotingCommand, timeout: float | None = None) -> RemotingCommand:
        try:
            conn = await self.connection(addr)
            resp = await conn.invoke(cmd, timeout or self.timeout)
        except (ConnectionClosedError, RemotingTimeoutError, OSError):
            self.broker_failed(addr)
            raise
        if self._failing:
            self._failing.pop(addr, None)
        return resp

    # -- following a failover ------------------------------------------------------------------
    def broker_failed(self, addr: str) -> None:
        """A request to ``addr`` failed (no connection, closed, or no answer in time): re-read
        the routes that name it now, then at most once per back-off step while it keeps failing."""
        now = time.monotonic()
        next_at, step = self._failing.get(addr, (0.0, 0.1))
        if now < next_at:
            return
        self._failing[addr] = (now + step, min(step * 2, 2.0))
        if addr in self.namesrv_addrs:
            return
        topics = [t for t, r in self.routes.items()
                  if any(addr in (bd.get("brokerAddrs") or {}).values() for bd in r.get("brokerDatas") or [])]
        if not topics or (self._route_refresh is not None and not self._route_refresh.done()):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._route_refresh = loop.create_task(self._refresh_topics(topics, addr))

    def failing(self, addr: str | None) -> bool:
        """``addr`` failed a request since it last answered one."""
        return addr is not None and addr in self._failing

    def answers_again(self, addr: str) -> bool:
        """Whether ``addr``, which failed, answered since; while it has not, a connection attempt
        is made in the background at most once per back-off step (its success clears the mark)."""
        if addr not in self._failing:
            return True
        next_at, step = self._failing[addr]
        now = time.monotonic()
        if now >= next_at and addr not in self._probing:
            self._failing[addr] = (now + step, min(step * 2, 2.0))
            self._probing.add(addr)
            try:
                asyncio.get_running_loop().create_task(self._probe(addr))
            except RuntimeError:
                self._probing.discard(addr)
        return False

    async def confirm_alive(self, addr: str, timeout: float | None = None) -> None:
        """Before a message is written to ``addr`` after it failed: a heartbeat must be answered.
        A connection alone proves nothing: a broker killed with -9 closes its sockets one by one
        while the kernel tears it down, so a connect can still succeed and the request written on
        it then fails as "closed" (a second failed send for one failover). Raises as ``invoke``
        does; an answer (any code) clears the failing mark."""
        await self.invoke(addr, self.request(RC.HEART_BEAT, None, self.heartbeat_body()), timeout)
        if self._failing.pop(addr, None) is not None:
            log.info("broker_answers_again", broker=addr)

    async def _probe(self, addr: str) -> None:
        try:
            await self.confirm_alive(addr)
        except (ConnectionClosedError, RemotingTimeoutError, OSError):
            pass
        finally:
            self._probing.discard(addr)

    def route_backoff(self, addr: str) -> float:
        """Seconds until ``addr``'s next route re-read is allowed (0: now)."""
        next_at, _ = self._failing.get(addr, (0.0, 0.1))
        return max(0.0, next_at - time.monotonic())

    async def _refresh_topics(self, topics: list[str], addr: str) -> None:
        for topic in topics:
            try:
                await self.update_route(topic)
            except (MQClientError, MQBrokerError) as exc:
                log.info("route_refresh_after_failure_failed", topic=topic, broker=addr, error=str(exc))
        log.info("route_refreshed_after_failure", broker=addr, topics=len(topics))

    async def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> None:
        conn = await self.connection(addr)
        await conn.invoke_oneway(cmd)

    async def invoke_namesrv(self, cmd_factory: Callable[[], RemotingCommand], timeout: float | None = None) -> RemotingCommand:
        last: Exception | None = None
        n = len(self.namesrv_addrs)
        for i in range(n):
            addr = self.namesrv_addrs[(self._namesrv_index + i) % n]
            try:
                resp = await self.invoke(addr, cmd_factory(), timeout)
                self._namesrv_index = (self._namesrv_index + i) % n
                return resp
            except (ConnectionClosedError, RemotingTimeoutError, OSError) as exc:
                last = exc
        raise MQClientError(f"no NameServer reachable ({';'.join(self.namesrv_addrs)}): {last}")

    # -- routes --------------------------------------------------------------------------------
    async def fetch_route(self, topic: str) -> dict[str, Any] | None:
        resp = await self.invoke_namesrv(lambda: self.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}))
        if resp.code == R.TOPIC_NOT_EXIST:
            return None
        if resp.code != R.SUCCESS:
            raise MQBrokerError(resp.code, resp.remark)
        return decode_route_json(resp.body)

    async def update_route(self, topic: str) -> dict[str, Any] | None:
        route = await self.fetch_route(topic)
        if route is None:
            return None
        self.routes[topic] = route
        for bd in route.get("brokerDatas") or []:
            self.broker_addrs[bd["brokerName"]] = {int(k): v for k, v in (bd.get("brokerAddrs") or {}).items()}
        return route

    async def refresh_routes(self) -> None:
        topics = set(self.routes)
        for c in self.consumers.values():
            topics |= set(c.subscribed_topics())
        for p in self.producers.values():
            topics |= set(p.published_topics())
        for topic in topics:
            try:
                route = await self.update_route(topic)
                if route is None:
                    self.routes.pop(topic, None)
            except MQClientError as exc:
                log.warning("route_refresh_failed", topic=topic, error=str(exc))

    async def route(self, topic: str, refresh: bool = False) -> dict[str, Any] | None:
        if refresh or topic not in self.routes:
            return await self.update_route(topic)
        return self.routes[topic]

    def master_addr(self, broker_name: str) -> str | None:
        return self.broker_addrs.get(broker_name, {}).get(0)

    def broker_addr_in_subscribe(self, broker_name: str, broker_id: int = 0) -> str | None:
        addrs = self.broker_addrs.get(broker_name) or {}
        if broker_id in addrs:
            return addrs[broker_id]
        return addrs.get(0) or (next(iter(addrs.values())) if addrs else None)

    @staticmethod
    def publish_queues(topic: str, route: dict[str, Any]) -> list[MessageQueue]:
        masters = {bd["brokerName"] for bd in route.get("brokerDatas") or [] if "0" in {str(k) for k in bd.get("brokerAddrs", {})}}
        out = []
        for qd in sorted(route.get("queueDatas") or [], key=lambda q: q["brokerName"]):
            if qd["perm"] & PERM_WRITE and qd["brokerName"] in masters:
                out += [MessageQueue(topic, qd["brokerName"], i) for i in range(int(qd["writeQueueNums"]))]
        return out

    @staticmethod
    def subscribe_queues(topic: str, route: dict[str, Any]) -> list[MessageQueue]:
        out = []
        for qd in route.get("queueDatas") or []:
            if qd["perm"] & PERM_READ:
                out += [MessageQueue(topic, qd["brokerName"], i) for i in range(int(qd["readQueueNums"]))]
        return sorted(out)

    def all_broker_addrs(self) -> list[str]:
        return sorted({a for addrs in self.broker_addrs.values() for a in addrs.values()})

    # -- heartbeat -----------------------------------------------------------------------------
    def heartbeat_body(self) -> bytes:
        data = {"clientID": self.client_id, "heartbeatFingerprint": 0, "withoutSub": False,
                "producerDataSet": [{"groupName": g} for g in self.producers],
                "consumerDataSet": [c.consumer_data() for c in self.consumers.values()]}
        return json.dumps(data, separators=(",", ":")).encode()

    async def send_heartbeat_to_all(self) -> None:
        if not self.producers and not self.consumers:
            return
        body = self.heartbeat_body()
        for addr in self.all_broker_addrs():
            try:
                resp = await self.invoke(addr, self.request(RC.HEART_BEAT, None, body))
                if resp.code != R.SUCCESS:
                    log.warning("heartbeat_refused", broker=addr, code=resp.code, remark=resp.remark)
            except (ConnectionClosedError, RemotingTimeoutError, OSError, ValueError) as exc:
                log.warning("heartbeat_failed", broker=addr, error=str(exc))

    async def unregister_client(self, producer_group: str | None, consumer_group: str | None) -> None:
        for addr in self.all_broker_addrs():
            try:
                await self.invoke(addr, self.request(RC.UNREGISTER_CLIENT, {
                    "clientID": self.client_id, "producerGroup": producer_group, "consumerGroup": consumer_group}), 2.0)
            except (ConnectionClosedError, RemotingTimeoutError, OSError):
                pass


@CLIENT_PROCESSORS.register(RC.NOTIFY_CONSUMER_IDS_CHANGED)
async def _notify_ids_changed(rt: ClientRuntime, conn: Connection, cmd: RemotingCommand) -> None:
    consumer = rt.consumers.get(cmd.get_str("consumerGroup") or "")
    if consumer is not None:
        consumer.rebalance_soon()
    return None


@CLIENT_PROCESSORS.register(RC.GET_CONSUMER_RUNNING_INFO)
async def _running_info(rt: ClientRuntime, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
    consumer = rt.consumers.get(cmd.get_str("consumerGroup") or "")
    if consumer is None:
        return cmd.response(R.SYSTEM_ERROR, f"The Consumer Group <{cmd.get_str('consumerGroup')}> not exist in this consumer")
    return cmd.response(R.SUCCESS, body=json.dumps(consumer.running_info()).encode())


def now_ms() -> int:
    return int(time.time() * 1000)
