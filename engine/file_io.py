"""File access for the store's fixed-size segment files, behind one tiny interface.

Two implementations:
- ``MmapFileIO``: real files, memory-mapped. A segment file has its full size from the start
  but is sparse; its blocks are reserved with ``posix_fallocate`` a chunk at a time *before*
  the first write into that chunk (``Segment.reserve``, called by ``write``). A full disk is
  therefore an ``OSError(ENOSPC)`` from ``write``/``reserve`` that the store turns into a
  refused put -- never a SIGBUS from a page fault on a hole with no space behind it (ext4
  delayed allocation and tmpfs both deliver that). ``preallocate`` (RocketMQ's
  warmMapedFileEnable) reserves a whole segment when it is created instead.
  ``Segment.flush`` is ``fdatasync``: after it returns the bytes written are on disk.
- ``MemoryFileIO``: the same interface over ``bytearray``s, keeping for every file the bytes
  last flushed. ``crash(power_loss=...)`` returns the file system a restarted process would
  see: after a process kill everything written survives (it is in the page cache), after a
  power loss only flushed bytes do. Crash and torn-write tests use it to be fast and
  deterministic.

Invariants:
- a segment's ``buf`` supports slicing and ``struct.unpack_from``; reads copy (``bytes``) so
  results outlive the segment (retention may unmap it right after).
- Bytes are written only into reserved chunks. Reading a hole *through the mapping* of a tmpfs
  file allocates a page (and raises SIGBUS when the tmpfs is full), so code that may look at
  bytes nobody wrote (recovery probing for the end of a log, queries by arbitrary slot or
  offset) reads with ``pread`` or stays below ``next_hole``: holes read as zero there and
  cost nothing.
"""

from __future__ import annotations

import errno
import mmap
import os
import time
from pathlib import Path
from typing import Protocol

PAGE_SIZE = mmap.PAGESIZE


class Segment(Protocol):
    path: str
    size: int
    buf: object

    def write(self, pos: int, data) -> None: ...

    def write_parts(self, pos: int, parts, through_fd: bool | None = None) -> bool: ...

    def read(self, pos: int, n: int) -> bytes: ...

    def next_data(self, pos: int) -> int | None: ...

    def next_hole(self, pos: int) -> int: ...

    def pread(self, pos: int, n: int) -> bytes: ...

    def reserve(self, pos: int, n: int) -> None: ...

    def flush(self, start: int = 0, end: int | None = None) -> None: ...

    def close(self) -> None: ...

    @property
    def dir_unsynced(self) -> bool: ...


class FileIO(Protocol):
    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> Segment: ...

    def list_dir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def exists(self, path: str) -> bool: ...

    def mtime(self, path: str) -> float: ...

    def touch(self, path: str) -> None: ...

    def disk_usage(self, path: str) -> tuple[int, int]: ...


PWRITE_MIN = 4096  # writes at least this large go through pwrite on segments that keep a descriptor
# Space is reserved (posix_fallocate) this much at a time: log segments, written front to back,
# in large chunks (one call per MiB); randomly written ones (queue units, hash slots) a page at a
# time, so a file that holds a few units occupies no more than it did sparse.
LOG_ALLOC_CHUNK = 1 << 20
RANDOM_ALLOC_CHUNK = PAGE_SIZE
_NO_FALLOCATE = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


def disk_full_error(path: str) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def _fallocate(fd: int, pos: int, n: int) -> bool:
    """Reserve blocks for [pos, pos + n); False when the file system cannot (no protection then)."""
    try:
        os.posix_fallocate(fd, pos, n)
    except OSError as exc:
        if exc.errno in _NO_FALLOCATE:
            return False
        raise
    return True


class MmapSegment:
    """One mapped segment file holding a single descriptor: the one ``mmap`` keeps for itself.

    The descriptor used to create and map the file is closed right after mapping (a node with
    10,000 queues would otherwise hold two per consume-queue file). ``flush``, ``reserve``,
    ``pread`` and ``next_data`` open the file briefly by path; a path that is gone belongs to a
    segment that retention or topic deletion has removed, which needs no flush.

    ``log_writes`` (the commitlog: few, large files written front to back) keeps that descriptor
    instead, and writes of ``pwrite_min`` bytes or more (``PWRITE_MIN``: Kafka batches) go
    through ``pwrite``: the kernel copies into the page cache without a page fault per page,
    about three times faster than a copy into the mapping, and without the GIL. Reads through
    the mapping see those bytes at once (one page cache). ``pwrite_min = 0`` sends every write
    through ``pwrite``: a copy into the mapping that faults on a stalled disk (a frozen or
    throttled file system) blocks holding the GIL, i.e. the whole process; a blocked ``pwrite``
    blocks only its thread. That costs two system calls per message (about half the
    single-thread put rate), so it is for writers that may wait on the disk anyway (SYNC_FLUSH,
    the checkpoint).

    Space: ``_reserved`` has one byte per allocation chunk, set once the chunk's blocks are
    reserved. It starts empty when an existing file is opened; reserving blocks a file already
    has costs one system call and no space, so nothing needs to be remembered across restarts.
    """

    __slots__ = ("path", "size", "buf", "_open", "_wfd", "_reserved", "_shift", "_chunk", "pwrite_min", "_ino",
                 "_sync_dir")

    def __init__(self, path: str, size: int, preallocate: bool = False, random_access: bool = False,
                 log_writes: bool = False):
        self.path = path
        self.size = size
        chunk = LOG_ALLOC_CHUNK if log_writes else RANDOM_ALLOC_CHUNK
        self._chunk = chunk
        self._shift = chunk.bit_length() - 1
        self.pwrite_min = PWRITE_MIN
        self._sync_dir = ""  # the directory whose entry for this new file is not on disk yet
        # One open says whether the file is new (a queue's first file is created on the put path:
        # every system call here is paid per new queue)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
            existed = False
        except FileExistsError:
            fd = os.open(path, os.O_RDWR)
            existed = True
        chunks = (size + chunk - 1) // chunk
        reserved = None
        try:
            current = os.fstat(fd).st_size if existed else 0
            if not existed or current < size:
                if preallocate:
                    try:
                        if _fallocate(fd, 0, size):
                            reserved = bytearray(b"\x01" * chunks)
                    except OSError:
                        if not existed:
                            os.close(fd)
                            fd = -1
                            os.unlink(path)
                        raise
                if reserved is None:
                    os.ftruncate(fd, size)
            elif current > size:
                size = self.size = current
                chunks = (size + chunk - 1) // chunk
            if reserved is None:
                reserved = bytearray(chunks)
                if not existed and random_access and chunks:
                    # a new queue or index file is written at once (its first unit, its header):
                    # reserve the first chunk with this descriptor rather than reopening the file
                    # for it on the first write
                    try:
                        if _fallocate(fd, 0, min(chunk, size)):
                            reserved[0] = 1
                        else:
                            reserved[:] = b"\x01" * chunks  # the file system cannot reserve
                    except OSError:
                        os.close(fd)
                        fd = -1
                        os.unlink(path)
                        raise
            self.buf = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            if random_access:
                # No read-around on faults. The first fault of a fresh sparse file otherwise
                # costs ~1 ms (read-around over holes); with one file per queue that was the
                # whole cost of a produce to a queue's first message.
                self.buf.madvise(mmap.MADV_RANDOM)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        self._reserved = reserved
        if not existed:
            self._sync_dir = os.path.dirname(path) or "."
        if log_writes:
            self._ino = os.fstat(fd).st_ino
            self._wfd = fd
        else:
            self._ino = 0
            os.close(fd)
            self._wfd = -1
        self._open = True

    def reserve(self, pos: int, n: int) -> None:
        """Make sure [pos, pos + n) has blocks behind it; ``OSError(ENOSPC)`` when the disk is full."""
        shift = self._shift
        first = pos >> shift
        reserved = self._reserved
        last = min((pos + n - 1) >> shift if n > 0 else first, len(reserved) - 1)
        if first > last:
            return
        if reserved[first] and reserved[last]:
            i = first + 1
            while i < last and reserved[i]:
                i += 1
            if i >= last:
                return
        self._reserve_chunks(first, last)

    def _reserve_chunks(self, first: int, last: int) -> None:
        reserved = self._reserved
        fd = self._fd(write=True)
        if fd < 0:  # closed or deleted meanwhile: nothing will be written
            return
        try:
            i = first
            while i <= last:
                if reserved[i]:
                    i += 1
                    continue
                j = i
                while j + 1 <= last and not reserved[j + 1]:
                    j += 1
                start = i << self._shift
                end = min((j + 1) << self._shift, self.size)
                if not _fallocate(fd, start, end - start):
                    reserved[:] = b"\x01" * len(reserved)  # the file system cannot reserve: stop trying
                    return
                reserved[i:j + 1] = b"\x01" * (j + 1 - i)
                i = j + 1
        finally:
            os.close(fd)

    def write(self, pos: int, data) -> None:
        n = len(data)
        self.reserve(pos, n)
        if n >= self.pwrite_min and self._wfd >= 0:
            view = memoryview(data)
            done = 0
            while done < n:
                done += os.pwrite(self._wfd, view[done:], pos + done)
        else:
            self.buf[pos:pos + n] = data

    def write_parts(self, pos: int, parts, through_fd: bool | None = None) -> bool:
        """Write the buffers ``parts`` one after the other from ``pos`` (a unit whose body is a
        view of the request it came in: never joined in the interpreter). One ``pwritev`` when
        the descriptor is kept and the whole is ``pwrite_min`` or more (``through_fd`` forces
        the choice either way), else copies into the mapping. True when written through the
        descriptor: a small write that completes it (TOTALSIZE, last) should go the same way,
        since a copy into the mapping of a page just written by ``pwrite`` costs a page fault."""
        n = 0
        for part in parts:
            n += len(part)
        self.reserve(pos, n)
        fd = self._wfd
        if fd >= 0 and (n >= self.pwrite_min if through_fd is None else through_fd):
            done = os.pwritev(fd, parts, pos)
            if done < n:  # short write (rare): the rest part by part
                at = pos
                for part in parts:
                    view = memoryview(part)
                    skip = min(max(done - (at - pos), 0), len(view))
                    sent = skip
                    while sent < len(view):
                        sent += os.pwrite(fd, view[sent:], at + sent)
                    at += len(view)
            return True
        buf = self.buf
        for part in parts:
            size = len(part)
            buf[pos:pos + size] = part
            pos += size
        return False

    def read(self, pos: int, n: int) -> bytes:
        return self.buf[pos:pos + n]

    def pread(self, pos: int, n: int) -> bytes:
        """Read through the descriptor: holes read as zero without allocating anything."""
        n = max(0, min(n, self.size - pos))
        fd = self._fd()
        if fd < 0:
            return bytes(n)
        try:
            data = os.pread(fd, n, pos)
        finally:
            os.close(fd)
        return data if len(data) == n else data + bytes(n - len(data))

    def _fd(self, write: bool = False) -> int:
        """A descriptor of the caller's own for the file (to close), or -1 when it is closed or gone."""
        if not self._open:
            return -1
        if self._wfd >= 0:
            try:
                return os.dup(self._wfd)
            except OSError:  # closed meanwhile
                return -1
        try:
            return os.open(self.path, os.O_RDWR if write else os.O_RDONLY)
        except FileNotFoundError:  # closed and deleted meanwhile (retention, topic deletion)
            return -1

    def next_data(self, pos: int) -> int | None:
        """The first offset >= pos that is not in a hole of the sparse file (None: all holes)."""
        fd = self._fd()
        if fd < 0:
            return pos
        try:
            return os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return None
            return pos  # SEEK_DATA unsupported: assume data
        finally:
            os.close(fd)

    def next_hole(self, pos: int) -> int:
        """The first offset >= pos in a hole (reads as zero; the size when there is none)."""
        if pos >= self.size:
            return self.size
        fd = self._fd()
        if fd < 0:
            return self.size
        try:
            return min(os.lseek(fd, pos, os.SEEK_HOLE), self.size)
        except OSError:
            return self.size  # unsupported: no holes known
        finally:
            os.close(fd)

    def flush(self, start: int = 0, end: int | None = None) -> None:
        # fdatasync writes back the pages dirtied through the shared mapping too (Linux tracks
        # them in the page cache, per file, whichever descriptor asks), and unlike mmap.flush
        # (msync) it releases the GIL, so writers keep encoding while the group commit waits
        # for the disk.
        if self._sync_dir:
            self._fsync_dir()
        end = self.size if end is None else end
        if end <= start:
            return
        fd = self._fd()
        if fd < 0:  # closed: deleted by retention or topic deletion
            return
        try:
            os.fdatasync(fd)
        finally:
            os.close(fd)

    @property
    def dir_unsynced(self) -> bool:
        """True while the directory entry of this newly created file is not on disk: the next
        ``flush`` syncs it first (so a flush covers the file's name as well as its bytes)."""
        return bool(self._sync_dir)

    def _fsync_dir(self) -> None:
        d = self._sync_dir
        try:
            dfd = os.open(d, os.O_RDONLY)
        except FileNotFoundError:  # the directory is gone (topic deleted): nothing to keep
            self._sync_dir = ""
            return
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._sync_dir = ""

    def dup_fd(self) -> int:
        """A new descriptor of this file (the caller closes it), or -1 when there is none.

        It keeps the file's data readable after retention unlinks and closes the segment: the
        kernel frees an unlinked file's blocks only when its last descriptor closes. Checked
        against the file's inode, so a descriptor number reused after a concurrent close is
        never taken for this file."""
        wfd = self._wfd
        if wfd < 0 or not self._open:
            return -1
        try:
            fd = os.dup(wfd)
        except OSError:
            return -1
        try:
            if os.fstat(fd).st_ino == self._ino:
                return fd
        except OSError:
            pass
        os.close(fd)
        return -1

    def close(self) -> None:
        if self._open:
            self._open = False  # first, so a concurrent flush can tell a missing file is this close
            try:
                self.buf.close()
            finally:
                if self._wfd >= 0:
                    fd, self._wfd = self._wfd, -1
                    os.close(fd)


class MmapFileIO:
    """Real files. ``preallocate`` (RocketMQ's warmMapedFileEnable) reserves a segment's blocks
    when it is created; otherwise they are reserved a chunk at a time just before use."""

    def __init__(self, preallocate: bool = False, pwrite_all: bool = False):
        self.preallocate = preallocate
        self.pwrite_all = pwrite_all  # log segments write everything by pwrite (see MmapSegment)

    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> MmapSegment:
        # A new file's directory entry must survive a power loss as well as its data: the
        # segment's first flush syncs the directory before the file's bytes (``dir_unsynced``).
        # Not here: a new file is created on the put path (a consume queue's first message),
        # under the put lock, and a directory fsync there (a journal commit, milliseconds)
        # stalled every producer once per new queue; nothing counts a file's bytes durable
        # before its flush anyway.
        seg = MmapSegment(path, size, self.preallocate, random_access, log_writes)
        if log_writes and self.pwrite_all:
            seg.pwrite_min = 0
        return seg

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
        try:
            os.mkdir(path)  # the usual case, a queue's directory in its topic's: one system call
        except FileExistsError:
            if not os.path.isdir(path):
                raise
        except FileNotFoundError:
            os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def mtime(self, path: str) -> float:
        return os.stat(path).st_mtime

    def touch(self, path: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def disk_usage(self, path: str) -> tuple[int, int]:
        """(total, used) bytes of the file system holding ``path``, as RocketMQ computes its
        ratio: used = total - free, root-reserved blocks counted as free."""
        st = os.statvfs(path)
        total = st.f_blocks * st.f_frsize
        return total, total - st.f_bfree * st.f_frsize


class _MemFile:
    __slots__ = ("data", "durable", "mtime", "pages")

    def __init__(self, size: int):
        self.data = bytearray(size)
        self.durable = bytearray(size)
        self.mtime = time.time()
        self.pages: set[int] = set()  # pages with space reserved (counted against capacity)


class MemorySegment:
    __slots__ = ("path", "size", "buf", "_file", "_fio", "pwrite_min")

    def __init__(self, path: str, f: _MemFile, fio: "MemoryFileIO"):
        self.path = path
        self._file = f
        self._fio = fio
        self.buf = f.data
        self.size = len(f.data)
        self.pwrite_min = PWRITE_MIN  # no effect in memory

    def reserve(self, pos: int, n: int) -> None:
        pages = self._file.pages
        first, last = pos // PAGE_SIZE, (pos + max(n, 1) - 1) // PAGE_SIZE
        missing = [p for p in range(first, last + 1) if p not in pages]
        if missing:
            fio = self._fio
            if fio.capacity is not None and fio.used + len(missing) * PAGE_SIZE > fio.capacity:
                raise disk_full_error(self.path)
            pages.update(missing)
            fio.used += len(missing) * PAGE_SIZE

    def write(self, pos: int, data) -> None:
        self.reserve(pos, len(data))
        self.buf[pos:pos + len(data)] = data
        self._file.mtime = time.time()

    def write_parts(self, pos: int, parts, through_fd: bool | None = None) -> bool:
        for part in parts:
            self.write(pos, part)
            pos += len(part)
        return False

    def read(self, pos: int, n: int) -> bytes:
        return bytes(self.buf[pos:pos + n])

    def pread(self, pos: int, n: int) -> bytes:
        return bytes(self.buf[pos:pos + n])

    def next_data(self, pos: int) -> int | None:
        return pos if pos < self.size else None

    def next_hole(self, pos: int) -> int:
        return self.size

    def flush(self, start: int = 0, end: int | None = None) -> None:
        end = self.size if end is None else end
        self._file.durable[start:end] = self.buf[start:end]

    @property
    def dir_unsynced(self) -> bool:
        return False  # directories here are always durable

    def close(self) -> None:
        pass


class MemoryFileIO:
    """In-memory files; ``crash()`` models what survives a kill or a power loss, ``capacity``
    (bytes, None = unlimited) a disk that fills up: a write needing a page beyond it raises
    ``OSError(ENOSPC)`` as a real reservation does."""

    def __init__(self, capacity: int | None = None) -> None:
        self.files: dict[str, _MemFile] = {}
        self.dirs: set[str] = set()
        self.capacity = capacity
        self.used = 0

    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> MemorySegment:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = _MemFile(size)
        return MemorySegment(path, f, self)

    def disk_usage(self, path: str) -> tuple[int, int]:
        return (self.capacity or 1 << 40), self.used

    def list_dir(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        names = {p[len(prefix):].split("/", 1)[0] for p in list(self.files) + list(self.dirs) if p.startswith(prefix)}
        return sorted(n for n in names if n)

    def makedirs(self, path: str) -> None:
        p = Path(path)
        while str(p) not in self.dirs and str(p) != p.anchor:
            self.dirs.add(str(p))
            p = p.parent

    def remove(self, path: str) -> None:
        f = self.files.pop(path, None)
        if f is not None:
            self.used -= len(f.pages) * PAGE_SIZE

    def exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def mtime(self, path: str) -> float:
        return self.files[path].mtime

    def touch(self, path: str) -> None:
        if path not in self.files:
            self.files[path] = _MemFile(0)

    def set_mtime(self, path: str, when: float) -> None:
        self.files[path].mtime = when

    def crash(self, power_loss: bool = False) -> "MemoryFileIO":
        """The files a restarted process sees: all written bytes, or only flushed ones."""
        after = MemoryFileIO(self.capacity)
        after.dirs = set(self.dirs)
        for path, f in self.files.items():
            g = _MemFile(len(f.data))
            src = f.durable if power_loss else f.data
            g.data[:] = src
            g.durable[:] = src
            g.mtime = f.mtime
            g.pages = set(f.pages)
            after.files[path] = g
        after.used = self.used
        return after
