"""Crash recovery: SIGKILL cycles under SYNC_FLUSH, torn tails, garbage after the tail, power loss.

The SIGKILL test runs ``crash_writer.py`` in a child process, kills it at random moments and
checks after restarts that every acknowledged message reads back identically at its
acknowledged offset, that queue offsets are contiguous and that the index finds every key.
"""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from engine.file_io import MemoryFileIO, MemorySegment
from engine.message import Message, decode_message
from engine.record_batch import parse_header
from engine.store import GetMessageStatus, MessageStore, PutMessageStatus
from engine_support import crash_config, small_config

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def wait_until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def run_and_kill(root: Path, seed: int, run_for: float) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    err_path = root.parent / f"crash-writer-{seed}.err"
    err_file = open(err_path, "wb")
    proc = subprocess.Popen([sys.executable, str(HERE / "crash_writer.py"), str(root), str(seed)],
                            stdout=subprocess.PIPE, stderr=err_file, cwd=str(ROOT), env=env)
    lines: list[str] = []
    ready = threading.Event()

    def drain():
        buf = b""
        for chunk in iter(lambda: os.read(proc.stdout.fileno(), 65536), b""):
            buf += chunk
            *complete, buf = buf.split(b"\n")
            for line in complete:
                if line == b"ready":
                    ready.set()
                elif line.startswith(b"ack "):  # other lines are the child's log events
                    lines.append(line.decode())

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 120
        while not ready.wait(0.1):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"crash writer did not start: {err_path.read_text(errors='replace')[-3000:]}")
        time.sleep(run_for)  # the moment of the kill is the random variable here, not a sync
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        reader.join(30)
        proc.stdout.close()
        err_file.close()
    return lines


def verify(root: Path, acked: dict, after_kill: bool = True) -> None:
    store = MessageStore(crash_config(root))
    store.start()
    try:
        assert store.last_exit_ok is not after_kill
        for (qid, qoff), (kind, phy, key, body) in acked.items():
            got = store.get_message("verify", "Crash", qid, qoff, 1)
            assert got.status is GetMessageStatus.FOUND, (qid, qoff, got.status)
            m = decode_message(got.messages[0], check_crc=True)
            assert (m.queue_offset, m.commitlog_offset) == (qoff, phy)
            if kind == "msg":
                assert m.body == body and m.keys == [key]
            else:
                assert m.body[8:] == body[8:] and parse_header(m.body).base_offset == qoff
        for qid in range(3):
            expected = store.get_min_offset_in_queue("Crash", qid)
            end = store.get_max_offset_in_queue("Crash", qid)
            while expected < end:
                got = store.get_message("verify", "Crash", qid, expected, 256)
                assert got.status is GetMessageStatus.FOUND
                for ref in got.units:
                    assert ref.queue_offset == expected  # contiguous, no holes, no overlaps
                    expected += ref.record_count
            assert expected == end
        assert wait_until(lambda: store.dispatcher.reput_offset == store.confirmed_offset)
        for (qid, qoff), (kind, phy, key, body) in acked.items():
            wanted = key if kind == "msg" else f"{key}-r0"
            hits = store.query_message("Crash", wanted, 4, 0, 2**62).messages
            assert [decode_message(h).commitlog_offset for h in hits] == [phy], (wanted, phy, [decode_message(h).commitlog_offset for h in hits])
    finally:
        store.shutdown()


def test_sigkill_under_sync_flush_loses_no_acknowledged_message(tmp_path):
    root = tmp_path / "store"
    rnd = random.Random(20240601)
    acked: dict[tuple[int, int], tuple] = {}
    cycles = 20
    for cycle in range(cycles):
        for line in run_and_kill(root, cycle, rnd.uniform(0.02, 0.4)):
            _, kind, qid, qoff, phy, key, body = line.split(" ")
            slot = (int(qid), int(qoff))
            assert slot not in acked, f"offset {slot} acknowledged twice"
            acked[slot] = (kind, int(phy), key, bytes.fromhex(body))
        # verify after most kills; leave some crashes to be recovered by the next writer itself
        if cycle % 3 != 1 or cycle == cycles - 1:
            verify(root, acked)
    print(f"acknowledged={len(acked)}")
    assert len(acked) > 100


def crash(store: MessageStore, fio: MemoryFileIO, power_loss: bool = False) -> MemoryFileIO:
    """What a restarted process finds; the old store is then stopped on its own (old) files."""
    after = fio.crash(power_loss=power_loss)
    store.shutdown()
    return after


def _last_segment(fio: MemoryFileIO, store: MessageStore):
    names = [p for p in fio.files if "/commitlog/" in p]
    return fio.files[max(names)]


def test_torn_last_unit_is_truncated_and_offsets_continue(make_store, tmp_path):
    fio = MemoryFileIO()
    store = make_store(file_io=fio)
    results = [store.put_message(Message("T", b"m%d" % i * 20, keys=[f"k{i}"])) for i in range(10)]
    after = crash(store, fio)
    seg = _last_segment(after, store)
    last = results[-1]
    pos = last.commitlog_offset % store.config.mapped_file_size_commit_log
    seg.data[pos + 40:pos + last.wrote_bytes] = bytes(last.wrote_bytes - 40)  # torn body
    again = make_store(file_io=after)
    assert not again.last_exit_ok
    assert again.get_max_offset_in_queue("T", 0) == 9
    assert again.commitlog.max_offset == last.commitlog_offset
    r = again.put_message(Message("T", b"next"))
    assert r.queue_offset == 9 and r.commitlog_offset == last.commitlog_offset
    assert decode_message(again.get_message("g", "T", 0, 9, 1).messages[0]).body == b"next"


def test_garbage_after_tail_is_ignored_and_zeroed(make_store):
    fio = MemoryFileIO()
    store = make_store(file_io=fio)
    results = [store.put_message(Message("T", b"x" * 30)) for _ in range(5)]
    after = crash(store, fio)
    seg = _last_segment(after, store)
    end = (results[-1].commitlog_offset + results[-1].wrote_bytes) % store.config.mapped_file_size_commit_log
    seg.data[end:end + 300] = random.Random(1).randbytes(300)
    again = make_store(file_io=after)
    assert again.get_max_offset_in_queue("T", 0) == 5
    assert _last_segment(again.fio, again).data[end:end + 300] == bytes(300)
    assert again.put_message(Message("T", b"y")).queue_offset == 5


def test_consume_queue_lost_units_are_rebuilt_from_the_commitlog(make_store):
    fio = MemoryFileIO()
    store = make_store(file_io=fio)
    for i in range(50):
        store.put_message(Message("R", b"%d" % i, queue_id=i % 2))
    after = crash(store, fio)
    for path in [p for p in after.files if "/consumequeue/R/1/" in p]:
        del after.files[path]  # as if the queue's files never reached the disk
    again = make_store(file_io=after)
    assert again.get_max_offset_in_queue("R", 1) == 25
    got = again.get_message("g", "R", 1, 0, 100)
    assert [decode_message(m).body for m in got.messages] == [b"%d" % i for i in range(1, 50, 2)]


def test_power_loss_keeps_what_sync_flush_acknowledged(make_store):
    fio = MemoryFileIO()
    store = make_store(file_io=fio, flush_disk_type="SYNC_FLUSH")
    acked = [store.put_message(Message("P", b"durable-%d" % i, keys=[f"k{i}"])) for i in range(40)]
    assert all(r.ok for r in acked)
    after = crash(store, fio, power_loss=True)
    again = make_store(file_io=after)
    got = again.get_message("g", "P", 0, 0, 100)
    assert [decode_message(m).body for m in got.messages] == [b"durable-%d" % i for i in range(40)]
    assert wait_until(lambda: again.dispatcher.reput_offset == again.confirmed_offset)
    for i in range(40):
        hits = again.query_message("P", f"k{i}", 4, 0, 2**62).messages
        assert [decode_message(h).body for h in hits] == [b"durable-%d" % i]


def test_power_loss_under_async_flush_keeps_a_consistent_prefix(make_store):
    fio = MemoryFileIO()
    store = make_store(file_io=fio, flush_interval_commit_log=60_000, flush_interval_consume_queue=60_000)
    for i in range(20):
        store.put_message(Message("A", b"early-%d" % i))
    store.commitlog.flush()
    for i in range(20):
        store.put_message(Message("A", b"late-%d" % i))
    after = crash(store, fio, power_loss=True)
    again = make_store(file_io=after)
    n = again.get_max_offset_in_queue("A", 0)
    assert n >= 20
    got = again.get_message("g", "A", 0, 0, 100)
    bodies = [decode_message(m).body for m in got.messages]
    assert bodies[:20] == [b"early-%d" % i for i in range(20)] and len(bodies) == n
    assert again.put_message(Message("A", b"new")).queue_offset == n


def test_power_loss_after_a_partial_queue_flush_rebuilds_the_unflushed_units(make_store):
    """Between thorough passes a queue with few dirty pages is not flushed: the checkpoint's
    logics offset must not move past its units, so recovery re-dispatches them."""
    fio = MemoryFileIO()
    store = make_store(file_io=fio, flush_interval_consume_queue=60_000)
    store._flush_logics_and_checkpoint()
    for i in range(30):
        store.put_message(Message("Few", b"few-%d" % i, queue_id=i % 3))
    store.commitlog.flush()
    assert wait_until(lambda: store.dispatcher.reput_offset == store.confirmed_offset)
    store._flush_logics_and_checkpoint(least_pages=2)   # what the background does between thorough passes
    after = crash(store, fio, power_loss=True)
    again = make_store(file_io=after)
    for q in range(3):
        got = again.get_message("g", "Few", q, 0, 100)
        assert [decode_message(m).body for m in got.messages] == [b"few-%d" % i for i in range(q, 30, 3)]


class SlowDiskIO(MemoryFileIO):
    """Commitlog flushes block until released: a disk that stopped answering."""

    def __init__(self):
        super().__init__()
        self.release = threading.Event()

    def open_segment(self, path, size, random_access=False, log_writes=False):
        seg = super().open_segment(path, size, random_access, log_writes)
        if "/commitlog/" not in path:
            return seg
        release = self.release

        class SlowSegment(MemorySegment):
            __slots__ = ()

            def flush(self, start=0, end=None):
                release.wait(30)
                super().flush(start, end)

        return SlowSegment(path, self.files[path], self)


def test_sync_flush_timeout_reports_flush_disk_timeout(make_store):
    fio = SlowDiskIO()
    store = make_store(file_io=fio, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    try:
        r = store.put_message(Message("S", b"x"))
        assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT and "syncFlushTimeout 200" in r.error
        assert r.stored and store.get_max_offset_in_queue("S", 0) == 1  # stored, not yet durable
    finally:
        fio.release.set()


def test_group_commit_shares_flushes_between_writers(make_store):
    store = make_store(flush_disk_type="SYNC_FLUSH")
    flushes = []
    original = store.commitlog.flush

    def counting_flush():
        flushes.append(1)
        return original()

    store.commitlog.flush = counting_flush
    errors = []

    def writer(n):
        for i in range(50):
            r = store.put_message(Message("G", b"%d" % i, queue_id=n))
            if not r.ok:
                errors.append(r)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert sum(store.get_max_offset_in_queue("G", n) for n in range(8)) == 400
    assert len(flushes) < 400  # writers shared fsyncs


def test_clean_restart_is_normal_recovery(make_store):
    store = make_store()
    store.put_message(Message("N", b"x"))
    store.shutdown()
    again = make_store()
    assert again.last_exit_ok and again.get_max_offset_in_queue("N", 0) == 1


def test_deleted_topic_stays_deleted_after_a_crash(make_store):
    fio = MemoryFileIO()
    store = make_store(file_io=fio, flush_interval_consume_queue=60_000)
    for i in range(5):
        store.put_message(Message("Doomed", b"%d" % i))
    store.delete_topic("Doomed")
    store.put_message(Message("Kept", b"k"))
    after = crash(store, fio)
    again = make_store(file_io=after)
    assert again.get_max_offset_in_queue("Doomed", 0) == 0
    assert again.get_max_offset_in_queue("Kept", 0) == 1


def test_torn_tail_on_real_files(make_store):
    store = make_store()
    results = [store.put_message(Message("Real", b"payload-%d" % i * 10)) for i in range(20)]
    root = Path(store.root)
    store.shutdown()
    # as if the process had died before the checkpoint covered its last writes
    (root / "abort").touch()
    (root / "checkpoint").unlink()
    seg = root / "commitlog" / "00000000000000000000"
    last = results[-1]
    with open(seg, "r+b") as f:
        f.seek(last.commitlog_offset + 50)
        f.write(bytes(last.wrote_bytes - 50))  # the last unit lost its tail
        f.seek(last.commitlog_offset + last.wrote_bytes + 17)
        f.write(os.urandom(500))  # and there is garbage further on
    again = make_store()
    assert not again.last_exit_ok
    assert again.get_max_offset_in_queue("Real", 0) == 19
    got = again.get_message("g", "Real", 0, 0, 100)
    assert [decode_message(m).body for m in got.messages] == [b"payload-%d" % i * 10 for i in range(19)]
    r = again.put_message(Message("Real", b"after"))
    assert (r.queue_offset, r.commitlog_offset) == (19, last.commitlog_offset)
    again.shutdown()
    third = make_store()
    assert third.last_exit_ok
    assert [decode_message(m).body for m in third.get_message("g", "Real", 0, 18, 5).messages] == [
        b"payload-18" * 10, b"after"]
