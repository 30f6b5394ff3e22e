"""File access: real mmap segments persist; the in-memory one models kills and power losses."""

from __future__ import annotations

import os

from engine.file_io import MemoryFileIO, MmapFileIO


def test_mmap_segment_round_trip(tmp_path):
    fio = MmapFileIO()
    path = str(tmp_path / "seg")
    seg = fio.open_segment(path, 8192)
    seg.write(100, b"hello")
    seg.flush(0, 8192)
    seg.close()
    assert os.path.getsize(path) == 8192
    again = fio.open_segment(path, 8192)
    assert again.read(100, 5) == b"hello"
    again.close()
    assert fio.list_dir(str(tmp_path)) == ["seg"]
    fio.remove(path)
    assert not fio.exists(path)


def test_memory_crash_keeps_written_bytes_power_loss_only_flushed():
    fio = MemoryFileIO()
    seg = fio.open_segment("/d/a", 64)
    seg.write(0, b"flushed")
    seg.flush(0, 7)
    seg.write(10, b"cached")
    killed = fio.crash(power_loss=False)
    assert killed.open_segment("/d/a", 64).read(10, 6) == b"cached"
    lost = fio.crash(power_loss=True)
    assert lost.open_segment("/d/a", 64).read(0, 16) == b"flushed" + bytes(9)
    fio.touch("/d/abort")
    assert fio.list_dir("/d") == ["a", "abort"]
