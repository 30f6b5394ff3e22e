"""TLS for the gRPC front: RocketMQ's proxy TLS modes, certificates, and the one-port protocol sniffer.

RocketMQ 5's clients disagree on the default: the Java client (rocketmq-client-java) speaks TLS
unless told ``enableSsl(false)`` and trusts any server certificate; the Python client speaks
plaintext. Apache RocketMQ's proxy serves both on port 8081 in its default ``permissive`` TLS
mode by looking at each connection's first byte. This module does the same:

- ``tls_mode`` (RocketMQ's ``tls.server.mode``; keys ``tlsServerMode`` / ``tls_mode``):
  ``permissive`` (default) — TLS and plaintext on the one port; ``enforcing`` — TLS only;
  ``disabled`` — plaintext only;
- certificates from PEM files (``tlsServerCertPath`` / ``tlsServerKeyPath``, RocketMQ's
  ``tls.server.certPath`` / ``tls.server.keyPath``); without them a self-signed pair for the
  advertised host is generated once into ``<data dir>/tls/`` (openssl) and reused, as RocketMQ's
  proxy uses a self-signed certificate when none is configured;
- ``GuardedFront``: the public port is always an accept loop of the node's own, under the
  node's ``ListenerGuard`` (connection limits, idle time), relaying each connection to one of
  grpcio's listeners on 127.0.0.1 (ephemeral ports; bytes relayed with asyncio protocols, per
  chunk, no per-message work). The first byte picks the backend: 0x16 (a TLS handshake record)
  the TLS listener, anything else (the HTTP/2 preface ``PRI *``) the plaintext one; enforcing
  mode has no plaintext backend (such a connection is closed), disabled mode no TLS one.

Failure cases: a certificate or key file that cannot be read, or openssl missing when a pair must
be generated, stops the gateway from starting with a message naming the file or the command; a
connection that sends nothing within ``first_byte_timeout`` seconds is closed; when a backend
cannot be reached the client's connection is closed (the client retries).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from broker import tls as sec_tls

log = structlog.get_logger("rockafka.grpc.tls")

MODES = ("permissive", "enforcing", "disabled")
TLS_HANDSHAKE = sec_tls.TLS_HANDSHAKE


# The node's TLS material and modes are broker.tls's (one set for every listener);
# this front keeps its own names for them.
TlsConfigError = sec_tls.TlsError


def tls_settings(config: Any) -> tuple[str, str | None, str | None]:
    """(mode, cert path, key path) from the node's config (extra keys, any RocketMQ spelling)."""
    mode = sec_tls.tls_mode(config)
    cert, key = sec_tls.cert_paths(config)
    return mode, cert, key


def load_or_create_pair(cert: str | None, key: str | None, data_dir: str, host: str) -> tuple[bytes, bytes]:
    """PEM (certificate chain, private key): from the configured files, else the generated pair."""
    if cert and key:
        try:
            return Path(cert).read_bytes(), Path(key).read_bytes()
        except OSError as exc:
            raise TlsConfigError(f"cannot read the TLS certificate or key {exc.filename}: {exc.strerror}") from None
    d = Path(data_dir) / "tls"
    cert_file, key_file = d / "server.crt", d / "server.key"
    if not (cert_file.exists() and key_file.exists()):
        sec_tls.generate_self_signed(cert_file, key_file, host)
    return cert_file.read_bytes(), key_file.read_bytes()


class _Relay(asyncio.Protocol):
    """One direction's sink: bytes received are written to ``peer``; closes propagate. With a
    ``watch`` (the guard's idle timer) every chunk stamps the connection as active.

    A half close is relayed as a half close (``write_eof``), and once both ends have sent theirs
    the pair is closed: TCP is finished then, but asyncio keeps a transport that answered
    ``eof_received`` with True open until someone closes it, and its connection slot with it
    (a client that sends GOAWAY and FIN, as the official clients' ``shutdown()`` does, would
    otherwise hold its slot until the idle timeout)."""

    def __init__(self, watch: Any = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: asyncio.Transport | None = None
        self.other: _Relay | None = None  # the protocol of the peer transport
        self.eof_in = False
        self.watch = watch
        self.loop: asyncio.AbstractEventLoop | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.loop = asyncio.get_running_loop()

    def data_received(self, data: bytes) -> None:
        if self.watch is not None:
            self.watch.last_read = self.loop.time()
        if self.peer is not None:
            self.peer.write(data)

    def eof_received(self) -> bool:
        self.eof_in = True
        if self.peer is not None and self.peer.can_write_eof():
            self.peer.write_eof()
        # both directions finished: close (False closes this transport; connection_lost the peer)
        return not (self.other is not None and self.other.eof_in)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.peer.close()

    # flow control: a slow peer pauses this side's reading
    def pause_writing(self) -> None:
        if self.peer is not None:
            self.peer.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer.resume_reading()


class _Sniff(_Relay):
    """A client connection on the public port: admitted by the guard (or closed at once), then
    buffered until the first bytes arrive, which pick the backend; then relayed both ways."""

    def __init__(self, front: "GuardedFront"):
        super().__init__()
        self.front = front
        self.pending: list[bytes] = []
        self.eof = False
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False
        self.ticket: Any = None
        self.origin_port: int | None = None
        self.client = "?"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        front = self.front
        addr = transport.get_extra_info("peername") or ("?", 0)
        sock = transport.get_extra_info("socket")
        self.client = f"[{addr[0]}]:{addr[1]}" if ":" in str(addr[0]) else f"{addr[0]}:{addr[1]}"
        self.ticket = front.guard.admit(front.listener, str(addr[0]), sock.fileno() if sock is not None else -1)
        if self.ticket is None:  # refused (max_connections, per IP, open files): counted by the guard
            self.closed = True
            transport.abort()
            return
        self.watch = front.guard.watch(front.listener, self.client, transport.abort, front.idle_s)
        self.timer = self.loop.call_later(front.first_byte_timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            super().data_received(data)
            return
        if self.closed:
            return
        first = not self.pending
        self.pending.append(data)
        if first:
            if self.timer is not None:
                self.timer.cancel()
            self.transport.pause_reading()
            port = self.front.backend_for(data[0])
            if port is None:  # enforcing mode and a plaintext client: closed, as RocketMQ does
                self.front.on_refused(self.client)
                self.transport.close()
                return
            task = self.loop.create_task(self._connect(port))
            self.front._tasks.add(task)
            task.add_done_callback(self.front._tasks.discard)

    async def _connect(self, port: int) -> None:
        try:
            upstream, up = await self.loop.create_connection(lambda: _Relay(self.watch), "127.0.0.1", port)
        except OSError as exc:
            log.warning("grpc_backend_unreachable", port=port, error=str(exc))
            self.transport.close()
            return
        if self.closed:
            upstream.close()
            return
        # the backend sees the relay's address: remember whose connection this is
        self.origin_port = upstream.get_extra_info("sockname")[1]
        self.front.origins[self.origin_port] = self.client
        up.peer = self.transport  # type: ignore[assignment]
        self.peer = upstream  # type: ignore[assignment]
        up.other, self.other = self, up
        for chunk in self.pending:
            upstream.write(chunk)
        self.pending.clear()
        if self.eof:
            self.eof_in = True
            if upstream.can_write_eof():
                upstream.write_eof()
            if up.eof_in:
                self.transport.close()
                return
        self.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.peer is None:
            if not self.pending:  # closed before sending a byte: nothing to relay
                return False
            self.eof = True  # relayed once the backend connection is made
            return True
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        if self.origin_port is not None:
            self.front.origins.pop(self.origin_port, None)
        self.front.guard.unwatch(self.watch)
        self.front.guard.release(self.ticket)
        self.ticket = None
        super().connection_lost(exc)


class GuardedFront:
    """The public gRPC port, whatever the TLS mode: an accept loop of the node's own
    (``broker.listener_limits.start_server``) so every connection goes through the
    ``ListenerGuard`` (``max_connections``, ``max_connections_per_ip``, open files, idle time),
    relayed to grpcio's loopback listeners -- TLS (a first byte 0x16) to ``tls_port``, anything
    else to ``plain_port``; a mode without one of them closes such connections.

    ``origins`` maps the relay's local port (what grpcio reports as the call's peer) to the
    client's address, so the gateway sees who is really calling."""

    def __init__(self, guard: Any, host: str, port: int, plain_port: int | None, tls_port: int | None,
                 first_byte_timeout: float = 10.0, idle_s: float = 0.0, listener: str = "grpc", on_refused=None):
        self.guard = guard
        self.host, self.port = host, port
        self.plain_port, self.tls_port = plain_port, tls_port
        self.first_byte_timeout = first_byte_timeout
        self.idle_s = idle_s
        self.listener = listener
        self.origins: dict[int, str] = {}
        self._on_refused = on_refused
        self._server: Any = None
        self._tasks: set[asyncio.Task[None]] = set()

    def backend_for(self, first_byte: int) -> int | None:
        return self.tls_port if first_byte == TLS_HANDSHAKE else self.plain_port

    def on_refused(self, client: str) -> None:
        if self._on_refused is not None:
            self._on_refused(self.listener, client, "plaintext connection on a TLS-only port (tlsServerMode=enforcing)")

    async def start(self) -> int:
        from broker.listener_limits import start_server

        self._server = await start_server(self.guard, self.listener, self.host, self.port, lambda: _Sniff(self))
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for t in list(self._tasks):
            t.cancel()
