"""ConsumeQueue: 20-byte units, batches as N units, recovery of its end, dirty tails, min offsets."""

from __future__ import annotations

import struct

from engine.consume_queue import ConsumeQueue
from engine.file_io import MemoryFileIO


def make(fio, file_units=10):
    cq = ConsumeQueue(fio, "/cq", "T", 0, 20 * file_units)
    cq.load()
    return cq


def test_unit_layout_and_reads_across_files():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(25):
        cq.put(i, 1000 + i * 100, 100, -5)
    assert cq.max_offset == 25 and cq.min_offset == 0
    assert struct.unpack_from(">qiq", fio.files["/cq/T/0/00000000000000000000"].data, 20) == (1100, 100, -5)
    units = cq.read_units(8, 5)
    assert [u[0] for u in units] == [1800, 1900]  # stops at the file's end
    assert cq.read_units(10, 5)[0] == (2000, 100, -5)


def test_batch_writes_n_identical_units_across_a_file_boundary():
    fio = MemoryFileIO()
    cq = make(fio)
    cq.put(0, 0, 50, 0)
    cq.put(1, 50, 500, 0, count=15)
    assert cq.max_offset == 16
    assert all(cq.unit(i) == (50, 500, 0) for i in range(1, 16))
    assert cq.put(1, 50, 500, 0, count=15) is False  # already there (recovery re-dispatch)


def test_recover_finds_the_end_and_truncates_dirty_units():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(13):
        cq.put(i, i * 100, 100, 0)
    again = make(fio.crash())
    again.recover()
    assert again.max_offset == 13 and again.max_physic_offset == 1300
    again.truncate_dirty(commitlog_max=1000)
    assert again.max_offset == 10
    again.put(10, 1000, 100, 0)
    assert again.unit(10) == (1000, 100, 0)


def test_queue_starting_mid_file_and_min_offset_correction():
    fio = MemoryFileIO()
    cq = make(fio)
    cq.put(25, 0, 10, 0)
    cq.put(26, 10, 10, 0)
    assert (cq.min_offset, cq.max_offset) == (25, 27)
    again = make(fio.crash())
    again.recover()
    assert (again.min_offset, again.max_offset) == (25, 27)
    again.correct_min_offset(commitlog_min=10)
    assert again.min_offset == 26


def test_delete_expired_drops_whole_files_below_the_log():
    fio = MemoryFileIO()
    cq = make(fio)
    for i in range(35):
        cq.put(i, i * 10, 10, 0)
    cq.delete_expired(commitlog_min=215)
    assert len(cq.mfq.files) == 2 and cq.min_offset == 22
    assert cq.read_units(22, 1)[0][0] == 220
