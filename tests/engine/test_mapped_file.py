"""MappedFile / MappedFileQueue on real mmap files and on the in-memory implementation."""

from __future__ import annotations

import os

import pytest

from engine.file_io import MemoryFileIO, MmapFileIO
from engine.mapped_file import MappedFileQueue, segment_name


@pytest.fixture(params=["mmap", "memory"])
def fio(request):
    return MmapFileIO() if request.param == "mmap" else MemoryFileIO()


def test_segments_are_named_by_start_offset_and_contiguous(fio, tmp_path):
    q = MappedFileQueue(fio, str(tmp_path / "log"), 1024)
    for _ in range(5):
        f = q.last_for_write()
        f.append(b"a" * 1024)
    assert [f.file_from_offset for f in q.files] == [0, 1024, 2048, 3072, 4096]
    assert fio.list_dir(str(tmp_path / "log")) == [segment_name(i * 1024) for i in range(5)]
    assert segment_name(1073741824) == "00000000001073741824"
    assert q.find(2050).file_from_offset == 2048 and q.find(5120) is None
    assert q.max_offset == 5120


def test_reload_and_truncate_zeroes_the_tail(fio, tmp_path):
    path = str(tmp_path / "log")
    q = MappedFileQueue(fio, path, 1024)
    for _ in range(3):
        q.last_for_write().append(b"\x07" * 1024)
    q.flush()
    q.close()
    again = MappedFileQueue(fio, path, 1024)
    again.load()
    assert again.max_offset == 3072
    again.truncate_dirty(1500)
    assert again.max_offset == 1500 and len(again.files) == 2
    assert again.find(1499).read(1499 - 1024, 1) == b"\x07"
    assert again.find(1500).read(1500 - 1024, 524) == bytes(524)


def test_flush_tracks_what_is_durable(tmp_path):
    fio = MemoryFileIO()
    q = MappedFileQueue(fio, "/log", 1024)
    q.last_for_write().append(b"x" * 100)
    assert fio.crash(power_loss=True).files["/log/" + segment_name(0)].data[:100] == bytes(100)
    assert q.flush() == 100
    assert fio.crash(power_loss=True).files["/log/" + segment_name(0)].data[:100] == b"x" * 100


def test_delete_expired_keeps_the_last_segment(tmp_path):
    fio = MmapFileIO()
    q = MappedFileQueue(fio, str(tmp_path / "log"), 1024)
    for _ in range(4):
        q.last_for_write().append(b"z" * 1024)
    old = 0
    for f in q.files:
        os.utime(f.path, (old, old))
    gone = q.delete_expired_by_time(reserved_ms=1000)
    assert len(gone) == 3 and q.min_offset == 3072 and len(os.listdir(tmp_path / "log")) == 1


def test_preallocated_segment_reports_a_full_disk_when_created(tmp_path):
    fio = MmapFileIO(preallocate=True)
    q = MappedFileQueue(fio, str(tmp_path / "log"), 4096)
    q.last_for_write().append(b"p")
    assert os.stat(q.files[0].path).st_blocks * 512 >= 4096
