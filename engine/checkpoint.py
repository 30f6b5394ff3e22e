"""The ``checkpoint`` file: how far the commitlog, consume queues and index are known durable.

Layout (big-endian) in a 4 KiB file; the first 40 bytes are RocketMQ's ``StoreCheckpoint``:

    physicMsgTimestamp(8) + logicsMsgTimestamp(8) + indexMsgTimestamp(8)
    + masterFlushedOffset(8) + confirmPhyOffset(8)                         = 40 bytes
    + formatVersion(4) + physicFlushedOffset(8) + logicsFlushedOffset(8)
    + indexFlushedOffset(8) + crc32(4, over bytes 0..67)                   = 72 bytes

Invariants: each ``*FlushedOffset`` is a unit boundary in the commitlog, and everything the
commitlog / consume queues / index hold for units before it was on disk when it was written.
Recovery re-dispatches from ``min(logicsFlushedOffset, indexFlushedOffset)``. A checkpoint
whose CRC does not match is ignored (recovery then scans from the first segment).
"""

from __future__ import annotations

import os
import struct
import zlib

import structlog

from .file_io import FileIO

log = structlog.get_logger("rockafka.engine.checkpoint")

FORMAT_VERSION = 1
FILE_SIZE = 4096
_LAYOUT = struct.Struct(">qqqqqiqqq")
_CRC = struct.Struct(">I")


class StoreCheckpoint:
    def __init__(self, fio: FileIO, path: str):
        self.path = path
        # written every second by the background thread: by pwrite, so a stalled disk blocks
        # that thread only (a faulting copy into a mapping would hold the GIL)
        self.segment = fio.open_segment(path, FILE_SIZE, log_writes=True)
        self.segment.pwrite_min = 0
        self.physic_msg_timestamp = 0
        self.logics_msg_timestamp = 0
        self.index_msg_timestamp = 0
        self.master_flushed_offset = 0
        self.confirm_phy_offset = 0
        self.physic_flushed_offset = 0
        self.logics_flushed_offset = 0
        self.index_flushed_offset = 0
        self.valid = self._load()

    def _load(self) -> bool:
        buf = self.segment.pread(0, _LAYOUT.size + 4)  # a new file is a hole: not through the mapping
        if buf == bytes(len(buf)):
            return False
        fields = _LAYOUT.unpack_from(buf, 0)
        (crc,) = _CRC.unpack_from(buf, _LAYOUT.size)
        if crc != zlib.crc32(buf[:_LAYOUT.size]) or fields[5] != FORMAT_VERSION:
            log.warning("checkpoint_invalid", path=self.path)
            return False
        (self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
         self.master_flushed_offset, self.confirm_phy_offset, _version, self.physic_flushed_offset,
         self.logics_flushed_offset, self.index_flushed_offset) = fields
        return True

    @property
    def min_dispatch_offset(self) -> int:
        return min(self.logics_flushed_offset, self.index_flushed_offset)

    def flush(self) -> None:
        raw = _LAYOUT.pack(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp,
            self.master_flushed_offset, self.confirm_phy_offset, FORMAT_VERSION,
            self.physic_flushed_offset, self.logics_flushed_offset, self.index_flushed_offset)
        self.segment.write(0, raw + _CRC.pack(zlib.crc32(raw)))
        self.segment.flush(0, FILE_SIZE)
        self.valid = True

    def close(self) -> None:
        self.segment.close()


def checkpoint_path(root: str) -> str:
    return os.path.join(root, "checkpoint")
