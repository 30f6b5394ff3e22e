"""One remoting connection over asyncio streams, used by the servers and by the SDK alike.

Owns: the read loop (length prefix, refuse oversize frames before buffering, ``readexactly`` the
frame, decode), writes, and the table of requests this side sent that await a response (keyed
by opaque). Both directions carry requests: the broker sends NOTIFY_CONSUMER_IDS_CHANGED to
clients; clients answer GET_CONSUMER_RUNNING_INFO.

Invariants: a frame that cannot be decoded closes this connection only (the reason is logged);
every pending request fails with ``ConnectionClosedError`` when the connection ends, so no
caller waits forever; requests are handed to ``dispatch`` in arrival order (the dispatcher
decides whether a request may run concurrently, e.g. a long-polling pull).

On the server side a ``ListenerGuard`` (``broker.listener_limits``) bounds what the peer can
take: the frame's bytes are read only once the node's request budget has room for them (no
socket reads while waiting), and are given back when the request was handed over; a frame
must arrive within ``request_receive_timeout_ms`` of its length prefix; a connection with
nothing read for ``serverChannelMaxIdleTimeSeconds`` is closed.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, Awaitable, Callable

import structlog

from broker.listener_limits import BUSY, ListenerGuard, stream_buffered

from .remoting.codes import FLAG_RESPONSE
from .remoting.command import (
    MAX_FRAME_SIZE, RemotingCommand, RemotingCommandError, check_frame_length, decode_frame, encode,
)

log = structlog.get_logger("rockafka.native.transport")

_PREFIX = struct.Struct(">i")

Dispatch = Callable[["Connection", RemotingCommand], Awaitable[None]]


class ConnectionClosedError(ConnectionError):
    pass


class RemotingTimeoutError(TimeoutError):
    pass


class Connection:
    def __init__(self, reader: Any, writer: asyncio.StreamWriter, dispatch: Dispatch | None, *,
                 max_frame_size: int = MAX_FRAME_SIZE, role: str = "server", guard: ListenerGuard | None = None,
                 idle_s: float = 0.0, signer: Callable[[RemotingCommand], None] | None = None):
        self.reader = reader  # asyncio.StreamReader (client side) or broker.frame_reader.FrameReader
        self._unread = getattr(reader, "buffered", None) or stream_buffered(reader)  # bytes received, not yet read
        self.signer = signer  # signs every request this side sends (remoting/acl.py)
        self.guard = guard
        self.idle_s = idle_s
        self.writer = writer
        self.dispatch = dispatch
        self.max_frame_size = max_frame_size
        self.role = role
        peer = writer.get_extra_info("peername")
        self.remote_addr = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.attrs: dict[str, Any] = {}  # e.g. the client id a heartbeat announced
        self._pending: dict[int, asyncio.Future[RemotingCommand]] = {}
        self._closed = asyncio.Event()
        self._close_callbacks: list[Callable[["Connection"], None]] = []
        self._reader_task: asyncio.Task[None] | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def on_close(self, cb: Callable[["Connection"], None]) -> None:
        self._close_callbacks.append(cb)

    def start(self) -> asyncio.Task[None]:
        self._reader_task = asyncio.ensure_future(self.run())
        return self._reader_task

    async def run(self) -> None:
        guard = self.guard
        if guard is None:
            return await self._run(None, None)
        watch = guard.watch(self.role, self.remote_addr, self.writer.transport.abort, self.idle_s,
                            buffered=self._unread)
        try:
            await self._run(guard, watch)
        finally:
            guard.unwatch(watch)

    async def _run(self, guard: ListenerGuard | None, watch) -> None:
        budget = guard.budget if guard is not None else None
        clock = asyncio.get_running_loop().time
        reader = self.reader
        # a server's FrameReader hands out the size and the frame without a copy of the prefix;
        # the SDK's StreamReader reads both with readexactly
        frame_size = getattr(reader, "frame_size", None)
        read_frame = getattr(reader, "frame", None) or reader.readexactly
        dispatch = self.dispatch
        max_frame_size = self.max_frame_size
        held = 0
        try:
            while True:
                if held:  # the previous frame was handed over (or was a response)
                    budget.release(held)
                    held = 0
                if watch is not None:
                    watch.last_read, watch.receiving_since = clock(), 0.0
                try:
                    if frame_size is not None:
                        length = await frame_size()
                    else:
                        (length,) = _PREFIX.unpack(await reader.readexactly(4))
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                check_frame_length(length, max_frame_size)
                if budget is not None:
                    watch.receiving_since = BUSY
                    held = await budget.acquire(length)  # no more reads from this socket until it fits
                    watch.receiving_since = clock()
                try:
                    frame = await read_frame(length)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                if watch is not None:
                    watch.receiving_since = BUSY
                cmd = decode_frame(frame)
                if cmd.is_response:
                    fut = self._pending.pop(cmd.opaque, None)
                    if fut is not None and not fut.done():
                        fut.set_result(cmd)
                    continue
                if dispatch is not None:
                    await dispatch(self, cmd)
        except RemotingCommandError as exc:
            log.warning("remoting_bad_frame", peer=self.remote_addr, role=self.role, error=str(exc))
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("remoting_connection_failed", peer=self.remote_addr, role=self.role)
        finally:
            if held:
                budget.release(held)
            self.close()

    def send(self, cmd: RemotingCommand) -> None:
        if self.closed:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed")
        if self.signer is not None and not cmd.is_response:
            self.signer(cmd)
        # Frames queued in one loop iteration go out in one write: a syscall per frame cost more
        # than encoding it when requests or answers are pipelined. Nothing waits longer for it.
        # An answer with nothing queued before it and no further request already received
        # (the read loop would answer that in this same step) goes out at once: one loop
        # iteration less per request for a client that waits for each answer.
        if cmd.flag & FLAG_RESPONSE and not self._out and not self._unread() and not self._closed.is_set():
            self.writer.write(encode(cmd))
            return
        self._out.append(encode(cmd))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    def more_received(self) -> bool:
        """Bytes of a further request are already received (handled in this same loop turn)."""
        return self._unread() > 0

    def queue(self, cmd: RemotingCommand) -> None:
        """``send`` that always queues: the caller answers several requests in a row and calls
        ``flush`` after the last, so they leave in one write (``send`` writes a lone answer at once)."""
        if self.closed:
            raise ConnectionClosedError(f"connection to {self.remote_addr} is closed")
        self._out.append(encode(cmd))

    def flush(self) -> None:
        """Write what ``send`` or ``queue`` queued (scheduled by ``send``, or called at once)."""
        self._flush_scheduled = False
        if not self._out:
            return
        data = self._out[0] if len(self._out) == 1 else b"".join(self._out)
        self._out.clear()
        if not self._closed.is_set():
            self.writer.write(data)

    async def send_and_drain(self, cmd: RemotingCommand) -> None:
        self.send(cmd)
        if self.writer.transport.get_write_buffer_size() == 0:
            return  # nothing backed up: the coalesced write goes out this iteration
        await self.drain_backlog()

    def backlogged(self) -> bool:
        """Bytes wait in the transport's buffer: the peer reads slower than it is answered."""
        return self.writer.transport.get_write_buffer_size() > 0

    async def drain_backlog(self) -> None:
        """Wait until the transport's buffer is below its high-water mark."""
        try:
            await self.writer.drain()
        except ConnectionError as exc:
            self.close()
            raise ConnectionClosedError(str(exc)) from None

    async def invoke(self, cmd: RemotingCommand, timeout: float) -> RemotingCommand:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[RemotingCommand] = loop.create_future()
        self._pending[cmd.opaque] = fut
        # a timer instead of asyncio.wait_for: no extra task per request on this hot path
        timer = loop.call_later(timeout, _expire, fut, self.remote_addr, cmd.code, timeout)
        try:
            await self.send_and_drain(cmd)
            return await fut
        finally:
            timer.cancel()
            self._pending.pop(cmd.opaque, None)

    def waiting(self, opaque: int) -> bool:
        """Whether the request ``opaque`` still waits for its answer."""
        fut = self._pending.get(opaque)
        return fut is not None and not fut.done()

    def abandon(self, opaque: int, exc: BaseException) -> bool:
        """Fail the request ``opaque`` still waiting for its answer with ``exc`` (the caller gave
        up on it, e.g. the route moved while it was in flight); False if it was answered."""
        fut = self._pending.get(opaque)
        if fut is None or fut.done():
            return False
        fut.set_exception(exc)
        return True

    async def invoke_oneway(self, cmd: RemotingCommand) -> None:
        cmd.flag |= 2
        await self.send_and_drain(cmd)

    def close(self) -> None:
        if self._closed.is_set():
            return
        if self._out:
            try:
                self.writer.write(b"".join(self._out))
            except Exception:  # the transport is already gone
                pass
            self._out.clear()
        self._closed.set()
        try:
            self.writer.close()
        except Exception:  # already torn down by the peer
            pass
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(ConnectionClosedError(f"connection to {self.remote_addr} closed"))
        self._pending.clear()
        for cb in self._close_callbacks:
            try:
                cb(self)
            except Exception:
                log.exception("connection_close_callback_failed", peer=self.remote_addr)

    async def wait_closed(self) -> None:
        await self._closed.wait()


def _expire(fut: "asyncio.Future[RemotingCommand]", addr: str, code: int, timeout: float) -> None:
    if not fut.done():
        fut.set_exception(RemotingTimeoutError(f"no response from {addr} to request code {code} within {timeout:.1f}s"))


async def open_connection(addr: str, dispatch: Dispatch | None = None, timeout: float = 3.0, *,
                          ssl_context: Any = None, signer: Callable[[RemotingCommand], None] | None = None) -> Connection:
    """A client connection to ``addr``; TLS when ``ssl_context`` is given, requests signed by
    ``signer`` (``remoting.acl.signer(access_key, secret_key)``)."""
    host, _, port = addr.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not host:port")
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port), ssl=ssl_context), timeout)
    except asyncio.TimeoutError:
        raise ConnectionClosedError(f"connect to {addr} timed out after {timeout}s") from None
    except OSError as exc:
        raise ConnectionClosedError(f"cannot connect to {addr}: {exc.strerror or exc}") from None
    conn = Connection(reader, writer, dispatch, role="client", signer=signer)
    conn.remote_addr = addr
    conn.start()
    return conn
