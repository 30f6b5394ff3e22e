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


def _open_fds(under) -> int:
    """Open descriptors of this process on files in ``under`` (a process-wide count also moves
    with what other threads of a test worker open and close: 38 against 36 failed one run)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}").startswith(f"{under}/")
        except OSError:  # closed meanwhile
            pass
    return n


def test_log_segment_writes_large_chunks_by_pwrite_and_reads_them_through_the_mapping(tmp_path):
    """A commitlog segment (log_writes): a large write goes through its descriptor, small ones
    through the mapping; both read back at once, after a flush and after reopening."""
    fio = MmapFileIO()
    path = str(tmp_path / "log")
    seg = fio.open_segment(path, 1 << 20, log_writes=True)
    big = os.urandom(64 * 1024 + 3)
    seg.write(10, big)
    seg.write(10 + len(big), b"tail")
    assert seg.read(10, len(big)) == big and seg.read(10 + len(big), 4) == b"tail"
    assert seg.next_data(0) == 0
    seg.flush()
    seg.close()
    again = fio.open_segment(path, 1 << 20)
    assert again.read(10, len(big) + 4) == big + b"tail"
    again.close()


def test_segments_hold_one_descriptor_each_and_release_it(tmp_path):
    """Consume-queue style segments keep only mmap's own descriptor (a node with 10,000 queues
    needs ~10,000, not 20,000); closing releases it; flushing a closed, deleted one is a no-op."""
    fio = MmapFileIO()
    segs = [fio.open_segment(str(tmp_path / f"q{i}"), 4096 * 4, random_access=True) for i in range(50)]
    assert _open_fds(tmp_path) == 50
    for i, seg in enumerate(segs):
        seg.write(0, b"%d" % i)
        seg.flush()
    for seg in segs:
        seg.close()
    assert _open_fds(tmp_path) == 0
    fio.remove(segs[0].path)
    segs[0].flush()  # closed and gone: nothing to do, no error


def test_a_new_segments_directory_entry_is_synced_by_its_first_flush(tmp_path, monkeypatch):
    """Creating a segment (on the put path: a queue's first message) syncs nothing; its first
    flush syncs the directory holding it before the bytes count as durable, once; a segment
    opened again after a restart has its entry on disk already."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    fio = MmapFileIO()
    qdir = tmp_path / "topic" / "0"
    fio.makedirs(str(qdir))
    seg = fio.open_segment(str(qdir / "00000000000000000000"), 4096 * 4, random_access=True)
    seg.write(0, b"unit")
    assert synced == []
    seg.flush(0, 4)
    assert synced == [str(qdir)]
    seg.write(4, b"more")
    seg.flush(4, 8)
    assert synced == [str(qdir)]
    seg.close()
    again = fio.open_segment(str(qdir / "00000000000000000000"), 4096 * 4, random_access=True)
    again.write(8, b"x")
    again.flush(8, 9)
    again.close()
    assert synced == [str(qdir)]
