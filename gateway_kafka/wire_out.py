"""Writing a response's buffers to the client's socket without joining them first.

A Fetch response is a small header, then the stored record batches as they are (memoryviews
into what the store read), then small trailers. ``StreamWriter.writelines`` on Python 3.11
joins all of that into one new bytes object before the first ``send`` — a full copy of every
fetched byte in the interpreter. ``write_chunks`` hands the buffers to the kernel with one
``writev`` (scatter/gather: the kernel copies straight from each buffer) when nothing is
queued in the transport, which is the usual case; what the socket does not take at once goes
through the transport as before, after everything already written, so the byte order on the
wire never changes.

Falls back to ``writelines`` unchanged for TLS (the bytes must be encrypted by the transport),
when the transport already holds unsent bytes (they must go first), or when the transport does
not expose a plain socket descriptor.
"""

from __future__ import annotations

import asyncio
import os

# writev takes at most IOV_MAX buffers (1024 on Linux); longer lists are written in slices
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16
# below this a single send of a joined buffer is as cheap: no point in the extra checks
_MIN_BYTES = 16 * 1024


def plain_fd(writer: asyncio.StreamWriter) -> int:
    """The socket descriptor when the connection is plain TCP (no TLS), else -1."""
    transport = writer.transport
    if transport.get_extra_info("sslcontext") is not None or transport.get_extra_info("ssl_object") is not None:
        return -1
    sock = transport.get_extra_info("socket")
    try:
        return sock.fileno() if sock is not None else -1
    except (OSError, ValueError):
        return -1


def write_chunks(writer: asyncio.StreamWriter, chunks: list, fd: int) -> None:
    """Write ``chunks`` in order; ``fd`` from ``plain_fd`` (-1: always through the transport).

    What the socket does not take at once is queued in the transport buffer by buffer (one copy
    of the unsent tail, instead of a join of the whole response and then a copy of it); the
    caller drains as before."""
    transport = writer.transport
    if fd < 0 or len(chunks) < 2 or transport.is_closing() or transport.get_write_buffer_size():
        writer.writelines(chunks)
        return
    total = 0
    for c in chunks:
        total += len(c)
    if total < _MIN_BYTES:
        writer.writelines(chunks)
        return
    start = 0
    while start < len(chunks):
        batch = chunks[start:start + _IOV_MAX]
        try:
            sent = os.writev(fd, batch)
        except (BlockingIOError, InterruptedError):
            sent = 0
        except OSError:  # reset or closed: let the transport see it and report it its own way
            writer.writelines(chunks[start:])
            return
        # skip what went out; the first partly written buffer keeps only its unsent tail
        i = 0
        while i < len(batch) and sent >= len(batch[i]):
            sent -= len(batch[i])
            i += 1
        start += i
        if i < len(batch):
            if sent:
                chunks[start] = memoryview(chunks[start]).cast("B")[sent:]
            for rest in chunks[start:]:
                writer.write(rest)
            return
