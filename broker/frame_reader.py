"""Length-prefixed frames read off a socket with as few copies as the protocol allows.

What it owns: an asyncio ``BufferedProtocol`` (``FrameProtocol``) for listeners whose requests
are ``size(4, big-endian) + body`` frames (Kafka's; RocketMQ remoting's has the same prefix),
the ``FrameReader`` a connection handler awaits frames from, and the ``StreamWriter`` it
answers through (the same writer ``asyncio.start_server`` hands out, so drain, TLS and the
transport's write buffer behave as before).

Why: ``asyncio.StreamReader`` costs two copies of every byte in the interpreter thread --
``feed_data`` appends what ``recv`` returned to its buffer, ``readexactly`` copies it out
again. Here the kernel writes into our buffer (``recv_into``), and once a frame's size is
known and its body (64 KiB or more) has not fully arrived, the rest of the body is received
straight into the frame's own ``bytearray``: a large produce request is copied by nobody. A
smaller frame is gathered in the head buffer, together with whatever follows it in the same
receive, and copied out once.

Invariants:
- A frame returned to the caller is never written to again (it is its own object; the shared
  head buffer is never handed out), so views into it stay valid for as long as the caller
  keeps them (a produce batch may be stored from a view after the next frame was read).
- Reading stops (``pause_reading``) while the head buffer is full and nobody asks for a frame,
  so a client that sends faster than its requests are served is held by TCP, not by memory;
  it resumes when the handler asks for the next frame.
- At end of stream a waiting read raises ``asyncio.IncompleteReadError`` with what was read
  (nothing, between frames: a clean close); a lost connection raises its error.
"""

from __future__ import annotations

import asyncio
from asyncio import streams
from typing import Any, Awaitable, Callable

HEAD_BUFFER = 256 * 1024  # what one recv may take while no frame body is awaited
IN_PLACE_FROM = 64 * 1024  # a frame body at least this large is received into its own buffer


class FrameReader:
    """The receiving side of one connection: ``frame_size()``, then ``frame(size)``."""

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._buf = bytearray(HEAD_BUFFER)
        self._start = 0
        self._end = 0
        self._target: bytearray | None = None  # the body being received in place
        self._tpos = 0
        self._want = 0  # bytes of the head buffer a waiter needs (0: nobody waits there)
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._exc: BaseException | None = None
        self._paused = False

    # ---- protocol side -------------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        target = self._target
        if target is not None:
            return memoryview(target)[self._tpos:]
        buf = self._buf
        if self._end == len(buf):
            held = self._end - self._start
            if self._start:
                buf[:held] = buf[self._start:self._end]
                self._start, self._end = 0, held
            else:  # full of unread frames and still asked (a transport that ignores pausing)
                buf.extend(bytes(len(buf)))
        return memoryview(buf)[self._end:]

    def buffer_updated(self, n: int) -> None:
        if self._target is not None:
            self._tpos += n
            if self._tpos == len(self._target):
                self._wake()
            return
        self._end += n
        if self._want and self._end - self._start >= self._want:
            self._wake()
        elif self._end == len(self._buf) and self._start == 0 and not self._paused:
            self._paused = True
            try:
                self._transport.pause_reading()  # type: ignore[attr-defined]
            except (AttributeError, RuntimeError):
                self._paused = False

    def feed_eof(self) -> None:
        self._eof = True
        self._wake()

    def set_exception(self, exc: BaseException) -> None:
        self._exc = exc
        self._wake()

    def exception(self) -> BaseException | None:  # asked by StreamWriter.drain
        return self._exc

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    async def _wait(self) -> None:
        if self._exc is not None:
            raise self._exc
        if self._paused:
            self._paused = False
            try:
                self._transport.resume_reading()  # type: ignore[attr-defined]
            except (AttributeError, RuntimeError):
                pass
        self._waiter = self._loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        if self._exc is not None:
            raise self._exc

    # ---- handler side --------------------------------------------------------------------
    def buffered(self) -> int:
        """Bytes received and not yet handed out (for the listener guard's accounting)."""
        return self._end - self._start + self._tpos

    async def frame_size(self) -> int:
        """The next frame's signed 4-byte size; IncompleteReadError at end of stream."""
        while self._end - self._start < 4:
            if self._eof:
                raise asyncio.IncompleteReadError(bytes(self._buf[self._start:self._end]), 4)
            self._want = 4
            try:
                await self._wait()
            finally:
                self._want = 0
        start = self._start
        self._start = start + 4
        if self._start == self._end:
            self._start = self._end = 0
        return int.from_bytes(self._buf[start:start + 4], "big", signed=True)

    async def frame(self, size: int) -> bytes | bytearray:
        """The next ``size`` bytes, as an object of their own."""
        held = self._end - self._start
        if held < size <= IN_PLACE_FROM:
            # small: gather it in the head buffer, where a recv also takes what follows it (a
            # receive sized to the frame would leave the next frame for one more syscall)
            while self._end - self._start < size:
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(self._buf[self._start:self._end]), size)
                self._want = size
                try:
                    await self._wait()
                finally:
                    self._want = 0
            held = self._end - self._start
        if held >= size:
            start = self._start
            out = self._buf[start:start + size]
            self._start = start + size
            if self._start == self._end:
                self._start = self._end = 0
            if self._paused:
                self._paused = False
                self._transport.resume_reading()  # type: ignore[attr-defined]
            return out
        target = bytearray(size)
        target[:held] = memoryview(self._buf)[self._start:self._end]
        self._start = self._end = 0
        self._target, self._tpos = target, held
        try:
            while self._tpos < size:
                if self._eof:
                    raise asyncio.IncompleteReadError(bytes(target[:self._tpos]), size)
                await self._wait()
        finally:
            self._target, self._tpos = None, 0
        return target

    async def readexactly(self, n: int) -> bytes | bytearray:
        """``StreamReader.readexactly`` for callers that read a fixed-size piece."""
        return await self.frame(n)


class FrameProtocol(streams.FlowControlMixin, asyncio.BufferedProtocol):
    """One connection: receives into its ``FrameReader``, runs ``handler(reader, writer)``."""

    def __init__(self, handler: Callable[[FrameReader, asyncio.StreamWriter], Awaitable[None]],
                 loop: asyncio.AbstractEventLoop):
        super().__init__(loop=loop)
        self._handler = handler
        self._reader: FrameReader | None = None
        self._task: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        reader = self._reader = FrameReader(transport, self._loop)
        writer = asyncio.StreamWriter(transport, self, None, self._loop)  # drain: _drain_helper raises when lost
        self._task = self._loop.create_task(self._handler(reader, writer))

    def get_buffer(self, sizehint: int) -> memoryview:
        assert self._reader is not None
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        assert self._reader is not None
        self._reader.buffer_updated(nbytes)

    def eof_received(self) -> bool:
        if self._reader is not None:
            self._reader.feed_eof()
        return False  # the transport closes itself; answers already written are flushed

    def connection_lost(self, exc: BaseException | None) -> None:
        reader = self._reader
        if reader is not None:
            if exc is None:
                reader.feed_eof()
            else:
                reader.set_exception(exc)
        if not self._closed.done():
            if exc is None:
                self._closed.set_result(None)
            else:
                self._closed.set_exception(exc)
                self._closed.exception()  # retrieved: nobody has to wait for it
        super().connection_lost(exc)
        self._task = None

    def _get_close_waiter(self, stream: Any) -> asyncio.Future[None]:  # StreamWriter.wait_closed
        return self._closed


def frame_protocol_factory(handler: Callable[[FrameReader, asyncio.StreamWriter], Awaitable[None]]):
    """What ``broker.listener_limits.start_server`` builds per connection."""
    loop = asyncio.get_running_loop()

    def factory() -> FrameProtocol:
        return FrameProtocol(handler, loop)
    return factory


__all__ = ["FrameProtocol", "FrameReader", "frame_protocol_factory", "HEAD_BUFFER", "IN_PLACE_FROM"]
