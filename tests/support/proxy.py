"""A TCP proxy on loopback for fault injection: forwards bytes both ways between clients and one
server, and can swallow what the server answers (``hold_answers``), so a test can make a request
reach the server while its answer never reaches the client — then crash the server.

Each accepted connection gets its own upstream connection; when either side closes, both do.
Bounded: every socket has a timeout, threads are daemons and ``close`` ends them all.
"""

from __future__ import annotations

import socket
import threading

from tests.support.node import free_port


class TcpProxy:
    def __init__(self, target_host: str, target_port: int):
        self.target = (target_host, target_port)
        self.port = free_port()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self._holding = threading.Event()
        self._closed = threading.Event()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.swallowed = 0  # answer bytes the client never got
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def hold_answers(self) -> None:
        """From now on the server's bytes are dropped instead of forwarded."""
        self._holding.set()

    def release(self) -> None:
        self._holding.clear()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for s in list(self._sockets):
                _close(s)

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:  # the server is down: the client sees the connection close
                _close(client)
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, True), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, answers: bool) -> None:
        src.settimeout(0.5)
        try:
            while not self._closed.is_set():
                try:
                    data = src.recv(65536)
                except socket.timeout:
                    continue
                if not data:
                    break
                if answers and self._holding.is_set():
                    self.swallowed += len(data)
                    continue
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src)
            _close(dst)
            with self._lock:
                self._sockets.discard(src)
                self._sockets.discard(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
