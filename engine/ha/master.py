"""The master's side of replication: the HA listener and one connection per slave.

Threads: ``ha-accept`` accepts slaves on ``haListenPort``; per slave a reader (HELLO, PULL,
ACK frames; it answers HELLO itself) and, once the slave sent PULL, a writer that streams the
commitlog from the slave's offset, sends heartbeats when idle and changed metadata documents
every ``haSyncMetadataInterval``.

The put path sends first (``push``): a thread that just stored units sends them itself, with
one non-blocking ``writev``, instead of waking the writer -- the wake-up and the interpreter
hand-off cost more than the send (a SYNC_MASTER send waits for that round trip). It does so while
fewer than ``PUSH_MAX_FRAMES_IN_FLIGHT`` data frames are unacknowledged: a few synchronous
senders (each with one send in flight) get their own frame at once; a deeper pipeline (async
sends, many producers) leaves the rest to the writer, which sends what piled up meanwhile in one
frame (a frame per put would cost the slave an append and an ACK each). What the socket does
not take at once stays as the connection's *tail*, which the writer sends before anything else.
Frames are built and sent under the connection's send lock, so data frames leave in log order
from either thread; a push never waits for the lock, and never runs while a changed topics
document is still to go out (a topic's document precedes its data).

Where ACKs are read: the connection's reader thread reads HELLO and PULL; once streaming over
plain TCP and a ``loop_hook`` is set on the service (the node's event loop, passed in by the
broker core), the rest of the connection's input -- ACK frames -- is read on that loop
(``add_reader`` on the descriptor, one non-blocking ``read`` per readiness), so the ack completes
the SYNC_MASTER waits on the thread that answers them: one wake-up per round trip instead of
two (the reader thread's, then the loop's self-pipe). The reader thread then only watches
haHousekeepingInterval. Without a hook (the engine alone, tests), or with TLS, the thread reads
everything as before. A loop-read connection's socket is closed on the loop, after its reader
is removed, so the descriptor number is never reused under a registered reader.

Per connection the master tracks the slave's ack offset and when it last caught up (RocketMQ
5's rule: the slave acked everything the master had when it last sent data, or nothing was left
to send); ``in_sync`` is "streaming and caught up within haMaxTimeSlaveNotCatchup".

Invariants: data frames hold only bytes below the store's ``confirmed_offset`` (whole units),
never span a segment or an epoch; a connection that sent nothing for haHousekeepingInterval is
closed; closing is idempotent and wakes everything waiting on it.
"""

from __future__ import annotations

import collections
import hashlib
import os
import socket
import ssl
import threading
import time
from typing import Any

import structlog

from . import protocol as P
from .epoch import EpochEntry
from .rate import ByteRate

log = structlog.get_logger("rockafka.engine.ha")

RECV_CHUNK = 64 * 1024
# Every this many metadata rounds (haSyncMetadataInterval each) all documents go out again even
# if unchanged, as RocketMQ's slaves re-read everything every 10 s: a slave applies what it could
# not apply before (a queue's low watermark that arrived ahead of the queue's units).
FULL_RESEND_INTERVALS = 10
# Data frames a put may leave unacknowledged and still send its own (``push``). Measured with the
# stock Java client against a SYNC_MASTER pair (docs/design/replication.md): with 4 sync senders
# 7-11 % less master CPU per message (msg/s the same within noise) and 256 async sends 8-11 %
# faster than with pushes only onto an idle connection; an unbounded count made 256 async sends
# ~30 % slower (a frame each).
PUSH_MAX_FRAMES_IN_FLIGHT = 4


class SlaveConnection:
    def __init__(self, service: Any, sock: socket.socket, addr: tuple):
        self.service = service
        self.store = service.store
        self.sock = sock
        self.remote = f"{addr[0]}:{addr[1]}"
        self.state = "HANDSHAKE"
        self.broker_id = -1
        self.hello_seen = False
        self.identity: dict = {}
        self.ack_offset = -1
        self.next_offset = -1
        self.last_sent_max = 0
        self.last_sent_time = 0.0
        self.last_catchup = 0.0  # monotonic; 0 = never caught up on this connection
        self.last_read = time.monotonic()
        self.last_write = time.monotonic()
        self.connected_at = time.time()
        self.bytes_sent = 0
        self.send_rate = ByteRate()
        self.wake = threading.Event()
        self.closed = threading.Event()
        self._send_lock = threading.RLock()  # frames go out whole and in order: writer, push, handshake
        self._tail: memoryview | None = None  # the part of a pushed frame the socket did not take
        self._frame_ends: collections.deque[int] = collections.deque()  # data frames sent, not yet acked
        self._push_fd = -1  # plain TCP in non-blocking mode once streaming; -1: the writer sends everything
        self._sent_docs: dict[str, bytes] = {}
        self._meta_rounds = 0
        self._topics_version = -1
        self._frames = P.FrameReader()
        self._ack_fd = -1  # >= 0 while the event loop reads this connection's ACKs
        self._loop_reading = False  # the loop registered its reader (read on the loop only)
        self._in_read = False  # the loop is inside ``on_readable`` (no re-entry from a pump)
        self._reader = threading.Thread(target=self._read_loop, name=f"ha-read-{self.remote}", daemon=True)
        self._writer: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self._reader.start()

    def close(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        self.state = "CLOSED"
        self.wake.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # a writer blocked in a send returns now
        except OSError:
            pass
        with self._send_lock:  # no push may use the descriptor number once it is closed (and reused)
            self._push_fd = -1
            hook = self.service.loop_hook if self._ack_fd >= 0 else None
            if hook is None:
                self._close_socket()
        if hook is not None and not hook.call(self._detach_from_loop):  # the loop removes its reader, then closes
            self._loop_reading = False  # no loop left to read or to run the close
            self._close_socket()
        log.info("ha_slave_disconnected", slave=self.remote, broker_id=self.broker_id, reason=reason,
                 ack_offset=self.ack_offset)
        self.service.connection_closed(self)

    def _close_socket(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def join(self, timeout: float) -> None:
        for t in (self._reader, self._writer):
            if t is not None and t is not threading.current_thread():
                t.join(timeout)

    def in_sync(self, now: float) -> bool:
        return (self.state == "TRANSFER" and self.last_catchup > 0
                and now - self.last_catchup <= self.service.max_not_catchup_s)

    def lag_bytes(self) -> int:
        if self.ack_offset < 0:
            return max(0, self.store.confirmed_offset - max(self.next_offset, 0))
        return max(0, self.store.confirmed_offset - self.ack_offset)

    def lag_ms(self, now: float) -> int:
        if self.ack_offset >= self.store.confirmed_offset:
            return 0
        since = self.last_catchup if self.last_catchup > 0 else self.service.started_at
        return int((now - since) * 1000)

    # -- io ----------------------------------------------------------------------------------
    def _send(self, *parts) -> None:
        with self._send_lock:
            self._flush_tail()
            for part in parts:
                self.sock.sendall(part)
        self.last_write = time.monotonic()

    def _flush_tail(self) -> None:
        """Under the send lock: finish the frame a push began."""
        tail = self._tail
        if tail is not None:
            self._tail = None
            self.sock.sendall(tail)

    def _next_frame(self) -> tuple[bytes, bytes] | None:
        """Under the send lock: header and bytes of the next data frame (None: nothing to send),
        the connection's bookkeeping already moved past them (an ACK may come back before the
        send returns)."""
        chunk = self.service.read_chunk(self.next_offset)
        if chunk is None:
            return None
        data, entry, master_max = chunk
        start = self.next_offset
        self.next_offset = start + len(data)
        self._unacked_frames()  # drop acknowledged ends: the list stays as long as the frames in flight
        self._frame_ends.append(self.next_offset)
        self.last_sent_max = master_max
        self.last_sent_time = time.monotonic()
        self.bytes_sent += len(data)
        return P.encode_data_header(start, entry.epoch, entry.start_offset, master_max, master_max, len(data)), data

    def _unacked_frames(self) -> int:
        """Under the send lock: how many data frames sent are not acknowledged yet."""
        ends, acked = self._frame_ends, self.ack_offset
        while ends and ends[0] <= acked:
            ends.popleft()
        return len(ends)

    def push(self) -> bool:
        """Called by a thread that just stored units: send them now if fewer than
        ``PUSH_MAX_FRAMES_IN_FLIGHT`` frames are unacknowledged, that needs no waiting and they
        fit one frame. True when everything stored is sent; False when the writer has to do it
        (that many frames in flight, busy, more than a frame behind, a tail or a topics document
        pending, TLS, or the socket full)."""
        if self._push_fd < 0 or self.state != "TRANSFER" or not self._send_lock.acquire(blocking=False):
            return False
        try:
            fd = self._push_fd  # read under the lock: ``close`` clears it there before closing the socket
            if fd < 0 or self._tail is not None or self.closed.is_set() \
                    or self._unacked_frames() >= PUSH_MAX_FRAMES_IN_FLIGHT \
                    or self.store.topic_config.data_version.counter != self._topics_version \
                    or self.store.confirmed_offset - self.next_offset > self.service.batch_size:
                # Enough frames unacknowledged: the writer, woken now, sends what piled up
                # meanwhile in one frame. More than a frame: the writer streams it.
                return False
            try:
                frame = self._next_frame()
            except Exception:  # retention, an unknown offset: the writer meets it and decides
                return False
            if frame is None:
                return True
            header, data = frame
            try:
                sent = os.writev(fd, frame)
            except BlockingIOError:
                sent = 0
            except OSError:  # the writer meets the error on the tail and closes the connection
                sent = 0
            if sent < len(header) + len(data):
                self._tail = memoryview(header + bytes(data))[sent:]
                return False
            self.last_write = time.monotonic()
            return self.next_offset >= self.store.confirmed_offset
        finally:
            self._send_lock.release()

    def _secure(self) -> bool:
        """TLS as the master's mode says: permissive wraps a connection whose first byte starts
        a TLS handshake, enforcing every one (a plaintext slave is closed). False = closed."""
        mode, ctx = self.service.tls_server
        self.sock.settimeout(self.service.housekeeping_s)
        try:
            first = self.sock.recv(1, socket.MSG_PEEK)
            if not first:
                return False
            if first[0] != 0x16:
                if mode == "enforcing":
                    log.warning("ha_slave_refused", slave=self.remote, reason="plaintext connection to a TLS-only HA port")
                    return False
                return True
            self.sock = ctx.wrap_socket(self.sock, server_side=True)
            return True
        except (OSError, ValueError) as exc:
            log.warning("ha_slave_refused", slave=self.remote, reason=f"TLS handshake failed: {exc}")
            return False

    def _read_loop(self) -> None:
        reader = self._frames
        if self.service.tls_server is not None and not self._secure():
            self.close("TLS refused")
            return
        sock = self.sock
        housekeeping = self.service.housekeeping_s
        sock.settimeout(min(1.0, housekeeping))
        reason = "closed by slave"
        try:
            while not self.closed.is_set():
                try:
                    data = sock.recv(RECV_CHUNK)
                except socket.timeout:
                    if time.monotonic() - self.last_read > housekeeping:
                        reason = f"nothing received for {int(housekeeping * 1000)} ms (haHousekeepingInterval)"
                        break
                    continue
                if not data:
                    break
                self._take(reader, data)
                if self._ack_fd >= 0:  # streaming: the event loop reads from here on
                    if self.service.loop_hook.call(self._attach_to_loop):
                        self._watch(housekeeping)
                        return
                    self._ack_fd = -1  # the loop is gone: keep reading here
        except Exception as exc:  # a bug must not take the listener down; the slave reconnects
            reason = self._failure(exc)
        self.close(reason)

    def _watch(self, housekeeping: float) -> None:
        """The reader thread once the loop reads: close a connection silent for too long."""
        while not self.closed.wait(min(1.0, housekeeping)):
            if time.monotonic() - self.last_read > housekeeping:
                self.close(f"nothing received for {int(housekeeping * 1000)} ms (haHousekeepingInterval)")
                return

    # -- ACKs on the event loop ----------------------------------------------------------------
    def _attach_to_loop(self) -> None:
        """On the loop: start reading (a connection closed meanwhile is closed here)."""
        if self.closed.is_set():
            self._close_socket()
            return
        self.service.loop_hook.add_reader(self._ack_fd, self.on_readable)
        self._loop_reading = True

    def _detach_from_loop(self) -> None:
        """On the loop (or in a shutdown with no loop left): stop reading, close the socket."""
        if self._loop_reading:
            self._loop_reading = False
            self.service.loop_hook.remove_reader(self._ack_fd)
        self._close_socket()

    @property
    def reads_on_loop(self) -> bool:
        return self._loop_reading and not self.closed.is_set()

    def on_readable(self) -> None:
        """On the loop: read what the slave sent (ACKs) without blocking, advance the ack offset
        once per read and complete the waits it answers."""
        if self._in_read or not self._loop_reading:
            return
        self._in_read = True
        reason = None
        try:
            data = os.read(self._ack_fd, RECV_CHUNK)
            if not data:
                reason = "closed by slave"
            else:
                self._take(self._frames, data)
        except (BlockingIOError, InterruptedError):
            pass
        except Exception as exc:  # a bug must not take the loop down; the slave reconnects
            reason = self._failure(exc)
        finally:
            self._in_read = False
        if reason is not None:
            self.close(reason)

    def _take(self, reader: Any, data: bytes) -> None:
        """Feed what the slave sent; tell the service once when it held ACKs."""
        self.last_read = time.monotonic()
        reader.feed(data)
        acked = False
        for kind, payload in reader.frames():
            acked |= self._handle(kind, payload)
        if acked:
            self.service.acked(self)

    def _failure(self, exc: Exception) -> str:
        """Why reading from the slave ended, logged as its kind deserves."""
        if isinstance(exc, P.ProtocolError):
            log.warning("ha_protocol_error", slave=self.remote, error=str(exc))
            return f"protocol error: {exc}"
        if isinstance(exc, OSError):
            return f"socket error: {exc}"
        log.exception("ha_connection_failed", slave=self.remote)
        return f"error: {exc}"

    def _handle(self, kind: int, payload: bytes) -> bool:
        """Handle one frame; True for an ACK (the caller tells the service once per read)."""
        if kind == P.ACK:
            self._on_ack(P.decode_offset(payload))
            return True
        if kind == P.HELLO:
            self._on_hello(P.decode_hello(payload))
        elif kind == P.PULL:
            self._on_pull(P.decode_offset(payload))
        else:
            raise P.ProtocolError(f"frame type {kind} is not one a slave sends")
        return False

    def _on_hello(self, hello: P.Hello) -> None:
        if self.state != "HANDSHAKE":
            raise P.ProtocolError("HELLO after the handshake")
        store = self.store
        reason = ""
        if hello.version != P.PROTOCOL_VERSION:
            reason = f"protocol version {hello.version} is not supported (this master speaks {P.PROTOCOL_VERSION})"
        elif hello.segment_size != store.config.mapped_file_size_commit_log:
            reason = (f"mappedFileSizeCommitLog differs: slave {hello.segment_size}, master "
                      f"{store.config.mapped_file_size_commit_log}; offsets name segments, so both must be equal")
        elif not self.service.is_master:
            reason = "this broker is not a master"
        else:
            reason = self._authenticate(hello)
        hello.identity.pop("auth", None)
        self.broker_id = hello.broker_id
        self.identity = hello.identity
        self.hello_seen = True
        cl = store.commitlog
        welcome = P.Welcome(P.PROTOCOL_VERSION, P.WELCOME_REFUSED if reason else P.WELCOME_OK,
                            min_offset=cl.min_offset, max_offset=store.confirmed_offset,
                            confirm_offset=store.confirmed_offset, epochs=self.service.epochs.all(), reason=reason)
        self._send(P.encode_welcome(welcome))
        if reason:
            log.warning("ha_slave_refused", slave=self.remote, broker_id=hello.broker_id, reason=reason)
            raise P.ProtocolError(f"refused: {reason}")
        log.info("ha_slave_hello", slave=self.remote, broker_id=hello.broker_id, identity=hello.identity)

    def _authenticate(self, hello: P.Hello) -> str:
        """Why this slave may not replicate ("" when it may): a signed HELLO (inner credentials)
        or a client certificate of a principal allowed CLUSTER_ACTION (docs/design/security.md)."""
        svc = self.service
        if svc.hello_verifier is None:
            return ""
        principal, why = svc.hello_verifier(P.identity_bytes(hello.identity), hello.identity.get("auth"))
        if principal is None and svc.cert_principal is not None:
            principal = svc.cert_principal(self.sock)  # a verified client certificate
        if principal is None:
            return f"authentication failed: {why}" if svc.auth_required else ""
        if svc.may_replicate is not None and not svc.may_replicate(principal):
            return f"{principal} may not replicate (needs CLUSTER_ACTION on the cluster)"
        self.principal = principal
        return ""

    def _on_pull(self, offset: int) -> None:
        if self.state != "HANDSHAKE" or not self.hello_seen:
            raise P.ProtocolError("PULL before HELLO or twice")
        store = self.store
        lo, hi = store.commitlog.min_offset, store.confirmed_offset
        if not lo <= offset <= hi:
            raise P.ProtocolError(f"PULL from {offset}, outside this master's log [{lo}, {hi}]")
        self.next_offset = offset
        self.ack_offset = offset
        # pushes need a non-blocking plain socket (a timeout puts it in non-blocking mode)
        timeout = self.sock.gettimeout()
        if not isinstance(self.sock, ssl.SSLSocket) and timeout is not None and timeout > 0:
            self._push_fd = self.sock.fileno()
            if self.service.loop_hook is not None:
                self._ack_fd = self._push_fd  # the reader thread hands reading to the loop
        self.state = "TRANSFER"
        self._writer = threading.Thread(target=self._write_loop, name=f"ha-write-{self.remote}", daemon=True)
        self._writer.start()
        log.info("ha_slave_streaming", slave=self.remote, broker_id=self.broker_id, from_offset=offset,
                 master_offset=hi)
        self.service.state_changed()

    def _on_ack(self, offset: int) -> None:
        if self.state != "TRANSFER":
            raise P.ProtocolError("ACK before PULL")
        if offset < self.ack_offset or offset > self.next_offset:
            raise P.ProtocolError(f"ACK {offset} outside [{self.ack_offset}, {self.next_offset}] (sent so far)")
        self.ack_offset = offset
        if offset >= self.last_sent_max and self.last_sent_time > 0:
            self.last_catchup = max(self.last_catchup, self.last_sent_time)

    # -- streaming ---------------------------------------------------------------------------
    def _write_loop(self) -> None:
        svc = self.service
        heartbeat = svc.heartbeat_s
        reason = "writer stopped"
        next_meta = 0.0
        try:
            while not self.closed.is_set():
                self.wake.clear()
                now = time.monotonic()
                with self._send_lock:  # a push waits for none of this: it gives way while it runs
                    topics_version = self.store.topic_config.data_version.counter
                    if now >= next_meta or topics_version != self._topics_version:
                        # a new topic goes out before the data that follows its creation
                        self._send_metadata(force=now < next_meta or topics_version != self._topics_version)
                        self._topics_version = topics_version
                        next_meta = now + svc.metadata_interval_s
                    self._flush_tail()
                    frame = self._next_frame()
                    if frame is not None:
                        header, data = frame
                        if len(data) < 65536:
                            self.sock.sendall(header + bytes(data))
                        else:
                            self.sock.sendall(header)
                            self.sock.sendall(data)
                if frame is not None:
                    self.last_write = time.monotonic()
                    continue
                if self.ack_offset >= self.store.confirmed_offset:
                    caught = self.last_catchup == 0
                    self.last_catchup = time.monotonic()
                    if caught:
                        svc.state_changed()
                idle = time.monotonic() - self.last_write
                if idle >= heartbeat:
                    entry = svc.epochs.last() or EpochEntry(0, 0)
                    with self._send_lock:  # after anything a push sent, at the offset it reached
                        self._send(P.encode_data_header(self.next_offset, entry.epoch, entry.start_offset,
                                                        self.store.confirmed_offset, self.store.confirmed_offset, 0))
                    idle = 0.0
                self.wake.wait(max(0.001, min(heartbeat - idle, next_meta - time.monotonic())))
        except OSError as exc:
            reason = f"socket error: {exc}"
        except P.ProtocolError as exc:
            reason = f"protocol error: {exc}"
            log.warning("ha_protocol_error", slave=self.remote, error=str(exc))
        except Exception as exc:
            reason = f"error: {exc}"
            log.exception("ha_writer_failed", slave=self.remote)
        self.close(reason)

    def _send_metadata(self, force: bool = False) -> None:
        self._meta_rounds += 1
        if self._meta_rounds % FULL_RESEND_INTERVALS == 0:
            self._sent_docs.clear()  # every document again now and then, changed or not
        for name, doc in self.service.metadata_snapshot(fresh=force).items():
            digest = hashlib.blake2b(doc, digest_size=16).digest()
            if self._sent_docs.get(name) != digest:
                self._send(P.encode_metadata(name, doc))
                self._sent_docs[name] = digest

    def view(self, now: float) -> dict[str, Any]:
        return {"address": self.remote, "brokerId": self.broker_id, "identity": dict(self.identity),
                "state": self.state, "ackOffset": self.ack_offset, "sentOffset": self.next_offset,
                "lagBytes": self.lag_bytes(), "lagMs": self.lag_ms(now), "inSync": self.service.is_in_sync(self, now),
                "bytesSent": self.bytes_sent, "bytesPerSecond": self.send_rate.sample(self.bytes_sent),
                "connectedAt": int(self.connected_at * 1000)}


class HAServer:
    """Accepts slaves on the HA port and hands each to a ``SlaveConnection``."""

    def __init__(self, service: Any, host: str, port: int):
        self.service = service
        self.host = host
        self.requested_port = port
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.requested_port))
        except OSError as exc:
            sock.close()
            raise OSError(exc.errno, f"cannot listen on HA port {self.host}:{self.requested_port} "
                                     f"(haListenPort): {exc.strerror}") from None
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._accept_loop, name="ha-accept", daemon=True)
        self._thread.start()
        log.info("ha_listening", host=self.host, port=self.port)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            try:
                conn, addr = self._sock.accept()
            except socket.timeout:
                continue
            except OSError:
                if self._stop.is_set():
                    return
                time.sleep(0.1)
                continue
            conn.settimeout(None)
            try:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            except OSError:
                pass
            self.service.accept(SlaveConnection(self.service, conn, addr))

    def stop(self) -> None:
        self._stop.set()
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(5)
