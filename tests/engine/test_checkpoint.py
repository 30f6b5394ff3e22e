"""Checkpoint: RocketMQ's first 40 bytes, our flushed offsets after them, CRC-guarded."""

from __future__ import annotations

import struct

from engine.checkpoint import StoreCheckpoint
from engine.file_io import MemoryFileIO


def test_round_trip_and_layout():
    fio = MemoryFileIO()
    cp = StoreCheckpoint(fio, "/cp")
    assert not cp.valid
    cp.physic_msg_timestamp = 11
    cp.physic_flushed_offset, cp.logics_flushed_offset, cp.index_flushed_offset = 300, 200, 100
    cp.flush()
    again = StoreCheckpoint(fio.crash(power_loss=True), "/cp")
    assert again.valid and (again.physic_flushed_offset, again.logics_flushed_offset, again.index_flushed_offset) == (300, 200, 100)
    assert again.min_dispatch_offset == 100
    raw = fio.files["/cp"].data
    assert struct.unpack_from(">q", raw, 0)[0] == 11
    assert struct.unpack_from(">iqqq", raw, 40) == (1, 300, 200, 100)


def test_corrupt_checkpoint_is_ignored():
    fio = MemoryFileIO()
    cp = StoreCheckpoint(fio, "/cp")
    cp.logics_flushed_offset = 5
    cp.flush()
    fio.files["/cp"].data[50] ^= 0xFF
    assert not StoreCheckpoint(fio, "/cp").valid
