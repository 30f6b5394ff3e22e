"""File access for the store's fixed-size segment files, behind one tiny interface.

Two implementations:
- ``MmapFileIO``: real files, memory-mapped; sparse by default, or preallocated
  (``posix_fallocate``, so a full disk fails when a segment is created, not later as SIGBUS
  on a write into a hole) when ``preallocate`` is set.
  ``Segment.flush`` is ``fdatasync``: after it returns the bytes written are on disk.
- ``MemoryFileIO``: the same interface over ``bytearray``s, keeping for every file the bytes
  last flushed. ``crash(power_loss=...)`` returns the file system a restarted process would
  see: after a process kill everything written survives (it is in the page cache), after a
  power loss only flushed bytes do. Crash and torn-write tests use it to be fast and
  deterministic.

Invariant: a segment's ``buf`` supports slicing and ``struct.unpack_from``; reads copy
(``bytes``) so results outlive the segment (retention may unmap it right after).
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

    def read(self, pos: int, n: int) -> bytes: ...

    def next_data(self, pos: int) -> int | None: ...

    def flush(self, start: int = 0, end: int | None = None) -> None: ...

    def close(self) -> None: ...


class FileIO(Protocol):
    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> Segment: ...

    def list_dir(self, path: str) -> list[str]: ...

    def makedirs(self, path: str) -> None: ...

    def remove(self, path: str) -> None: ...

    def exists(self, path: str) -> bool: ...

    def mtime(self, path: str) -> float: ...

    def touch(self, path: str) -> None: ...


PWRITE_MIN = 4096  # writes at least this large go through pwrite on segments that keep a descriptor


class MmapSegment:
    """One mapped segment file holding a single descriptor: the one ``mmap`` keeps for itself.

    The descriptor used to create and map the file is closed right after mapping (a node with
    10,000 queues would otherwise hold two per consume-queue file). ``flush`` and ``next_data``
    open the file briefly by path; a path that is gone belongs to a segment that retention or
    topic deletion has removed, which needs no flush.

    ``log_writes`` (the commitlog: few, large files written front to back) keeps that descriptor
    instead, and writes of ``PWRITE_MIN`` bytes or more (Kafka batches) go through ``pwrite``:
    the kernel copies into the page cache without a page fault per page, about three times
    faster than a copy into the mapping, and without the GIL. Reads through the mapping see
    those bytes at once (one page cache).
    """

    __slots__ = ("path", "size", "buf", "_open", "_wfd")

    def __init__(self, path: str, size: int, preallocate: bool = False, random_access: bool = False,
                 log_writes: bool = False):
        self.path = path
        self.size = size
        existed = os.path.exists(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            current = os.fstat(fd).st_size
            if (not existed or current < size) and not preallocate:
                os.ftruncate(fd, size)
            elif not existed or current < size:
                try:
                    os.posix_fallocate(fd, 0, size)
                except OSError as exc:
                    if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                        os.ftruncate(fd, size)
                    else:
                        if not existed:
                            os.close(fd)
                            fd = -1
                            os.unlink(path)
                        raise
            elif current > size:
                size = self.size = current
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
        if log_writes:
            self._wfd = fd
        else:
            os.close(fd)
            self._wfd = -1
        self._open = True

    def write(self, pos: int, data) -> None:
        n = len(data)
        if n >= PWRITE_MIN and self._wfd >= 0:
            view = memoryview(data)
            done = 0
            while done < n:
                done += os.pwrite(self._wfd, view[done:], pos + done)
        else:
            self.buf[pos:pos + n] = data

    def read(self, pos: int, n: int) -> bytes:
        return self.buf[pos:pos + n]

    def _fd(self) -> int:
        """A descriptor of the caller's own for the file (to close), or -1 when it is closed or gone."""
        if not self._open:
            return -1
        if self._wfd >= 0:
            try:
                return os.dup(self._wfd)
            except OSError:  # closed meanwhile
                return -1
        try:
            return os.open(self.path, os.O_RDONLY)
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

    def flush(self, start: int = 0, end: int | None = None) -> None:
        # fdatasync writes back the pages dirtied through the shared mapping too (Linux tracks
        # them in the page cache, per file, whichever descriptor asks), and unlike mmap.flush
        # (msync) it releases the GIL, so writers keep encoding while the group commit waits
        # for the disk.
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
    when it is created; otherwise files are sparse and the store checks free space instead."""

    def __init__(self, preallocate: bool = False):
        self.preallocate = preallocate

    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> MmapSegment:
        new = not os.path.exists(path)
        seg = MmapSegment(path, size, self.preallocate, random_access, log_writes)
        if new:  # the directory entry must survive a power loss as well as the data
            dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        return seg

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []

    def makedirs(self, path: str) -> None:
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


class _MemFile:
    __slots__ = ("data", "durable", "mtime")

    def __init__(self, size: int):
        self.data = bytearray(size)
        self.durable = bytearray(size)
        self.mtime = time.time()


class MemorySegment:
    __slots__ = ("path", "size", "buf", "_file")

    def __init__(self, path: str, f: _MemFile):
        self.path = path
        self._file = f
        self.buf = f.data
        self.size = len(f.data)

    def write(self, pos: int, data) -> None:
        self.buf[pos:pos + len(data)] = data
        self._file.mtime = time.time()

    def read(self, pos: int, n: int) -> bytes:
        return bytes(self.buf[pos:pos + n])

    def next_data(self, pos: int) -> int | None:
        return pos if pos < self.size else None

    def flush(self, start: int = 0, end: int | None = None) -> None:
        end = self.size if end is None else end
        self._file.durable[start:end] = self.buf[start:end]

    def close(self) -> None:
        pass


class MemoryFileIO:
    """In-memory files; ``crash()`` models what survives a kill or a power loss."""

    def __init__(self) -> None:
        self.files: dict[str, _MemFile] = {}
        self.dirs: set[str] = set()

    def open_segment(self, path: str, size: int, random_access: bool = False,
                     log_writes: bool = False) -> MemorySegment:
        f = self.files.get(path)
        if f is None:
            f = self.files[path] = _MemFile(size)
        return MemorySegment(path, f)

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
        self.files.pop(path, None)

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
        after = MemoryFileIO()
        after.dirs = set(self.dirs)
        for path, f in self.files.items():
            g = _MemFile(len(f.data))
            src = f.durable if power_loss else f.data
            g.data[:] = src
            g.durable[:] = src
            g.mtime = f.mtime
            after.files[path] = g
        return after
