"""Producer state derived from the batches in the log: sequences, open and aborted transactions,
the snapshot that records the commitlog offset it describes, and the rebuild after a crash."""

from __future__ import annotations

import json
import shutil

from engine import record_batch as rb
from engine.store import MessageStore
from engine_support import small_config


def batch(n: int, pid: int = -1, epoch: int = 0, seq: int = -1, txn: bool = False) -> bytes:
    return rb.build_batch([rb.Record(i, 0, None, f"v{i}".encode(), []) for i in range(n)], producer_id=pid,
                          producer_epoch=epoch, base_sequence=seq, is_transactional=txn)


def marker(pid: int, commit: bool, epoch: int = 0) -> bytes:
    return rb.build_control_batch(rb.CONTROL_TYPE_COMMIT if commit else rb.CONTROL_TYPE_ABORT,
                                  producer_id=pid, producer_epoch=epoch)


def put(store, topic, q, data) -> int:
    res = store.put_record_batch(topic, q, data)
    assert res.ok, res.error
    return res.queue_offset


def crash_image(store, tmp_path, name="image"):
    """The data directory as a kill -9 leaves it: every write is in the (shared) page cache,
    nothing was shut down. The store is idle while it is copied."""
    image = tmp_path / name
    shutil.copytree(store.root, image, ignore=shutil.ignore_patterns("lock"))
    return image


def test_sequences_open_and_aborted_transactions_follow_the_log(make_store):
    store = make_store()
    ps = store.producer_state
    assert put(store, "T", 0, batch(3, pid=7, seq=0)) == 0
    assert put(store, "T", 0, batch(2, pid=7, seq=3)) == 3
    put(store, "T", 0, batch(1))  # no producer id: not tracked
    e = ps.entry("T", 0, 7)
    assert e.epoch == 0 and [(b.first_seq, b.last_seq, b.base_offset) for b in e.batches] == [(0, 2, 0), (3, 4, 3)]
    assert ps.entry("T", 1, 7) is None

    first = put(store, "T", 0, batch(2, pid=8, seq=0, txn=True))  # 6
    put(store, "T", 0, batch(1, pid=9, seq=0, txn=True))          # 8
    put(store, "T", 0, batch(1, pid=8, seq=2, txn=True))          # 9: same transaction
    hw = store.get_max_offset_in_queue("T", 0)
    assert ps.last_stable_offset("T", 0, hw) == first
    abort_at = put(store, "T", 0, marker(8, commit=False))        # 10
    assert ps.last_stable_offset("T", 0, store.get_max_offset_in_queue("T", 0)) == 8  # pid 9 still open
    put(store, "T", 0, marker(9, commit=True))
    hw = store.get_max_offset_in_queue("T", 0)
    assert ps.last_stable_offset("T", 0, hw) == hw
    assert ps.aborted_between("T", 0, 0, hw) == [(8, first)]
    assert ps.is_aborted("T", 0, 8, 9) and not ps.is_aborted("T", 0, 9, 8) and not ps.is_aborted("T", 0, 8, abort_at)
    # a marker written a second time (a recovery finishing a completion) changes nothing
    put(store, "T", 0, marker(8, commit=False))
    assert ps.aborted_between("T", 0, 0, 100) == [(8, first)]


def test_a_new_epoch_starts_a_fresh_entry_and_the_window_keeps_five_batches(make_store):
    store = make_store()
    for i in range(7):
        put(store, "W", 0, batch(1, pid=3, seq=i))
    assert [b.first_seq for b in store.producer_state.entry("W", 0, 3).batches] == [2, 3, 4, 5, 6]
    put(store, "W", 0, batch(1, pid=3, epoch=1, seq=0))
    e = store.producer_state.entry("W", 0, 3)
    assert e.epoch == 1 and [b.first_seq for b in e.batches] == [0]


def test_state_written_after_the_snapshot_is_rebuilt_from_the_log_after_a_crash(make_store, tmp_path):
    store = make_store(flush_interval_consume_queue=3_600_000)  # no background snapshot: the test takes it
    put(store, "C", 0, batch(2, pid=5, seq=0))
    put(store, "C", 1, batch(1, pid=6, seq=0, txn=True))
    store.commitlog.flush()
    store._flush_logics_and_checkpoint()  # what the background does every second
    snap = json.loads((store.config_dir / "producerSnapshot.json").read_text())
    assert snap["commitlogOffset"] == store.confirmed_offset
    # acknowledged after the snapshot, then the process dies
    acked = put(store, "C", 0, batch(3, pid=5, seq=2))
    put(store, "C", 1, marker(6, commit=False))
    put(store, "C", 2, batch(1, pid=6, seq=1, txn=True))
    image = crash_image(store, tmp_path)

    again = MessageStore(small_config(image))
    again.start()
    try:
        assert not again.last_exit_ok
        e = again.producer_state.entry("C", 0, 5)
        assert [(b.first_seq, b.last_seq, b.base_offset) for b in e.batches] == [(0, 1, 0), (2, 4, acked)]
        assert again.producer_state.aborted_between("C", 1, 0, 10) == [(6, 0)]
        assert again.producer_state.last_stable_offset("C", 2, 5) == 0
        # the next batch continues where the log ended
        assert put(again, "C", 0, batch(1, pid=5, seq=5)) == 5
    finally:
        again.shutdown()
    snap = json.loads((image / "config" / "producerSnapshot.json").read_text())
    assert snap["commitlogOffset"] > 0 and "C@0" in snap["queues"]


def test_a_snapshot_past_the_end_of_the_log_is_discarded(make_store, tmp_path):
    store = make_store()
    put(store, "P", 0, batch(2, pid=11, seq=0))
    image = crash_image(store, tmp_path)
    path = image / "config" / "producerSnapshot.json"
    # what a power loss can leave: a snapshot describing log bytes that did not survive
    path.write_text(json.dumps({"version": 1, "commitlogOffset": 10**9,
                                "queues": {"P@0": {"producers": {"11": [0, [[0, 99, 0, 0]]]}}}}))
    again = MessageStore(small_config(image))
    again.start()
    try:
        e = again.producer_state.entry("P", 0, 11)
        assert [(b.first_seq, b.last_seq) for b in e.batches] == [(0, 1)]
    finally:
        again.shutdown()


def test_clean_restart_keeps_state_and_deleted_topics_are_forgotten(make_store, tmp_path):
    root = tmp_path / "s"
    store = make_store(root=root)
    put(store, "Gone", 0, batch(1, pid=1, seq=0, txn=True))
    put(store, "Kept", 0, batch(1, pid=2, seq=0, txn=True))
    store.delete_topic("Gone")
    assert store.producer_state.last_stable_offset("Gone", 0, 7) == 7
    store.put_record_batch("Kept", 1, batch(1))  # no producer id: the state does not change
    end = store.confirmed_offset
    store.shutdown()
    # a clean stop leaves a snapshot at the very end: the next start scans nothing
    assert json.loads((root / "config" / "producerSnapshot.json").read_text())["commitlogOffset"] == end
    again = make_store(root=root)
    assert again.producer_state.last_stable_offset("Gone", 0, 7) == 7
    assert again.producer_state.last_stable_offset("Kept", 0, 1) == 0
    assert again.producer_state.entry("Kept", 0, 2).batches[0].first_seq == 0


def test_a_batch_split_around_a_delayed_record_is_recorded_whole(make_store):
    """Its records land at consecutive offsets as parts (the delayed one as a placeholder): the
    producer state remembers the producer's one batch, so a retry of it is recognised whole."""
    store = make_store(message_delay_level="1s 1s 1s")
    mixed = rb.build_batch([rb.Record(0, 0, None, b"now", []),
                            rb.Record(1, 0, None, b"later", [("rmq.delay.level", b"1")]),
                            rb.Record(2, 0, None, b"now2", [])], producer_id=21, producer_epoch=0, base_sequence=0)
    res = store.put_record_batch("D", 0, mixed)
    assert res.ok and res.queue_offset == 0 and store.get_max_offset_in_queue("D", 0) == 3
    e = store.producer_state.entry("D", 0, 21)
    assert [(b.first_seq, b.last_seq, b.base_offset) for b in e.batches] == [(0, 2, 0)]
