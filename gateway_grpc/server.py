"""The gRPC front: RocketMQ 5's ``apache.rocketmq.v2.MessagingService`` on grpcio's asyncio server.

Owns: the listener (``grpc_proxy_port``, default 8081, on the node's host), the client sessions
(client id from the ``x-mq-client-id`` metadata -> type, group, settings, the Telemetry stream
used for server-initiated commands), the long-polling waiters of ReceiveMessage, and this
gateway's transaction check-back handler. Everything about messages goes through the engine:
the store facade, ``engine.pop`` (receive / ack / change invisible duration / DLQ) and
``engine.transaction`` (half messages, check-back), so a message sent over any protocol is
consumable over any other. Behaviour per RPC: docs/design/grpc-proxy.md.

Invariants: no RPC leaves a client without an answer; bad input is answered with the rpc's
Status (a v2 Code and a message naming the problem), never by breaking the stream; store writes
that may wait for a flush run on the executor, never on the event loop.
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import structlog

from broker import topics
from broker.put_path import PutPath
from broker.read_path import ArrivalHub, Wakeup
from engine import pop as engine_pop
from engine import security as engine_security
from engine import transaction as engine_transaction
from broker.listener_limits import ListenerGuard
from engine.message import Message
from engine.topic_config import TopicConfig

from . import tls
from .constants import DEFAULT_PORT, TXN_GROUP_PREFIX
from .renew import ReceiptRenewer
from .security import GrpcGate

log = structlog.get_logger("rockafka.grpc")


def generated_code_available() -> bool:
    try:
        from .proto import service_pb2_grpc  # noqa: F401
    except ImportError:
        return False
    return True


class _Handlers:
    """Collects what the generated ``add_MessagingServiceServicer_to_server`` registers."""

    def __init__(self) -> None:
        self.name = ""
        self.handlers: dict[str, Any] = {}

    def add_generic_rpc_handlers(self, _handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, name: str, handlers: dict[str, Any]) -> None:
        self.name, self.handlers = name, handlers


def add_servicer(servicer: Any, server: Any) -> None:
    """Register the service as the generated code does, with request deserializers that hand an
    unparsable request to the method (``service.lenient``): it is answered BAD_REQUEST instead
    of grpcio logging a traceback for bytes a client sent. Each RPC is counted in the node's request
    series (``request_metrics``)."""
    import grpc

    from .proto import service_pb2_grpc
    from .request_metrics import counted
    from .service import lenient

    seen = _Handlers()
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, seen)
    handlers = {m: counted(m, h._replace(request_deserializer=lenient(h.request_deserializer)))
                for m, h in seen.handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(seen.name, handlers),))
    server.add_registered_method_handlers(seen.name, handlers)


@dataclass
class Session:
    client_id: str
    peer: str
    language: str = ""
    version: str = ""
    client_type: int = 0
    group: str | None = None
    topics: set[str] = field(default_factory=set)
    settings: Any = None
    outbox: asyncio.Queue | None = None  # Telemetry commands to this client
    last_seen: float = field(default_factory=time.monotonic)


class GrpcGateway:
    """The component: ``name = "grpc_proxy"``, ``port`` after ``start``."""

    name = "grpc_proxy"

    def __init__(self, store: Any, config: Any, guard: ListenerGuard | None = None, put_path: PutPath | None = None):
        self.store = store
        self.config = config
        self.host = config.host
        self.port = config.extra_int("grpc_proxy_port", config.extra_int("grpc_server_port", DEFAULT_PORT))
        self.broker_name = config.broker.broker_name
        self.sessions: dict[str, Session] = {}
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="grpc-store")
        self._server: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.arrivals = ArrivalHub()  # receives long-polling a topic (keys: topic names)
        # the node's one put path (write scheduling, flow control); its own when started alone
        self.writes, self._owns_writes = PutPath.for_gateway(store, config, put_path)
        self.pop: engine_pop.PopService | None = None
        self.transactions: engine_transaction.TransactionalMessageService | None = None
        self.disabled_reason: str | None = None
        self._front: tls.GuardedFront | None = None
        self.guard = guard or ListenerGuard(config.limits)  # the node passes the one its listeners share
        self.gate: GrpcGate | None = None
        self.renewer = ReceiptRenewer.from_config(self, config)
        self.tls_mode = "disabled"

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        if not generated_code_available():
            self.disabled_reason = "generated gRPC code missing from gateway_grpc/proto (it ships with Rockafka; `make grpc` regenerates it)"
            log.warning("grpc_proxy_disabled", reason=self.disabled_reason)
            self.port = None
            return
        import grpc

        from .proto import service_pb2_grpc
        from .service import MessagingService

        self._loop = asyncio.get_running_loop()
        self.gate = GrpcGate(await self._loop.run_in_executor(self.executor, engine_security.for_store, self.store,
                                                              self.config))
        self.gate.peer_of = self.client_addr
        self.pop = await self._loop.run_in_executor(self.executor, engine_pop.for_store, self.store)
        self.pop.add_listener(self._on_pop_change)
        self.arrivals.loop = self._loop
        self.arrivals.attach(self.store)
        self.transactions = engine_transaction.for_store(self.store)
        self.transactions.check_handlers.append(self.ask_producer)
        self._server = grpc.aio.server(options=[("grpc.max_receive_message_length", 64 << 20),
                                                ("grpc.max_send_message_length", 64 << 20),
                                                ("grpc.so_reuseport", 0)])
        add_servicer(MessagingService(self), self._server)
        mode, cert, key = tls.tls_settings(self.config)
        creds = None
        if mode != "disabled":
            chain, private = await self._loop.run_in_executor(
                self.executor, tls.load_or_create_pair, cert, key, self.config.data_dir, self.advertised_ip)
            creds = grpc.ssl_server_credentials([(private, chain)])
        # grpcio listens on loopback only; the public port is the guarded front that relays to it
        plain = self._server.add_insecure_port("127.0.0.1:0") if mode != "enforcing" else None
        secure = self._server.add_secure_port("127.0.0.1:0", creds) if creds is not None else None
        await self._server.start()
        self._front = tls.GuardedFront(
            self.guard, self.host, self.port, plain, secure,
            idle_s=self.config.extra_int("grpc_client_idle_time_mills", 120_000) / 1000.0,
            on_refused=lambda listener, peer, why: self.gate.security.failed(listener, "tls_required", peer,
                                                                             error=why))
        try:
            self.port = await self._front.start()
        except OSError as exc:
            await self._server.stop(None)
            raise OSError(f"gRPC proxy port {self.host}:{self.port}: {exc.strerror or exc}") from None
        self.tls_mode = mode
        self.renewer.start()
        log.info("grpc_listening", host=self.host, port=self.port, tls_mode=mode)

    async def stop(self) -> None:
        if self._server is None:
            return
        try:
            self.arrivals.detach(self.store)
        except Exception:
            pass
        if self.pop is not None:
            self.pop.remove_listener(self._on_pop_change)
        if self.transactions is not None and self.ask_producer in self.transactions.check_handlers:
            self.transactions.check_handlers.remove(self.ask_producer)
        self.arrivals.wake_all()
        await self.renewer.stop()
        if self._front is not None:
            await self._front.stop()
            self._front = None
        await self._server.stop(grace=1.0)
        self._server = None
        self.executor.shutdown(wait=True)
        if self._owns_writes:
            self.writes.shutdown()

    # -- identity -------------------------------------------------------------------------------
    @property
    def advertised_ip(self) -> str:
        ip = self.config.broker.broker_ip1 or self.host
        if ip not in ("0.0.0.0", "", "::"):
            return ip
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"

    # -- store access ---------------------------------------------------------------------------
    async def blocking(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """A store write (a half message, a transaction's end, a POP checkpoint) through the node's
        put path: inline when it only touches mapped memory, else queued (never refused)."""
        return await self.writes.run(fn, *args, fast_failure=False, **kwargs)

    def topic_config(self, topic: str) -> TopicConfig | None:
        return self.store.topic_config.get(topic)

    async def topic_for_send(self, topic: str) -> TopicConfig | None:
        """``topic``'s config, auto-created from TBW102 (broker.topics) when allowed; None when not."""
        bc = self.config.broker
        return await topics.auto_create(self.store, bc, topic, "grpc", queue_nums=bc.default_topic_queue_nums)

    def client_addr(self, context: Any) -> str:
        """The calling client's ``host:port`` (grpcio sees the guarded front's relay connection)."""
        peer = context.peer() or ""
        for prefix in ("ipv4:", "ipv6:"):
            if peer.startswith(prefix):
                addr = peer[len(prefix):]
                port = addr.rsplit(":", 1)[-1]
                front = self._front
                if front is not None and port.isdigit():
                    return front.origins.get(int(port), addr)
                return addr
        return "127.0.0.1:0"

    def client_host(self, context: Any) -> str:
        return self.client_addr(context).rsplit(":", 1)[0].strip("[]")

    # -- sessions -------------------------------------------------------------------------------
    def session(self, context: Any) -> Session:
        md = {k: v for k, v in (context.invocation_metadata() or ())}
        client_id = md.get("x-mq-client-id") or f"anonymous@{self.client_addr(context)}"
        s = self.sessions.get(client_id)
        if s is None:
            peer = self.client_addr(context)
            s = self.sessions[client_id] = Session(client_id, peer, md.get("x-mq-language", ""),
                                                   md.get("x-mq-client-version", ""))
            log.info("grpc_client_seen", client_id=client_id, peer=peer, language=s.language, version=s.version)
        s.last_seen = time.monotonic()
        return s

    def drop_session(self, client_id: str, reason: str) -> None:
        s = self.sessions.pop(client_id, None)
        self.renewer.forget_client(client_id)
        if s is not None:
            log.info("grpc_client_gone", client_id=client_id, reason=reason, group=s.group)

    # -- long polling ---------------------------------------------------------------------------
    def _on_pop_change(self, group: str, topic: str) -> None:
        """POP listener: an orderly queue of ``topic`` unlocked (any thread)."""
        self.arrivals.topic_changed(topic)

    def waiter(self, names: list[str]) -> Wakeup:
        ev = Wakeup(asyncio.get_running_loop())
        self.arrivals.register(names, ev)
        return ev

    def drop_waiter(self, names: list[str], ev: Wakeup) -> None:
        self.arrivals.unregister(names, ev)

    # -- transactions ---------------------------------------------------------------------------
    @staticmethod
    def transaction_id(commitlog_offset: int, queue_offset: int) -> str:
        return f"{commitlog_offset:X}-{queue_offset:X}"

    @staticmethod
    def parse_transaction_id(txn_id: str) -> tuple[int, int]:
        a, _, b = (txn_id or "").partition("-")
        return int(a, 16), int(b, 16)

    def ask_producer(self, req: engine_transaction.CheckRequest) -> bool:
        """Check-back handler: a RecoverOrphanedTransactionCommand to one live gRPC producer that
        publishes the half message's topic (gRPC producers have no group)."""
        if not (req.producer_group or "").startswith(TXN_GROUP_PREFIX):
            return False
        from .convert import to_v2
        from .proto import service_pb2

        candidates = [s for s in self.sessions.values() if s.outbox is not None and req.real_topic in s.topics]
        if not candidates:
            log.warning("transaction_check_no_grpc_producer", topic=req.real_topic, half_offset=req.half.queue_offset)
            return False
        s = random.choice(candidates)
        msg = to_v2(req.half, req.real_topic)
        cmd = service_pb2.TelemetryCommand(recover_orphaned_transaction_command=service_pb2.RecoverOrphanedTransactionCommand(
            message=msg, transaction_id=self.transaction_id(req.half.commitlog_offset, req.half.queue_offset)))
        s.outbox.put_nowait(cmd)
        log.info("transaction_check_sent", client_id=s.client_id, topic=req.real_topic, half_offset=req.half.queue_offset,
                 via="grpc")
        return True

    def store_message(self, out: Any, queue_id: int, peer: str) -> Message:
        return Message(topic=out.topic, body=out.body, tags=out.tags, keys=out.keys, properties=dict(out.properties),
                       queue_id=queue_id, flag=0, sys_flag=0x1 if out.compressed else 0,
                       born_timestamp=out.born_timestamp, born_host=peer)
