"""Fetch responses sent from segment files: when ``sendfile`` fails for a reason other than the
connection going away (the kernel short of memory under load, asyncio's
``SendfileNotAvailableError``), the bytes go as a copy and the client receives the whole,
correctly ordered response; only the connection's own errors close it.

The failure is injected into ``os.sendfile`` (the kernel call a loaded machine makes fail); the
socket, the file and the event loop are real."""

from __future__ import annotations

import asyncio
import errno
import os
import socket

import pytest

from gateway_kafka import wire_out
from gateway_kafka.wire_out import FileRun, send_with_runs


class _Ref:
    def __init__(self, fd: int):
        self.fd = fd


def _run(tmp_path, fail):
    payload = os.urandom(300_000)
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 1000 + payload + b"y" * 1000)
    fd = os.open(path, os.O_RDONLY)
    head, tail = b"H" * 20_000, b"T" * 50
    expected = head + payload + tail
    calls = {"n": 0}
    real = os.sendfile

    def failing(out_fd, in_fd, offset, count):
        calls["n"] += 1
        return fail(calls["n"], real, out_fd, in_fd, offset, count)

    async def main():
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        loop = asyncio.get_running_loop()
        _r, writer = await asyncio.open_connection(sock=a)
        got = bytearray()

        async def reader():
            while len(got) < len(expected):
                chunk = await loop.sock_recv(b, 1 << 16)
                if not chunk:
                    return
                got.extend(chunk)
        task = asyncio.ensure_future(reader())
        await send_with_runs(writer, [head, FileRun(_Ref(fd), 1000, len(payload), 1), tail], a.fileno())
        if writer.transport.is_closing():
            b.shutdown(socket.SHUT_WR)
            task.cancel()
            await asyncio.sleep(0)
            while True:  # what reached the peer before the close
                try:
                    chunk = b.recv(1 << 16)
                except BlockingIOError:
                    break
                if not chunk:
                    break
                got.extend(chunk)
        else:
            await writer.drain()
            await asyncio.wait_for(task, 30)
        closing = writer.transport.is_closing()
        writer.close()
        b.close()
        return bytes(got), closing

    os.sendfile = failing
    try:
        got, closing = asyncio.run(main())
    finally:
        os.sendfile = real
        os.close(fd)
    return got, closing, expected, calls["n"]


def _enomem(_n, _real, *_a):
    raise OSError(errno.ENOMEM, "Cannot allocate memory")


def _busy_then_enomem(n, real, *a):
    if n == 1:
        raise BlockingIOError(errno.EAGAIN, "try again")   # the socket is full: loop.sendfile takes over
    raise OSError(errno.ENOMEM, "Cannot allocate memory")  # ... and fails: SendfileNotAvailableError


def _partial_then_enomem(n, real, out_fd, in_fd, offset, count):
    if n == 1:
        return real(out_fd, in_fd, offset, min(count, 4096))
    raise OSError(errno.ENOMEM, "Cannot allocate memory")


@pytest.mark.parametrize("fail", [_enomem, _busy_then_enomem, _partial_then_enomem],
                         ids=["direct", "loop-sendfile", "after-a-partial-send"])
def test_a_failing_sendfile_falls_back_to_a_copy(tmp_path, fail):
    got, closing, expected, calls = _run(tmp_path, fail)
    assert calls >= 1, "sendfile was not tried"
    assert not closing, "the connection was closed"
    assert got == expected


def test_a_connection_reset_during_sendfile_closes_only_that_connection(tmp_path):
    def reset(_n, _real, *_a):
        raise ConnectionResetError(errno.ECONNRESET, "reset")
    got, closing, expected, _calls = _run(tmp_path, reset)
    assert closing and got == b"H" * 20_000
    assert wire_out._connection_gone(ConnectionResetError(errno.ECONNRESET, "x"))


def _serve_response(tmp_path, chunks_of):
    """Write the response ``chunks_of(fd)`` as the Kafka serve loop does (send_with_runs when
    ``worth_sendfile``, else write_chunks) to a real socket; (bytes received, sendfile calls)."""
    path = tmp_path / "segment"
    payload = os.urandom(200_000)
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY)
    calls = {"n": 0}
    real = os.sendfile

    def counting(*a):
        calls["n"] += 1
        return real(*a)

    async def main(chunks):
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        loop = asyncio.get_running_loop()
        _r, writer = await asyncio.open_connection(sock=a)
        want = sum(len(c) for c in chunks)
        if wire_out.worth_sendfile(chunks):
            await send_with_runs(writer, chunks, a.fileno())
        else:
            wire_out.write_chunks(writer, chunks, a.fileno(), runs=True)
        await writer.drain()
        got = bytearray()
        while len(got) < want:
            got.extend(await asyncio.wait_for(loop.sock_recv(b, 1 << 16), 30))
        writer.close()
        b.close()
        return bytes(got)

    os.sendfile = counting
    try:
        chunks = chunks_of(fd)
        expected = b"".join(bytes(c) if type(c) is not FileRun else payload[c.pos:c.pos + c.length] for c in chunks)
        got = asyncio.run(main(chunks))
    finally:
        os.sendfile = real
        os.close(fd)
    return got, expected, calls["n"]


def test_a_small_fetch_answer_holding_a_run_is_sent_from_memory_and_a_large_one_from_the_file(tmp_path):
    # one 1 KiB batch woken by a long poll: read and sent at once, no sendfile between two writes
    small, expected, calls = _serve_response(tmp_path, lambda fd: [b"H" * 74, FileRun(_Ref(fd), 5000, 1094, 1), b"\0\0\0"])
    assert small == expected and calls == 0
    # a response of many KiB: the batches still go from the file
    large, expected, calls = _serve_response(tmp_path, lambda fd: [b"H" * 74, FileRun(_Ref(fd), 100, 150_000, 9), b"\0\0\0"])
    assert large == expected and calls >= 1
