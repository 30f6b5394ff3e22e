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
- ``ProtocolSniffer``: in permissive mode the public port is an asyncio listener that reads a
  connection's first byte — 0x16 (a TLS handshake record) goes to grpcio's TLS listener, anything
  else (the HTTP/2 preface ``PRI *``) to its plaintext listener; both listen on 127.0.0.1 on
  ephemeral ports and bytes are relayed with asyncio protocols (per chunk, no per-message work).
  Enforcing and disabled modes bind grpcio on the public port directly, with no relay.

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

from engine.security import tls as sec_tls

log = structlog.get_logger("rockafka.grpc.tls")

MODES = ("permissive", "enforcing", "disabled")
TLS_HANDSHAKE = sec_tls.TLS_HANDSHAKE


# The node's TLS material and modes are engine.security.tls's (one set for every listener);
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
    """One direction's sink: bytes received are written to ``peer``; closes propagate."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.write(data)

    def eof_received(self) -> bool:
        if self.peer is not None and self.peer.can_write_eof():
            self.peer.write_eof()
        return True

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
    """A client connection on the public port: buffers until the first bytes arrive, connects the
    matching backend, then relays both ways like any ``_Relay``."""

    def __init__(self, sniffer: "ProtocolSniffer"):
        super().__init__()
        self.sniffer = sniffer
        self.pending: list[bytes] = []
        self.eof = False
        self.timer: asyncio.TimerHandle | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.timer = asyncio.get_running_loop().call_later(self.sniffer.first_byte_timeout, transport.close)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.write(data)
            return
        first = not self.pending
        self.pending.append(data)
        if first:
            if self.timer is not None:
                self.timer.cancel()
            self.transport.pause_reading()
            port = self.sniffer.tls_port if data[0] == TLS_HANDSHAKE else self.sniffer.plain_port
            task = asyncio.get_running_loop().create_task(self._connect(port))
            self.sniffer._tasks.add(task)
            task.add_done_callback(self.sniffer._tasks.discard)

    async def _connect(self, port: int) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, up = await loop.create_connection(_Relay, "127.0.0.1", port)
        except OSError as exc:
            log.warning("grpc_backend_unreachable", port=port, error=str(exc))
            self.transport.close()
            return
        if self.closed:
            upstream.close()
            return
        up.peer = self.transport  # type: ignore[assignment]
        self.peer = upstream  # type: ignore[assignment]
        for chunk in self.pending:
            upstream.write(chunk)
        self.pending.clear()
        if self.eof and upstream.can_write_eof():
            upstream.write_eof()
        self.transport.resume_reading()

    def eof_received(self) -> bool:
        if self.peer is None:
            self.eof = True
            return True
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.timer is not None:
            self.timer.cancel()
        super().connection_lost(exc)


class ProtocolSniffer:
    """The public port in permissive mode: TLS to ``tls_port``, everything else to ``plain_port``."""

    def __init__(self, host: str, port: int, plain_port: int, tls_port: int, first_byte_timeout: float = 10.0):
        self.host, self.port = host, port
        self.plain_port, self.tls_port = plain_port, tls_port
        self.first_byte_timeout = first_byte_timeout
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Sniff(self), self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for t in list(self._tasks):
            t.cancel()
