"""Writing a response's buffers to the client's socket without joining them first.

A Fetch response is a small header, then the stored record batches as they are (memoryviews
into what the store read), then small trailers. ``StreamWriter.writelines`` on Python 3.11
joins all of that into one new bytes object before the first ``send`` — a full copy of every
fetched byte in the interpreter. ``write_chunks`` hands the buffers to the kernel with one
``writev`` (scatter/gather: the kernel copies straight from each buffer) when nothing is
queued in the transport, which is the usual case; what the socket does not take at once goes
through the transport as before, after everything already written, so the byte order on the
wire never changes.

Fetch on plain TCP goes further: the stored batches are not read at all. The handler returns
``FileRun`` s (segment file, position, length; the run holds the file open, so retention may
delete the segment meanwhile) and ``write_chunks`` sends them with ``os.sendfile`` between the
``writev`` s of the frame's own bytes -- the kernel copies from the page cache to the socket.
Kafka answers in request order: a run goes out directly only when the transport has nothing
queued; otherwise, and when the socket does not take a run at once, ``loop.sendfile`` finishes
it after the transport has sent what is queued (reading from the client waits meanwhile). Runs
are read into memory where no plain socket takes them (TLS, encoders that copy), and in a
response under ``_RUNS_MIN_BYTES``: one ``pread`` per run and a single send cost less than the
``writev`` / ``sendfile`` / ``writev`` they replace, and the client gets the answer in one
segment instead of three (a long poll woken by one small batch, the end-to-end latency case).

A run that ``sendfile`` refuses for a reason other than the connection going away (the
kernel out of memory for it under load, ``SendfileNotAvailableError``) is sent as a copy instead:
the client sees a normal answer, only the connection's own errors close it.

Falls back to ``writelines`` unchanged for TLS (the bytes must be encrypted by the transport),
when the transport already holds unsent bytes (they must go first), or when the transport does
not expose a plain socket descriptor.
"""

from __future__ import annotations

import asyncio
import errno
import os

import structlog

log = structlog.get_logger("rockafka.kafka.wire")

# writev takes at most IOV_MAX buffers (1024 on Linux); longer lists are written in slices
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") and "SC_IOV_MAX" in os.sysconf_names else 16
# below this a single send of a joined buffer is as cheap: no point in the extra checks
_MIN_BYTES = 16 * 1024
# a Fetch response smaller than this is sent from memory even when it holds file runs
_RUNS_MIN_BYTES = 16 * 1024


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


class FileRun:
    """Bytes of a segment file served by ``os.sendfile``: ``length`` bytes at ``pos`` of the
    file ``ref`` holds open (engine.commitlog.SegmentRef; holding it keeps the bytes readable
    even if retention deletes the segment before the response is sent). ``records``: how many
    records they hold, for the metrics. ``materialize`` reads them into memory for every path
    that cannot send from the file (TLS, a busy transport, an encoder that copies)."""

    __slots__ = ("ref", "pos", "length", "records")

    def __init__(self, ref, pos: int, length: int, records: int):
        self.ref, self.pos, self.length, self.records = ref, pos, length, records

    def __len__(self) -> int:
        return self.length

    def materialize(self, skip: int = 0) -> bytes:
        want = self.length - skip
        data = os.pread(self.ref.fd, want, self.pos + skip)
        while len(data) < want:  # a regular file reads short only at its end: not for written bytes
            more = os.pread(self.ref.fd, want - len(data), self.pos + skip + len(data))
            if not more:
                raise OSError(f"segment file shorter than a stored batch ({len(data)} of {want} bytes)")
            data += more
        return data


def _materialized(chunks) -> list:
    return [c.materialize() if type(c) is FileRun else c for c in chunks]


def write_chunks(writer: asyncio.StreamWriter, chunks: list, fd: int, runs: bool = False) -> None:
    """Write ``chunks`` in order; ``fd`` from ``plain_fd`` (-1: always through the transport).

    What the socket does not take at once is queued in the transport buffer by buffer (one copy
    of the unsent tail, instead of a join of the whole response and then a copy of it); the
    caller drains as before. ``runs``: the chunks may hold ``FileRun`` s (Fetch)."""
    transport = writer.transport
    if runs and has_runs(chunks):  # no plain socket to send the files to: read them
        chunks = _materialized(chunks)
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


class _RunFile:
    """What ``loop.sendfile`` wants of a file: its descriptor (positions are given per call)."""

    __slots__ = ("fd",)
    mode = "rb"

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def seek(self, *_args) -> int:
        return 0


def has_runs(chunks: list) -> bool:
    return any(type(c) is FileRun for c in chunks)


def worth_sendfile(chunks: list) -> bool:
    """A Fetch response for ``send_with_runs``: it holds runs and is ``_RUNS_MIN_BYTES`` or more
    (``write_chunks`` reads the runs of a smaller one and sends it at once)."""
    total = 0
    runs = False
    for c in chunks:
        total += len(c)
        if type(c) is FileRun:
            runs = True
    return runs and total >= _RUNS_MIN_BYTES


_GONE_ERRNOS = frozenset({errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ESHUTDOWN, errno.EBADF,
                          errno.ECONNABORTED})


def _connection_gone(exc: OSError) -> bool:
    return isinstance(exc, ConnectionError) or exc.errno in _GONE_ERRNOS


def _copy_rest(writer: asyncio.StreamWriter, run: FileRun, done: int, exc: BaseException) -> None:
    """Send what ``sendfile`` did not of ``run`` as a copy through the transport (after what it
    holds, so the order on the wire stays)."""
    log.info("fetch_sendfile_fell_back", error=str(exc) or type(exc).__name__, bytes=run.length - done)
    writer.write(run.materialize(done))


async def send_with_runs(writer: asyncio.StreamWriter, chunks: list, fd: int) -> None:
    """Write a response holding ``FileRun`` s on a plain TCP connection (``fd`` from ``plain_fd``):
    memory buffers with ``writev``, runs with ``sendfile`` (the kernel copies from the page
    cache to the socket; the bytes never enter the interpreter), in order. A run the socket
    does not take at once is finished with ``loop.sendfile``, which first waits until the
    transport has sent everything queued before it, and reads nothing meanwhile; memory buffers
    the socket does not take go into the transport, so the byte order never changes."""
    transport = writer.transport
    loop = asyncio.get_running_loop()
    i, n = 0, len(chunks)
    while i < n:
        if transport.is_closing():
            return  # the connection is going: nothing more will be read from it either
        c = chunks[i]
        if type(c) is FileRun:
            done = 0
            if not transport.get_write_buffer_size():
                try:
                    while done < c.length:
                        sent = os.sendfile(fd, c.ref.fd, c.pos + done, c.length - done)
                        if sent == 0:
                            break
                        done += sent
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError as exc:
                    if _connection_gone(exc):  # reset or closed: the next read of the connection sees it
                        transport.abort()
                        return
                    # sendfile itself failed (no memory for it, a file system that cannot):
                    # the rest of the run goes as a copy, the client never notices
                    _copy_rest(writer, c, done, exc)
                    done = c.length
            if done < c.length:
                try:
                    await loop.sendfile(transport, _RunFile(c.ref.fd), c.pos + done, c.length - done, fallback=False)
                except asyncio.SendfileNotAvailableError as exc:  # raised before any byte went out
                    _copy_rest(writer, c, done, exc)
                except (ConnectionError, OSError):  # part may have gone out: the stream is broken
                    transport.abort()
                    return
            i += 1
            continue
        j = i
        while j < n and type(chunks[j]) is not FileRun:
            j += 1
        group = chunks[i:j]
        i = j
        if transport.get_write_buffer_size():
            writer.writelines(group)
            continue
        while group:
            part = group[:_IOV_MAX]
            try:
                sent = os.writev(fd, part)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:
                transport.abort()
                return
            k = 0
            while k < len(part) and sent >= len(part[k]):
                sent -= len(part[k])
                k += 1
            if k < len(part):  # the socket is full: the rest of this group goes through the transport
                if sent:
                    group[k] = memoryview(group[k]).cast("B")[sent:]
                writer.writelines(group[k:])
                break
            group = group[k:]
