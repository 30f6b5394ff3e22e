"""The server shell: ``RemotingServer`` (accepts connections, one ``Connection`` each, closes
them all on stop). Request-code tables and their error answers live in the wire layer
(``remoting/processor_table.py``, shared with the SDK) and are re-exported here for the
broker's and NameServer's processors.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import structlog

from engine import metrics
from broker.frame_reader import FrameReader, frame_protocol_factory
from broker.listener_limits import ListenerGuard, start_server

from .remoting.codes import RequestCode, ResponseCode
from .remoting.command import MAX_FRAME_SIZE
from .remoting.processor_table import DeferredResponse, Processor, ProcessorError, ProcessorTable, ReplyWhenDone
from .transport import Connection

log = structlog.get_logger("rockafka.native.dispatch")

__all__ = ["DeferredResponse", "Processor", "ProcessorError", "ProcessorTable", "RemotingServer"]

# Answers that are a normal outcome, not an error: nothing new yet, pull again, key not found.
_NOT_ERRORS = frozenset({ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY,
                         ResponseCode.QUERY_NOT_FOUND})


def _code_name(enum: Any, code: int) -> str:
    try:
        return enum(code).name
    except ValueError:
        return str(code)


def request_metrics(table: ProcessorTable) -> Callable[[int, float, int | None], None]:
    """An observer for ``table`` that counts and times each request per request code
    (unknown codes share one ``UNSUPPORTED`` series, so a scanner cannot add series)."""
    stats: dict[int, metrics.RequestStats] = {}
    unsupported = metrics.RequestStats(table.name, "UNSUPPORTED")

    def observe(code: int, seconds: float, resp_code: int | None) -> None:
        if table.get(code) is None:
            unsupported.observe(seconds, ("REQUEST_CODE_NOT_SUPPORTED",))
            return
        s = stats.get(code)
        if s is None:
            s = stats[code] = metrics.RequestStats(table.name, _code_name(RequestCode, code))
        ok = resp_code is None or resp_code in _NOT_ERRORS
        s.observe(seconds, () if ok else (_code_name(ResponseCode, resp_code),))
    return observe


class RemotingServer:
    """Listens on host:port; ``port`` is the bound port after ``start`` (0 = any free port)."""

    def __init__(self, name: str, host: str, port: int, table: ProcessorTable, context: Any,
                 max_frame_size: int = MAX_FRAME_SIZE, guard: ListenerGuard | None = None):
        self.name = name
        self.host = host
        self.port = port
        self.table = table
        self.context = context
        # connection and request limits (broker.listener_limits), shared by the node's listeners
        self.guard = guard or ListenerGuard()
        limits = self.guard.limits
        self.max_frame_size = min(max_frame_size, limits.frame_max_length)
        self.idle_s = float(limits.server_channel_max_idle_time_seconds)
        self.connections: set[Connection] = set()
        self._server: Any = None
        if table.observer is None:
            table.observer = request_metrics(table)
        self._dispatch = table.dispatcher(context)
        self.on_connection_closed: list[Callable[[Connection], None]] = []
        # authentication and authorization before any processor (gateway_native/security.py)
        self.gate: Any = None
        # TLS (broker.listener_limits.ListenerTls: permissive or enforcing) and the mapping of
        # client certificates to principals
        self.tls: Any = None
        self.principal_mapper: Any = None

    async def start(self) -> None:
        self._server = await start_server(self.guard, self.name, self.host, self.port,
                                          frame_protocol_factory(self._accept), tls=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting_listening", server=self.name, host=self.host, port=self.port)

    async def _accept(self, reader: FrameReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        sock = writer.get_extra_info("socket")
        ticket = self.guard.admit(self.name, str(peer[0]), sock.fileno() if sock is not None else -1)
        if ticket is None:  # over a connection limit: closed unread
            writer.close()
            return
        try:
            conn = Connection(reader, writer, self._gated if self.gate is not None else self._dispatch,
                              max_frame_size=self.max_frame_size, role=self.name, guard=self.guard, idle_s=self.idle_s)
            if self.principal_mapper is not None:
                from broker.tls import peer_principal

                cert = peer_principal(writer.get_extra_info("ssl_object"), self.principal_mapper)
                if cert is not None:
                    conn.attrs["cert_principal"] = cert
            self.connections.add(conn)
            for cb in self.on_connection_closed:
                conn.on_close(cb)
            conn.on_close(self.connections.discard)
            await conn.run()
        finally:
            self.guard.release(ticket)

    async def _gated(self, conn: Connection, cmd: Any) -> None:
        refusal = await self.gate.check(conn, cmd)
        if refusal is None:
            await self._dispatch(conn, cmd)
        elif not cmd.is_oneway and not conn.closed:
            from .transport import ConnectionClosedError

            try:
                await conn.send_and_drain(refusal)
            except ConnectionClosedError:
                pass

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except asyncio.TimeoutError:
                pass
            self._server = None
