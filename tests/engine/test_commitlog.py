"""CommitLog: BLANK filler at a segment's end, TOTALSIZE written last, scan stops at a bad unit."""

from __future__ import annotations

import struct

from engine.commitlog import CommitLog
from engine.file_io import MemoryFileIO
from engine.message import BLANK_MAGIC_CODE, Message, encode_message


def append(cl: CommitLog, body: bytes) -> int:
    unit = encode_message(Message("T", body))
    f = cl.segment_for(len(unit))
    phy = f.file_from_offset + f.wrote_position
    struct.pack_into(">q", unit, 28, phy)  # PHYSICALOFFSET
    return cl.write_unit(f, unit)


def test_unit_that_does_not_fit_goes_to_next_segment_after_a_blank():
    fio = MemoryFileIO()
    cl = CommitLog(fio, "/cl", 1024)
    cl.load()
    offsets = [append(cl, b"x" * 300) for _ in range(4)]
    assert offsets == [0, 392, 1024, 1416]  # 88 fixed + 300 body + 1 + 1 topic + 2 = 392; 3 x 392 + 8 > 1024
    seg = fio.files["/cl/00000000000000000000"].data
    assert struct.unpack_from(">ii", seg, 784) == (1024 - 784, BLANK_MAGIC_CODE)
    scanned = [(off, h is None) for off, h, _ in cl.scan(0, check_crc=True)]
    assert scanned == [(0, False), (392, False), (784, True), (1024, False), (1416, False)]
    assert cl.scan_end == 1808


def test_scan_stops_at_a_unit_without_its_size_and_at_a_bad_crc():
    fio = MemoryFileIO()
    cl = CommitLog(fio, "/cl", 4096)
    cl.load()
    for _ in range(3):
        append(cl, b"abc" * 20)
    seg = fio.files["/cl/00000000000000000000"].data
    unit_size = struct.unpack_from(">i", seg, 0)[0]
    torn = bytearray(seg)
    torn[2 * unit_size:2 * unit_size + 4] = bytes(4)  # the size is written last: never arrived
    fio.files["/cl/00000000000000000000"].data[:] = torn
    list(cl.scan(0, check_crc=True))
    assert cl.scan_end == 2 * unit_size
    fio.files["/cl/00000000000000000000"].data[unit_size + 100] ^= 0xFF  # body byte flipped
    list(cl.scan(0, check_crc=True))
    assert cl.scan_end == unit_size
    list(cl.scan(0, check_crc=False))
    assert cl.scan_end == 2 * unit_size


def test_truncate_zeroes_and_moves_the_write_position():
    fio = MemoryFileIO()
    cl = CommitLog(fio, "/cl", 4096)
    cl.load()
    for _ in range(3):
        append(cl, b"q" * 10)
    size = struct.unpack_from(">i", fio.files["/cl/00000000000000000000"].data, 0)[0]
    cl.truncate(size)
    assert cl.max_offset == size
    assert cl.read(size, 2 * size) is None  # nothing is read past the write position
    assert fio.files["/cl/00000000000000000000"].data[size:3 * size] == bytes(2 * size)
    assert append(cl, b"new") == size
