"""Request-code -> processor tables (RocketMQ's ``processorTable``) and the server shell.

Owns: ``ProcessorTable`` (registration rejects duplicate codes; dispatch is a dict lookup),
the uniform error answers (unknown code -> REQUEST_CODE_NOT_SUPPORTED with a remark; a bad
header field -> SYSTEM_ERROR naming the field; any other failure -> SYSTEM_ERROR, logged), and
``RemotingServer`` (accepts connections, one ``Connection`` each, closes them all on stop).

Ordering: requests on a connection are processed one after another in arrival order, so a
producer's sends are stored in the order it sent them. A processor registered with
``suspends=True`` (pull with long polling) runs as its own task instead, because remoting
answers are matched by opaque and a held pull must not block the requests behind it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import structlog

from .remoting.codes import RequestCode, ResponseCode
from engine.listener_limits import ListenerGuard, start_server, stream_protocol_factory

from .remoting.command import HeaderFieldError, MAX_FRAME_SIZE, RemotingCommand
from .transport import Connection, ConnectionClosedError

log = structlog.get_logger("rockafka.native.dispatch")

class ProcessorError(Exception):
    """Raised by a processor to answer ``code`` + ``remark`` (a condition the client can act on)."""

    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code
        self.remark = remark


Handler = Callable[[Any, Connection, RemotingCommand], Awaitable[RemotingCommand | None]]


@dataclass(frozen=True)
class Processor:
    code: int
    handler: Handler
    suspends: bool


class ProcessorTable:
    def __init__(self, name: str):
        self.name = name
        self._table: dict[int, Processor] = {}

    def register(self, *codes: int, suspends: bool = False) -> Callable[[Handler], Handler]:
        def deco(fn: Handler) -> Handler:
            for code in codes:
                if code in self._table:
                    raise ValueError(f"{self.name}: request code {code} already has a processor")
                self._table[int(code)] = Processor(int(code), fn, suspends)
            return fn
        return deco

    def codes(self) -> list[int]:
        return sorted(self._table)

    def get(self, code: int) -> Processor | None:
        return self._table.get(code)

    def dispatcher(self, context: Any) -> Callable[[Connection, RemotingCommand], Awaitable[None]]:
        async def dispatch(conn: Connection, cmd: RemotingCommand) -> None:
            proc = self._table.get(cmd.code)
            if proc is None:
                try:
                    name = RequestCode(cmd.code).name
                except ValueError:
                    name = str(cmd.code)
                await _reply(conn, cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                     f"{self.name}: request type {name} not supported"))
                return
            if proc.suspends:
                task = asyncio.ensure_future(_run(proc, context, conn, cmd))
                _background.add(task)
                task.add_done_callback(_background.discard)
            else:
                await _run(proc, context, conn, cmd)
        return dispatch


_background: set[asyncio.Task[None]] = set()


async def _reply(conn: Connection, cmd: RemotingCommand, resp: RemotingCommand | None) -> None:
    if resp is None or cmd.is_oneway or conn.closed:
        return
    try:
        await conn.send_and_drain(resp)
    except ConnectionClosedError:
        pass


async def _run(proc: Processor, context: Any, conn: Connection, cmd: RemotingCommand) -> None:
    try:
        resp = await proc.handler(context, conn, cmd)
    except ProcessorError as exc:
        resp = cmd.response(exc.code, exc.remark)
    except HeaderFieldError as exc:
        resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"bad request header: {exc}")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("processor_failed", code=cmd.code, peer=conn.remote_addr)
        resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
    await _reply(conn, cmd, resp)


class RemotingServer:
    """Listens on host:port; ``port`` is the bound port after ``start`` (0 = any free port)."""

    def __init__(self, name: str, host: str, port: int, table: ProcessorTable, context: Any,
                 max_frame_size: int = MAX_FRAME_SIZE, guard: ListenerGuard | None = None):
        self.name = name
        self.host = host
        self.port = port
        self.table = table
        self.context = context
        # connection and request limits (engine.listener_limits), shared by the node's listeners
        self.guard = guard or ListenerGuard()
        limits = self.guard.limits
        self.max_frame_size = min(max_frame_size, limits.frame_max_length)
        self.idle_s = float(limits.server_channel_max_idle_time_seconds)
        self.connections: set[Connection] = set()
        self._server: Any = None
        self._dispatch = table.dispatcher(context)
        self.on_connection_closed: list[Callable[[Connection], None]] = []

    async def start(self) -> None:
        self._server = await start_server(self.guard, self.name, self.host, self.port,
                                          stream_protocol_factory(self._accept, limit=1 << 20))
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting_listening", server=self.name, host=self.host, port=self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        sock = writer.get_extra_info("socket")
        ticket = self.guard.admit(self.name, str(peer[0]), sock.fileno() if sock is not None else -1)
        if ticket is None:  # over a connection limit: closed unread
            writer.close()
            return
        try:
            conn = Connection(reader, writer, self._dispatch, max_frame_size=self.max_frame_size, role=self.name,
                              guard=self.guard, idle_s=self.idle_s)
            self.connections.add(conn)
            for cb in self.on_connection_closed:
                conn.on_close(cb)
            conn.on_close(self.connections.discard)
            await conn.run()
        finally:
            self.guard.release(ticket)

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
