"""The slave's side of replication: one thread that connects to the master's HA port, shakes
hands, truncates what must go, then applies the master's commitlog bytes and metadata.

Handshake (``docs/design/replication.md``, "Where streaming starts"): HELLO; the master's
WELCOME carries its min/max offsets and epoch entries; the slave drops bytes past its own
``confirmed_offset`` (a unit cut off by a lost connection), finds the consistent point with
``epoch.consistent_point`` and truncates there, or starts over at the master's oldest segment,
or — when the two logs share no epoch and the slave holds data — refuses (nothing deleted) and
tries again later. Then PULL from that point.

Streaming: each DATA body is written at its offset (``MessageStore.append_replicated``), a
newer epoch in a DATA header is recorded first, and one ACK answers everything read in one go,
sent as soon as the bytes are in the commitlog (the consume queues are built right after);
an ACK also goes out every ``haSendHeartbeatInterval``. Bytes are received into one buffer per
session (a ``recv`` of 1 MiB would map and unmap a fresh 1 MiB buffer each time), and over plain
TCP the socket blocks with kernel timeouts (``SO_RCVTIMEO`` / ``SO_SNDTIMEO``), so a receive and
an ACK are one system call each instead of a ``poll`` plus the call. Silence for ``haHousekeepingInterval``,
a protocol error or bytes that do not continue the log close the connection; the client
reconnects after a second (five after a refusal), at once when it is told to follow another
master (the session with the old one is shut down at that moment, not at its next receive timeout,
and a pause after a failed connect ends).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from typing import Any

import structlog

from . import metadata
from . import protocol as P
from .epoch import EpochEntry, consistent_point
from .rate import ByteRate
from .errors import ReplicationError

log = structlog.get_logger("rockafka.engine.ha")

RECV_CHUNK = 1024 * 1024
RETRY_S = 1.0
REFUSED_RETRY_S = 5.0
NEW_MASTER_RETRY_S = 0.1  # retry pause for a few seconds after the controller named a new master
NEW_MASTER_WINDOW_S = 3.0


class _Refused(ReplicationError):
    pass


class HAClient:
    def __init__(self, service: Any):
        self.service = service
        self.store = service.store
        self.configured = self.store.config.ha_master_address or None
        self.learned: str | None = None
        self.connected_to: str | None = None
        self.state = "IDLE"
        self.master_max_offset = -1
        self.master_confirm_offset = -1
        self.last_receive = 0.0
        self.last_ack_sent = 0.0  # monotonic: the last offset report to the master
        self.last_error: str | None = None
        self.bytes_received = 0
        self.receive_rate = ByteRate()
        self._base = 0  # where streaming started: the end to acknowledge before any byte arrived
        self._stop = threading.Event()
        self._addr_changed = threading.Event()
        self._learned_at = 0.0  # when the controller last named another master (monotonic)
        self._sock: socket.socket | None = None
        self._thread = threading.Thread(target=self._run, name="ha-client", daemon=True)

    @property
    def master_address(self) -> str | None:
        return self.configured or self.learned

    def set_learned_address(self, address: str) -> None:
        if address != self.learned:
            log.info("ha_master_address_learned", address=address, configured=self.configured)
            self.learned = address
            self._learned_at = time.monotonic()
            if not self.configured:
                self._addr_changed.set()
                # a session with the old master may sit in recv (a stopped master sends nothing):
                # end it now rather than at the next receive timeout
                self._end_session()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._addr_changed.set()
        self._end_session()
        self._thread.join(10)

    def _end_session(self) -> None:
        """Wake the session's blocking recv by shutting its socket (the thread then closes it)."""
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    # -- connection loop -----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            addr = self.master_address
            if not addr:
                self.state = "NO_MASTER"
                self._addr_changed.wait(RETRY_S)
                self._addr_changed.clear()
                continue
            pause = RETRY_S
            try:
                self._session(addr)
            except _Refused as exc:
                self.last_error = str(exc)
                pause = REFUSED_RETRY_S
            except (OSError, P.ProtocolError, ReplicationError) as exc:
                if not self._stop.is_set():
                    self.last_error = str(exc)
                    log.info("ha_master_connection_lost", master=addr, error=str(exc))
            except Exception as exc:
                self.last_error = str(exc)
                log.exception("ha_client_failed", master=addr)
            finally:
                self._close()
            if self.master_address != addr and pause == RETRY_S:
                continue  # told to follow another master: connect to it now, not after a pause
            if pause == RETRY_S and time.monotonic() - self._learned_at < NEW_MASTER_WINDOW_S:
                pause = NEW_MASTER_RETRY_S  # a just-elected master opens its HA port a moment later
            if self._addr_changed.wait(pause):  # told so during the pause: at once too
                self._addr_changed.clear()
            if self._stop.is_set():
                break

    def _close(self) -> None:
        if self.connected_to is not None:
            self.service.state_version += 1
        self.connected_to = None
        self.state = "DISCONNECTED" if not self._stop.is_set() else "STOPPED"
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def _session(self, addr: str) -> None:
        store = self.store
        host, _, port = addr.rpartition(":")
        self.state = "CONNECTING"
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=3.0)
        if self.service.tls_client is not None:
            sock = self.service.tls_client.wrap_socket(sock)
        self._sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        self._addr_changed.clear()
        if self.master_address != addr:  # changed while connecting: the flag just cleared was for it
            raise ReplicationError(f"master address changed to {self.master_address}")
        svc = self.service
        ident = dict(svc.identity)
        ident.setdefault("brokerId", store.broker_config.broker_id)
        ident.setdefault("brokerName", store.broker_config.broker_name)
        if svc.hello_signer is not None:
            auth = svc.hello_signer(P.identity_bytes(ident))
            if auth is not None:
                ident["auth"] = auth
        sock.sendall(P.encode_hello(P.Hello(P.PROTOCOL_VERSION, store.config.mapped_file_size_commit_log,
                                            store.broker_config.broker_id, ident)))
        self.state = "HANDSHAKE"
        reader = P.FrameReader()
        sock.settimeout(min(1.0, svc.housekeeping_s))
        welcome = None
        deadline = time.monotonic() + svc.housekeeping_s
        while welcome is None:
            if time.monotonic() > deadline or self._stop.is_set():
                raise ReplicationError("no WELCOME from the master in time")
            try:
                data = sock.recv(RECV_CHUNK)
            except socket.timeout:
                continue
            if not data:
                raise ReplicationError("the master closed the connection during the handshake")
            reader.feed(data)
            for kind, payload in reader.frames():
                if kind != P.WELCOME:
                    raise P.ProtocolError(f"expected WELCOME, got frame type {kind}")
                welcome = P.decode_welcome(payload)
                break
        if welcome.status != P.WELCOME_OK:
            log.error("ha_refused_by_master", master=addr, reason=welcome.reason)
            raise _Refused(welcome.reason)
        start = self._starting_point(welcome, addr)
        self._base = start
        sock.sendall(P.encode_offset(P.PULL, start))
        self.connected_to = addr
        self.state = "TRANSFER"
        self.master_max_offset = welcome.max_offset
        self.last_receive = time.monotonic()
        svc.state_version += 1
        log.info("ha_slave_following", master=addr, from_offset=start, master_max_offset=welcome.max_offset,
                 master_epoch=welcome.epochs[-1].epoch if welcome.epochs else 0)
        self._stream(sock, reader, {e.epoch: e for e in welcome.epochs})

    def _starting_point(self, w: P.Welcome, addr: str) -> int:
        store = self.store
        epochs = self.service.epochs
        store.truncate_log(store.confirmed_offset)  # a unit cut off when the last connection broke
        cl = store.commitlog
        end = store.confirmed_offset
        empty = cl.mfq.last() is None or (end <= cl.min_offset and not epochs.all())
        if empty:
            if cl.mfq.last() is not None:
                store.restart_log_at(w.min_offset)
            if epochs.all():
                epochs.reset([])
            return w.min_offset
        point = consistent_point(w.epochs, w.max_offset, epochs.all(), end)
        if point is None:
            reason = (f"this slave's log (epochs {[(e.epoch, e.start_offset) for e in epochs.all()]}, end {end}) "
                      f"shares no epoch with the master's ({[(e.epoch, e.start_offset) for e in w.epochs]}); "
                      "nothing was deleted: empty this slave's data directory to make it a fresh slave")
            log.error("ha_log_unrelated", master=addr, reason=reason)
            raise _Refused(reason)
        if point < end:
            dropped = store.truncate_log(point)
            self.service.note_truncated(dropped)
            log.warning("ha_slave_truncated", master=addr, offset=point, dropped_bytes=dropped,
                        slave_end=end, master_end=w.max_offset)
        epochs.truncate_from(point)
        if point < w.min_offset:
            log.warning("ha_slave_too_far_behind", master=addr, slave_end=point, master_min_offset=w.min_offset)
            store.restart_log_at(w.min_offset)
            return w.min_offset
        return point

    def _stream(self, sock: socket.socket, reader: P.FrameReader, master_epochs: dict[int, EpochEntry]) -> None:
        svc = self.service
        store = self.store
        epochs = svc.epochs
        last_ack = 0.0
        space = bytearray(RECV_CHUNK)  # received into, once per session: no 1 MiB allocation per recv
        view = memoryview(space)
        timeout_errors: tuple = (socket.timeout,)
        if not isinstance(sock, ssl.SSLSocket):
            # plain TCP: a blocking socket whose timeouts the kernel keeps (SO_RCVTIMEO /
            # SO_SNDTIMEO), so a receive or an ACK is one system call, not a poll() and the call
            wait = min(1.0, svc.housekeeping_s)
            tv = struct.pack("ll", int(wait), int((wait % 1) * 1_000_000))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
            sock.settimeout(None)
            timeout_errors = (socket.timeout, BlockingIOError)
        while not self._stop.is_set():
            if self._addr_changed.is_set():
                raise ReplicationError(f"master address changed to {self.master_address}")
            try:
                n = sock.recv_into(view)
                data = view[:n] if n else b""
            except timeout_errors:
                data = None
            now = time.monotonic()
            acked_now = False
            if data == b"":
                raise ReplicationError("the master closed the connection")
            if data:
                self.last_receive = now
                reader.feed(data)
                applied = False
                for kind, payload in reader.frames():
                    if kind == P.DATA:
                        h, body = P.decode_data(payload)
                        if h.epoch > epochs.last_epoch:
                            entry = master_epochs.get(h.epoch)
                            if entry is None or entry.start_offset != h.epoch_start:
                                raise P.ProtocolError(f"DATA of epoch {h.epoch} (start {h.epoch_start}), which "
                                                      "the master did not list in its WELCOME")
                            epochs.append(entry)
                        if body:
                            store.append_replicated(h.offset, body, visible=False)
                            self.bytes_received += len(body)
                            applied = True
                        self.master_max_offset = h.master_max_offset
                        self.master_confirm_offset = h.confirm_offset
                    elif kind == P.METADATA:
                        name, doc = P.decode_metadata(payload)
                        metadata.apply(store, name, doc)
                    else:
                        raise P.ProtocolError(f"frame type {kind} is not one a master sends")
                if applied:
                    # acknowledged as soon as the bytes are in the commitlog; queues follow
                    sock.sendall(P.encode_offset(P.ACK, self._end()))
                    last_ack = self.last_ack_sent = now
                    acked_now = True
                    store.make_replicated_visible()
                    if store.replicated_unknown_topics:
                        self._learn_topics()
            elif now - self.last_receive > svc.housekeeping_s:
                raise ReplicationError(f"nothing from the master for {int(svc.housekeeping_s * 1000)} ms")
            if not acked_now and now - last_ack >= svc.heartbeat_s:
                sock.sendall(P.encode_offset(P.ACK, self._end()))
                last_ack = self.last_ack_sent = now

    def _learn_topics(self) -> None:
        """Messages of a topic the master's topics document has not brought yet (it is sent on
        change, but a master may die between the two): the slave records the topic from the log,
        so its messages stay consumable; the master's document replaces it when it arrives."""
        from ..topic_config import TopicConfig

        store = self.store
        seen, store.replicated_unknown_topics = store.replicated_unknown_topics, {}
        for topic, queues in seen.items():
            if store.topic_config.get(topic) is None:
                n = max(queues, store.broker_config.default_topic_queue_nums)
                store.topic_config.create_or_update(TopicConfig(topic, read_queue_nums=n, write_queue_nums=n))
                log.info("ha_topic_learned_from_log", topic=topic, queues=n)

    def _end(self) -> int:
        cl = self.store.commitlog
        return cl.max_offset if cl.mfq.last() is not None else self._base

    def view(self, now: float) -> dict[str, Any]:
        store = self.store
        end = store.confirmed_offset
        behind = max(0, self.master_max_offset - end) if self.master_max_offset >= 0 else None
        return {"masterAddress": self.master_address, "connected": self.connected_to is not None,
                "state": self.state, "masterMaxOffset": self.master_max_offset, "behindBytes": behind,
                "lastReceiveMsAgo": int((now - self.last_receive) * 1000) if self.last_receive else None,
                "lastAckMsAgo": int((now - self.last_ack_sent) * 1000) if self.last_ack_sent else None,
                "bytesReceived": self.bytes_received, "bytesPerSecond": self.receive_rate.sample(self.bytes_received),
                "lastError": self.last_error}
