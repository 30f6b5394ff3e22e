"""Request-code -> processor tables (RocketMQ's ``processorTable``), shared by the broker,
the NameServer and the SDK (which answers broker-initiated requests with one).

Owns: ``ProcessorTable`` (registration rejects duplicate codes; dispatch is a dict lookup) and
the uniform error answers (unknown code -> REQUEST_CODE_NOT_SUPPORTED with a remark, logged once
per code and client; a bad header field -> SYSTEM_ERROR naming the field; any other failure ->
SYSTEM_ERROR, logged).

Ordering: requests on a connection are processed one after another in arrival order, so a
producer's sends are stored in the order it sent them. A processor registered with
``suspends=True`` (pull with long polling) runs as its own task instead, because remoting
answers are matched by opaque and a held pull must not block the requests behind it; what
such a request changes that later requests on the connection depend on (a pull's
COMMIT_OFFSET) is its ``in_order`` part, run in arrival order before the task starts, so a
pull's stale commit never lands after an UPDATE_CONSUMER_OFFSET sent behind it. A
processor may also return a ``DeferredResponse``: its work in order is done (a SYNC_MASTER send
is stored), only the answer waits (for the slaves) while the next request is processed, as
RocketMQ's asynchronous send processing does. A ``ReplyWhenDone`` is the same without a task: the
answer is built when a ``concurrent.futures.Future`` (a replication wait) resolves; whoever
resolves it (the HA ACK read, on the loop itself in a node) posts the completion to the event
loop -- scheduled directly when posted on the loop's thread, through its self-pipe from another
thread -- and every reply one acknowledgement completes goes out in one loop turn, not a task,
a coroutine and an asyncio future per message. Replies are sent in the order their
futures resolved (the HA service resolves waits in log order).

The dispatcher only needs a connection object with ``send_and_drain``, ``send``, ``backlogged``,
``drain_backlog``, ``closed`` and ``remote_addr`` (``gateway_native.transport.Connection``). A server may set ``observer`` to be
told of every request it answered (``observer(code, seconds, response_code)``, response code
``None`` for no answer): the server shell counts and times requests with it, the SDK does not.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import structlog

from .codes import FLAG_ONEWAY, RequestCode, ResponseCode
from .command import HeaderFieldError, RemotingCommand

log = structlog.get_logger("rockafka.native.dispatch")

class ProcessorError(Exception):
    """Raised by a processor to answer ``code`` + ``remark`` (a condition the client can act on)."""

    def __init__(self, code: int, remark: str):
        super().__init__(remark)
        self.code = code
        self.remark = remark


class DeferredResponse:
    """A processor's answer that is not ready yet: ``answer`` resolves to the response."""

    __slots__ = ("answer",)

    def __init__(self, answer: Awaitable[RemotingCommand | None]):
        self.answer = answer


class ReplyWhenDone:
    """A processor's answer built by ``finish(waiting.result())`` once the concurrent future
    ``waiting`` resolved, on the event loop; ``after`` (optional) runs once per loop turn that
    sent such replies (e.g. wake the store's dispatcher after the answers went out)."""

    __slots__ = ("waiting", "finish", "after")

    def __init__(self, waiting: Future, finish: Callable[[Any], RemotingCommand | None],
                 after: Callable[[], None] | None = None):
        self.waiting = waiting
        self.finish = finish
        self.after = after


class _Completions:
    """Per event loop: replies whose futures resolved in other threads, sent in one loop turn.
    ``post`` may run in any thread; only the first post of a batch wakes the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._lock = threading.Lock()
        self._items: list[tuple] = []
        self._scheduled = False
        self._thread = threading.get_ident()  # the loop's (created there)

    def post(self, item: tuple) -> None:
        with self._lock:
            self._items.append(item)
            if self._scheduled:
                return
            self._scheduled = True
        try:
            if threading.get_ident() == self._thread:  # resolved on the loop (an ACK read there)
                self.loop.call_soon(self._drain)
            else:
                self.loop.call_soon_threadsafe(self._drain)
        except RuntimeError:  # the loop is closed (shutdown): nobody is left to answer
            with self._lock:
                self._items.clear()
                self._scheduled = False

    def _drain(self) -> None:
        with self._lock:
            items, self._items = self._items, []
            self._scheduled = False
        afters: dict[Any, None] = {}
        # one write per connection for the whole turn (an ACK answers many sends in flight at once)
        held: dict[Any, None] | None = {} if len(items) > 1 else None
        for reply, conn, cmd, observer, start in items:
            try:
                resp = reply.finish(reply.waiting.result())
            except Exception as exc:
                log.exception("processor_failed", code=cmd.code, peer=conn.remote_addr)
                resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            if observer is not None:
                observer(cmd.code, time.perf_counter() - start, None if resp is None else resp.code)
            if resp is not None and not cmd.is_oneway and not conn.closed:
                try:
                    if held is not None:
                        conn.queue(resp)
                        held[conn] = None
                    else:
                        conn.send(resp)
                except ConnectionError:
                    pass
            if reply.after is not None:
                afters[reply.after] = None
        for conn in held or ():
            conn.flush()
        for after in afters:
            try:
                after()
            except Exception:
                log.exception("reply_after_failed")


_completions: dict[asyncio.AbstractEventLoop, _Completions] = {}


def _when_done(reply: ReplyWhenDone, conn: Any, cmd: RemotingCommand,
               observer: Callable[[int, float, int | None], None] | None, start: float) -> None:
    loop = asyncio.get_running_loop()
    poster = _completions.get(loop)
    if poster is None:
        for old in [lp for lp in _completions if lp.is_closed()]:
            del _completions[old]
        poster = _completions[loop] = _Completions(loop)
    item = (reply, conn, cmd, observer, start)
    reply.waiting.add_done_callback(lambda _fut: poster.post(item))


Handler = Callable[[Any, Any, RemotingCommand],
                   Awaitable["RemotingCommand | DeferredResponse | ReplyWhenDone | None"]]


InOrder = Callable[[Any, Any, RemotingCommand], None]


@dataclass(frozen=True)
class Processor:
    code: int
    handler: Handler
    suspends: bool
    in_order: InOrder | None = None


class ProcessorTable:
    def __init__(self, name: str):
        self.name = name
        self._table: dict[int, Processor] = {}
        self._refused: set[tuple[int, str, int, int]] = set()
        self.observer: Callable[[int, float, int | None], None] | None = None

    def register(self, *codes: int, suspends: bool = False,
                 in_order: InOrder | None = None) -> Callable[[Handler], Handler]:
        """``in_order`` (with ``suspends``): the part of the request that must take effect in
        arrival order, run synchronously before the request's own task starts."""
        def deco(fn: Handler) -> Handler:
            for code in codes:
                if code in self._table:
                    raise ValueError(f"{self.name}: request code {code} already has a processor")
                self._table[int(code)] = Processor(int(code), fn, suspends, in_order)
            return fn
        return deco

    def codes(self) -> list[int]:
        return sorted(self._table)

    def _log_refused(self, conn: Any, cmd: RemotingCommand, name: str) -> None:
        """Log a refused request code once per (code, client address, client version), so an
        operator sees which tool needs what without a line per request."""
        key = (cmd.code, conn.remote_addr, cmd.language, cmd.version)
        if key in self._refused:
            return
        if len(self._refused) > 10_000:
            self._refused.clear()
        self._refused.add(key)
        log.warning("request_code_refused", server=self.name, code=cmd.code, request=name, peer=conn.remote_addr,
                    language=cmd.language, version=cmd.version)

    def get(self, code: int) -> Processor | None:
        return self._table.get(code)

    def dispatcher(self, context: Any) -> Callable[[Any, RemotingCommand], Awaitable[None]]:
        async def dispatch(conn: Any, cmd: RemotingCommand) -> None:
            proc = self._table.get(cmd.code)
            if proc is None:
                try:
                    name = RequestCode(cmd.code).name
                except ValueError:
                    name = str(cmd.code)
                self._log_refused(conn, cmd, name)
                if self.observer is not None:
                    self.observer(cmd.code, 0.0, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
                await _reply(conn, cmd, cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                                     f"{self.name}: request type {name} not supported"))
                return
            if proc.suspends:
                if proc.in_order is not None:
                    try:
                        proc.in_order(context, conn, cmd)
                    except Exception as exc:  # the handler itself answers what is wrong with the request
                        log.info("in_order_part_skipped", code=cmd.code, peer=conn.remote_addr, error=repr(exc))
                task = asyncio.ensure_future(_run(proc, context, conn, cmd, self.observer))
                _background.add(task)
                task.add_done_callback(_background.discard)
            else:
                await _run(proc, context, conn, cmd, self.observer)
        return dispatch


_background: set[asyncio.Task[None]] = set()


async def _reply(conn: Any, cmd: RemotingCommand, resp: RemotingCommand | None) -> None:
    if resp is None or cmd.is_oneway or conn.closed:
        return
    try:
        await conn.send_and_drain(resp)
    except ConnectionError:  # the connection's ConnectionClosedError: the peer is gone
        pass


async def _run(proc: Processor, context: Any, conn: Any, cmd: RemotingCommand,
               observer: Callable[[int, float, int | None], None] | None = None) -> None:
    start = time.perf_counter()
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
    if isinstance(resp, ReplyWhenDone):
        _when_done(resp, conn, cmd, observer, start)
        return
    if isinstance(resp, DeferredResponse):
        task = asyncio.ensure_future(_deferred(resp, conn, cmd, observer, start))
        _background.add(task)
        task.add_done_callback(_background.discard)
        return
    if observer is not None:
        observer(cmd.code, time.perf_counter() - start, None if resp is None else resp.code)
    if resp is None or cmd.flag & FLAG_ONEWAY or conn.closed:
        return
    try:
        conn.send(resp)  # written at once, or coalesced with this turn's other answers
        if conn.backlogged():
            await conn.drain_backlog()  # the peer reads slower than it asks: wait for it
    except ConnectionError:  # the connection's ConnectionClosedError: the peer is gone
        pass


async def _deferred(deferred: DeferredResponse, conn: Any, cmd: RemotingCommand,
                    observer: Callable[[int, float, int | None], None] | None, start: float) -> None:
    try:
        resp = await deferred.answer
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("processor_failed", code=cmd.code, peer=conn.remote_addr)
        resp = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
    if observer is not None:
        observer(cmd.code, time.perf_counter() - start, None if resp is None else resp.code)
    await _reply(conn, cmd, resp)
