"""What one client can take from a node: connection slots, request memory, time.

Protocol-neutral utilities the node's listeners share (Kafka, NameServer, broker, admin HTTP).
They live in the engine because every gateway needs the same accounting and gateways may not
import each other; they know nothing of any wire format.

- ``start_server`` is the listeners' accept loop: one ``accept`` at a time, and a connection
  whose descriptor is too high is closed before anything else happens (asyncio's own loop
  accepts up to 100 sockets per wake-up before any handler runs, which ran a nearly full
  descriptor table into EMFILE -- for the store too). EMFILE itself pauses accepting briefly,
  counted and logged once a second, not a traceback per attempt.
- ``ListenerGuard.admit`` decides whether an accepted connection may stay: node-wide
  ``max_connections`` and ``max_connections_per_ip`` (Kafka's keys; per address on by
  default, and never more than half the descriptors the listeners may use), and the
  open-files limit: a connection whose descriptor number leaves fewer than
  ``open_files_reserve`` descriptors below the soft limit (Linux hands out the lowest free
  descriptor, so a high number means the table is nearly full) or that finds the node at
  ``max_connections`` takes the place of the oldest idle connection of the address holding
  the most connections, when that address holds many (``shed_idle``); otherwise it is
  refused. So a
  flood of idle connections from one address cannot starve another client, and the store
  (segment files, flushes) keeps its descriptors.
- ``RequestBudget`` bounds the memory of requests read but not yet answered, across all
  listeners (``queued_max_request_bytes``). A listener reads a length prefix, then *waits for
  budget* before reading the request itself: while it waits it reads nothing more from that
  socket, so TCP pushes back on the client instead of the node's memory growing. A request
  larger than the whole budget is admitted alone (when nothing else is held), never stuck.
- ``watch`` registers a connection with the guard's timer: one task for the whole node looks
  a few times a second for connections idle longer than their listener's idle timeout, and
  for requests that have not arrived ``request_receive_timeout_ms`` after their length prefix
  (a client sending a prefix and then one byte a second) -- or after the first bytes of the
  prefix itself, where the listener says what it holds unread (``buffered``) -- and closes
  those. A listener only
  stamps two fields per request, instead of arming a timer per read.

Invariants: ``admit``/``release`` and ``acquire``/``release`` pair up (every listener releases
in a ``finally``); counters only grow. A guard's timer and budget run on its own event loop;
the connection counts are one ``ConnectionBook`` per node, shared by the guards of every loop.
Refusals are counted per reason and logged at most once a second (20,000 refused connections
must not become 20,000 log lines).
"""

from __future__ import annotations

import asyncio
import collections
import errno
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

import structlog

from engine.config import ListenerLimits

log = structlog.get_logger("rockafka.broker.listener_limits")


def open_files_limit() -> int:
    try:
        import resource
    except ImportError:  # not a POSIX system
        return 1 << 20
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


@dataclass(eq=False)
class Ticket:
    listener: str
    ip: str


class Watch:
    """A watched connection; the listener stamps its state (loop times):

    - waiting for the next request: ``last_read = now; receiving_since = 0.0`` (idle from now),
    - a length prefix is in and budget granted: ``receiving_since = now`` (the request must
      arrive within ``request_receive_timeout_ms``),
    - waiting for budget or handling a request: ``receiving_since = BUSY`` (the node's time,
      not the client's: neither timeout runs).

    ``close`` is called (at most once) when a limit is hit and must end the connection's reads."""

    __slots__ = ("listener", "peer", "ip", "close", "idle_s", "last_read", "receiving_since", "closed_reason",
                 "buffered", "partial_since", "partial_mark", "loop")

    def __init__(self, listener: str, peer: str, close, idle_s: float, now: float, buffered=None, loop=None):
        self.listener = listener
        self.peer = peer
        self.ip = peer.rsplit(":", 1)[0] if ":" in peer else peer
        self.close = close
        self.idle_s = idle_s
        self.last_read = now
        self.receiving_since = 0.0
        self.closed_reason: str | None = None
        # bytes read from the socket but not yet taken by the listener (part of a length
        # prefix): the scan starts the receive clock when it first sees them
        self.buffered = buffered
        self.partial_since = 0.0
        self.partial_mark = 0.0
        self.loop = loop

    @property
    def idle(self) -> bool:
        """Waiting for a request, with nothing of one read yet."""
        if self.closed_reason is not None or self.receiving_since != 0.0:
            return False
        return self.buffered is None or not self.buffered()


def stream_buffered(reader: asyncio.StreamReader):
    """For ``watch(buffered=...)``: how many bytes ``reader`` holds that nobody read yet."""
    def buffered() -> int:
        return len(getattr(reader, "_buffer", b""))
    return buffered


BUSY = -1.0


class RequestBudget:
    """Bytes of requests in flight, node-wide; waiters are served first come, first served."""

    def __init__(self, limit: int):
        self.limit = limit
        self.used = 0
        self.peak = 0
        self.waits = 0  # requests that had to wait for budget (a socket stopped being read)
        self._waiters: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def acquire(self, n: int) -> int:
        """Hold ``n`` bytes (wait while they do not fit); returns ``n`` for ``release``."""
        if not self._waiters and (self.used == 0 or self.used + n <= self.limit):
            self._take(n)
            return n
        self.waits += 1
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted just as we were cancelled
            else:
                try:
                    self._waiters.remove(entry)
                except ValueError:
                    pass
                self._grant()
            raise
        return n

    def _take(self, n: int) -> None:
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    def release(self, n: int) -> None:
        if n:
            self.used -= n
            self._grant()

    def _grant(self) -> None:
        while self._waiters:
            n, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.used and self.used + n > self.limit:
                return
            self._waiters.popleft()
            self._take(n)
            fut.set_result(None)

    @property
    def waiting(self) -> int:
        return len(self._waiters)


class ConnectionBook:
    """The node-wide connection counts every guard of the node admits against.

    Listeners on different event loops (the NameServer runs on a loop of its own) each have a
    ``ListenerGuard`` -- its timer and request budget belong to one loop -- but
    ``max_connections`` and ``max_connections_per_ip`` are node-wide, as Kafka's are, and the
    refusal and close counters are reported once for the node. A lock makes admission atomic
    across those threads; it is held for a few dictionary operations only.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.total = 0
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.per_listener: collections.Counter[str] = collections.Counter()
        self.refused: collections.Counter[str] = collections.Counter()  # by reason
        self.closed: collections.Counter[str] = collections.Counter()  # idle / slow request, by reason
        self.last_log = 0.0
        self.unlogged = 0
        self.watches: set[Watch] = set()  # of every loop's guard: where an idle one is shed from


class ListenerGuard:
    """Connection accounting and the request budget for the listeners on one event loop.

    ``sibling()`` gives a guard for listeners on another loop that counts connections in the
    same ``ConnectionBook`` (node-wide limits) with a timer and budget of its own.
    """

    def __init__(self, limits: ListenerLimits | None = None, book: ConnectionBook | None = None):
        self.limits = limits or ListenerLimits()
        queued = self.limits.queued_max_request_bytes
        self.budget = RequestBudget(queued if queued > 0 else 2**62)  # -1: unbounded (Kafka's default)
        self.open_files_limit = open_files_limit()
        # One address may hold at most half of the descriptors the listeners can use, whatever
        # max_connections_per_ip says: a flood from one address then always leaves room for
        # the others (the oldest idle connections are shed for them, see ``shed_idle``).
        self._per_ip_cap = max(16, (self.open_files_limit - self.fd_reserve) // 2)
        self.book = book or ConnectionBook()
        self._watched: set[Watch] = set()
        self._timer: asyncio.Task[None] | None = None
        self._interval = 1.0

    @property
    def per_ip_limit(self) -> int:
        """``max_connections_per_ip`` (it may change at run time), capped as said above."""
        return max(1, min(self.limits.max_connections_per_ip, self._per_ip_cap))

    def sibling(self) -> ListenerGuard:
        return ListenerGuard(self.limits, self.book)

    @property
    def total(self) -> int:
        return self.book.total

    @property
    def per_ip(self) -> collections.Counter[str]:
        return self.book.per_ip

    @property
    def refused(self) -> collections.Counter[str]:
        return self.book.refused

    @property
    def closed(self) -> collections.Counter[str]:
        return self.book.closed

    @property
    def fd_reserve(self) -> int:
        return max(16, min(self.limits.open_files_reserve, self.open_files_limit // 4))

    def admit(self, listener: str, ip: str, fileno: int = -1) -> Ticket | None:
        """A slot for a new connection, or None (the caller closes it) with the reason counted.

        An address at ``max_connections_per_ip`` is refused. When the node as a whole is full
        (``max_connections``, or descriptors), the oldest idle connection of the address
        holding the most is shed instead, so a flood of idle connections cannot starve
        another client; only when none is idle is the new connection refused."""
        lim, book = self.limits, self.book
        with book.lock:
            if book.per_ip[ip] >= self.per_ip_limit:
                reason = "max_connections_per_ip"
            elif fileno >= 0 and fileno >= self.open_files_limit - self.fd_reserve // 2:
                reason = "open_files"  # (the accept loop sheds for descriptors above the reserve)
            elif book.total >= lim.max_connections:
                reason = "max_connections" if not self._shed_locked(ip, "max_connections") else None
            else:
                reason = None
            if reason is None:
                book.total += 1
                book.per_ip[ip] += 1
                book.per_listener[listener] += 1
                return Ticket(listener, ip)
        self.refuse(listener, ip, reason, fileno)
        return None

    def shed_idle(self, for_ip: str, reason: str) -> bool:
        """Close the oldest idle connection of the address holding the most connections, if
        that address holds at least ``SHED_MIN_CONNECTIONS`` (an ordinary client, a few
        connections per address, is never shed: a node full of many such clients refuses the
        newcomer instead); True when one was closed."""
        with self.book.lock:
            return self._shed_locked(for_ip, reason)

    def _shed_locked(self, for_ip: str, reason: str) -> bool:
        book = self.book
        best: Watch | None = None
        best_key: tuple[int, float] | None = None
        for w in book.watches:
            held = book.per_ip.get(w.ip, 0)
            if held < SHED_MIN_CONNECTIONS or not w.idle:
                continue
            key = (-held, w.last_read)  # the biggest holder first, its oldest idle connection
            if best_key is None or key < best_key:
                best, best_key = w, key
        if best is None:
            return False
        best.closed_reason = "shed"
        book.watches.discard(best)
        book.closed["shed"] += 1
        log.info("connection_shed", listener=best.listener, peer=best.peer, reason=reason, for_ip=for_ip,
                 connections_of_peer=book.per_ip.get(best.ip, 0))
        loop = best.loop
        try:
            if loop is not None and loop is not _running_loop():
                loop.call_soon_threadsafe(best.close)
            else:
                best.close()
        except Exception:  # already torn down, or its loop closed
            pass
        return True

    def release(self, ticket: Ticket | None) -> None:
        if ticket is None:
            return
        book = self.book
        with book.lock:
            book.total -= 1
            book.per_listener[ticket.listener] -= 1
            book.per_ip[ticket.ip] -= 1
            if book.per_ip[ticket.ip] <= 0:
                del book.per_ip[ticket.ip]

    def refuse(self, listener: str, ip: str, reason: str, fileno: int) -> None:
        """Count (and log, at most once a second) a connection closed as soon as it came."""
        book = self.book
        now = time.monotonic()
        with book.lock:
            book.refused[reason] += 1
            if now - book.last_log < 1.0:
                book.unlogged += 1
                return
            unlogged, book.unlogged, book.last_log = book.unlogged, 0, now
        log.warning("connection_refused", listener=listener, peer=ip, reason=reason, connections=book.total,
                    descriptor=fileno, open_files_limit=self.open_files_limit, refused_since_last=unlogged)

    def connection_closed(self, listener: str, peer: str, reason: str, **fields) -> None:
        """A listener closed a connection for a limit (idle, slow request): count it, log it."""
        with self.book.lock:
            self.book.closed[reason] += 1
        log.info("connection_closed_by_limit", listener=listener, peer=peer, reason=reason, **fields)

    # -- timeouts --------------------------------------------------------------------------
    def watch(self, listener: str, peer: str, close, idle_s: float = 0.0, buffered=None) -> Watch:
        """Watch a connection for idleness (``idle_s``, 0 = never) and slow requests.
        ``buffered`` (e.g. ``stream_buffered(reader)``): bytes of a request read but not yet
        taken, so a client that sends part of a length prefix and stops is closed by the
        receive timeout too, not only after the idle one."""
        loop = asyncio.get_running_loop()
        w = Watch(listener, peer, close, idle_s, loop.time(), buffered, loop)
        self._watched.add(w)
        with self.book.lock:
            self.book.watches.add(w)
        shortest = min(x for x in (idle_s, self.limits.request_receive_timeout_ms / 1000.0) if x > 0) \
            if idle_s > 0 or self.limits.request_receive_timeout_ms else 4.0
        self._interval = max(0.05, min(self._interval, shortest / 4))
        if self._timer is None or self._timer.done():
            self._timer = loop.create_task(self._scan())
        return w

    def unwatch(self, w: Watch | None) -> None:
        if w is not None:
            self._watched.discard(w)
            with self.book.lock:
                self.book.watches.discard(w)

    async def _scan(self) -> None:
        loop = asyncio.get_running_loop()
        receive_s = self.limits.request_receive_timeout_ms / 1000.0
        while self._watched:
            await asyncio.sleep(self._interval)
            now = loop.time()
            for w in list(self._watched):
                if w.closed_reason is not None:
                    continue
                if w.receiving_since > 0:
                    if receive_s and now - w.receiving_since > receive_s:
                        self._close(w, "request_receive_timeout", waited_ms=int((now - w.receiving_since) * 1000),
                                    limit_ms=self.limits.request_receive_timeout_ms)
                elif w.receiving_since == 0:
                    if w.buffered is not None and receive_s and w.buffered():
                        # part of a length prefix is in: the request has begun arriving
                        if w.partial_mark != w.last_read:
                            w.partial_since, w.partial_mark = now, w.last_read
                        elif now - w.partial_since > receive_s:
                            self._close(w, "request_receive_timeout", waited_ms=int((now - w.partial_since) * 1000),
                                        limit_ms=self.limits.request_receive_timeout_ms, part="length_prefix")
                            continue
                    if w.idle_s and now - w.last_read > w.idle_s:
                        self._close(w, "idle", idle_ms=int(w.idle_s * 1000))

    def _close(self, w: Watch, reason: str, **fields) -> None:
        w.closed_reason = reason
        self._watched.discard(w)
        with self.book.lock:
            self.book.watches.discard(w)
        self.connection_closed(w.listener, w.peer, reason, **fields)
        try:
            w.close()
        except Exception:  # already torn down
            pass

    def metrics(self) -> dict[str, object]:
        lim, book = self.limits, self.book
        with book.lock:
            counts = {"connections": book.total, "connections_by_listener": dict(book.per_listener),
                      "connections_refused": dict(book.refused), "connections_closed": dict(book.closed)}
        return {
            **counts,
            "request_bytes_in_flight": self.budget.used, "request_bytes_in_flight_peak": self.budget.peak,
            "request_budget_waits": self.budget.waits, "requests_waiting_for_budget": self.budget.waiting,
            "open_files_limit": self.open_files_limit, "open_files_reserve": self.fd_reserve,
            "max_connections": lim.max_connections, "max_connections_per_ip": self.per_ip_limit,
            "queued_max_request_bytes": lim.queued_max_request_bytes,
            "request_receive_timeout_ms": lim.request_receive_timeout_ms,
        }


# An address holding fewer connections than this is never shed for a newcomer (a client
# application holds a handful: bootstrap, brokers, NameServer); a flood holds hundreds.
SHED_MIN_CONNECTIONS = 32


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_CHUNKED_READ_MIN = 1 << 20


async def read_exactly(reader: asyncio.StreamReader, n: int) -> bytes | bytearray:
    """``reader.readexactly(n)`` that holds a large request once, not twice: ``readexactly``
    gathers ``n`` bytes in the reader's buffer and then copies them out (a 100 MiB request
    costs 200 MiB at its peak); from 1 MiB up the bytes go straight into the result."""
    if n < _CHUNKED_READ_MIN:
        return await reader.readexactly(n)
    out = bytearray(n)
    view = memoryview(out)
    pos = 0
    while pos < n:
        chunk = await reader.read(min(n - pos, _CHUNKED_READ_MIN))
        if not chunk:
            raise asyncio.IncompleteReadError(bytes(out[:pos]), n)
        view[pos:pos + len(chunk)] = chunk
        pos += len(chunk)
    return out


def stream_protocol_factory(client_connected_cb, limit: int = 2**16):
    """What ``asyncio.start_server`` builds per connection: a StreamReader and its protocol."""
    loop = asyncio.get_running_loop()

    def factory() -> asyncio.StreamReaderProtocol:
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(limit=limit, loop=loop), client_connected_cb,
                                            loop=loop)
    return factory


@dataclass
class ListenerTls:
    """TLS on a listener: ``mode`` enforcing (every connection) or permissive (a connection
    whose first byte is 0x16, a TLS handshake record, gets TLS; others stay plaintext, as
    RocketMQ's remoting ports do). The handshake runs in the connection's own task, within
    ``handshake_timeout`` seconds; a failed one (an untrusted client certificate, a plaintext
    client on an enforcing port) closes the connection and is reported to ``on_failure(
    listener, peer, reason)``."""

    context: ssl.SSLContext
    mode: str = "enforcing"
    handshake_timeout: float = 10.0
    on_failure: Any = None
    # permissive: how long a connection may stay silent before its first byte (the listener's
    # idle timeout; closed and counted as idle, as an established connection would be)
    first_byte_timeout: float = 0.0


class GuardedServer:
    """Listening sockets with one accept loop each (the parts of ``asyncio.Server`` the
    listeners use: ``sockets``, ``close``, ``wait_closed``)."""

    def __init__(self, guard: ListenerGuard, listener: str, sockets: list[socket.socket], protocol_factory,
                 tls: ListenerTls | None = None):
        self.guard = guard
        self.listener = listener
        self.sockets = sockets
        self._factory = protocol_factory
        self.tls = tls
        self._pending: set[asyncio.Task[None]] = set()
        self._tasks = [asyncio.get_running_loop().create_task(self._accept_loop(s)) for s in sockets]

    async def _accept_loop(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        guard = self.guard
        while True:
            try:
                conn, addr = await loop.sock_accept(sock)
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    guard.refuse(self.listener, "?", "open_files", -1)
                    await asyncio.sleep(0.1)  # connections wait in the backlog meanwhile
                    continue
                if sock.fileno() < 0:  # closed
                    return
                log.warning("accept_failed", listener=self.listener, error=str(exc))
                await asyncio.sleep(0.1)
                continue
            fd = conn.fileno()
            if fd >= guard.open_files_limit - guard.fd_reserve:
                ip = str(addr[0]) if addr else "?"
                # room for the newcomer: the oldest idle connection of the biggest holder goes
                # (a descriptor or two of the reserve, until its close is read); none idle:
                # the newcomer is refused
                if fd >= guard.open_files_limit - guard.fd_reserve // 2 or not guard.shed_idle(ip, "open_files"):
                    conn.close()
                    guard.refuse(self.listener, ip, "open_files", fd)
                    continue
            conn.setblocking(False)
            if self.tls is not None:  # the handshake must not hold up other accepts
                task = loop.create_task(self._connect_tls(conn, addr))
                self._pending.add(task)
                task.add_done_callback(self._pending.discard)
                continue
            try:
                await loop.connect_accepted_socket(self._factory, conn)
            except Exception as exc:
                conn.close()
                log.warning("accept_failed", listener=self.listener, error=str(exc))

    async def _connect_tls(self, conn: socket.socket, addr: Any) -> None:
        """Sniff (permissive) and hand over, with or without TLS. Until the listener's own
        connection handler admits it, the connection holds a slot of the guard's limits here,
        so silent or slow-handshaking connections count like any other."""
        loop = asyncio.get_running_loop()
        tls = self.tls
        guard = self.guard
        ip = str(addr[0]) if addr else "?"
        peer = f"{addr[0]}:{addr[1]}" if addr else "?"
        ticket = guard.admit(self.listener, ip, conn.fileno())
        if ticket is None:
            conn.close()
            return
        use_tls = True
        sniffing: Watch | None = None
        try:
            if tls.mode == "permissive":
                wait = tls.first_byte_timeout or tls.handshake_timeout
                # silent so far: idle, and shed like any idle connection (``shed_idle``)
                task = asyncio.current_task()
                sniffing = Watch(self.listener, peer, task.cancel if task is not None else conn.close, 0.0,
                                 loop.time(), None, loop)
                with guard.book.lock:
                    guard.book.watches.add(sniffing)

                def closed_early() -> None:  # the slot goes back in the same loop pass as the FIN
                    nonlocal ticket
                    guard.release(ticket)
                    ticket = None

                try:
                    first = await asyncio.wait_for(_peek_byte(loop, conn, closed_early), wait)
                except asyncio.TimeoutError:
                    conn.close()
                    guard.connection_closed(self.listener, peer, "idle", idle_ms=int(wait * 1000))
                    return
                if first is None:  # closed before sending anything
                    conn.close()
                    return
                with guard.book.lock:
                    guard.book.watches.discard(sniffing)
                use_tls = first == TLS_HANDSHAKE
            if not use_tls:
                guard.release(ticket)  # the handler admits it from here on
                ticket = None
                await loop.connect_accepted_socket(self._factory, conn)
                return
            await loop.connect_accepted_socket(self._factory, conn, ssl=tls.context,
                                               ssl_handshake_timeout=tls.handshake_timeout)
        except asyncio.CancelledError:
            conn.close()
            raise
        except (ssl.SSLError, OSError, asyncio.TimeoutError, ConnectionError) as exc:
            conn.close()
            reason = getattr(exc, "reason", None) or type(exc).__name__
            if tls.on_failure is not None:
                tls.on_failure(self.listener, peer, str(reason))
            else:
                log.info("tls_handshake_failed", listener=self.listener, peer=peer, reason=str(reason))
        finally:
            if sniffing is not None:
                with guard.book.lock:
                    guard.book.watches.discard(sniffing)
            guard.release(ticket)

    def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in list(self._pending):
            t.cancel()
        for s in self.sockets:
            s.close()

    async def wait_closed(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)


TLS_HANDSHAKE = 0x16


async def _peek_byte(loop: asyncio.AbstractEventLoop, conn: socket.socket, on_eof=None) -> int | None:
    """The first byte the peer sent, left in the socket (MSG_PEEK); None at end of stream
    (``on_eof()`` is then called at once, from the reader callback)."""
    fut: asyncio.Future[bytes] = loop.create_future()
    fd = conn.fileno()

    def readable() -> None:
        if fut.done():
            return
        try:
            data = conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data and on_eof is not None:
            on_eof()
        fut.set_result(data)

    loop.add_reader(fd, readable)
    try:
        data = await fut
    finally:
        loop.remove_reader(fd)
    return data[0] if data else None


async def start_server(guard: ListenerGuard, listener: str, host: str | None, port: int, protocol_factory,
                       backlog: int = 1024, tls: ListenerTls | None = None) -> GuardedServer:
    """Bind ``host:port`` (every address the host resolves to, as asyncio does) and accept
    through the guard. Raises OSError (e.g. address in use) as ``asyncio.start_server`` would."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks: list[socket.socket] = []
    try:
        for family, type_, proto, _canon, addr in dict.fromkeys(infos):
            if port:  # the same port on every address (the first one bound picks an ephemeral one)
                addr = (addr[0], port) + tuple(addr[2:])
            s = socket.socket(family, type_, proto)
            socks.append(s)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                s.bind(addr)
            except OSError as exc:
                raise OSError(exc.errno, f"error while attempting to bind on address {addr!r}: "
                                         f"{exc.strerror.lower() if exc.strerror else exc}") from None
            port = s.getsockname()[1]
            s.listen(backlog)
            s.setblocking(False)
    except BaseException:
        for s in socks:
            s.close()
        raise
    return GuardedServer(guard, listener, socks, protocol_factory, tls)
