"""Committed offsets as records of ``__consumer_offsets``: what survives a crash, in Kafka's
record formats, transactional offsets resolved by markers, checkpoints and retention."""

from __future__ import annotations

import json
import shutil
import struct

from engine.consumer_offset import OffsetEntry, partition_for
from engine.state_log import CONSUMER_OFFSETS, StateLog
from engine.store import MessageStore
from engine_support import small_config


def crash_image(store, tmp_path, name="image"):
    """The data directory as a kill -9 leaves it (page cache = the files; nothing shut down)."""
    image = tmp_path / name
    shutil.copytree(store.root, image, ignore=shutil.ignore_patterns("lock"))
    return image


def reopen(image, **overrides) -> MessageStore:
    store = MessageStore(small_config(image, **overrides))
    store.start()
    return store


def test_kafka_commits_are_in_the_log_before_they_are_answered(make_store, tmp_path):
    store = make_store(state_checkpoint_interval=3_600_000)
    offs = store.consumer_offsets
    res = offs.commit_durable("g1", {("T", 0): OffsetEntry(42, leader_epoch=3, metadata="m", commit_timestamp=7),
                                     ("T", 1): OffsetEntry(5)})
    assert res.ok
    assert offs.query_entry("g1", "T", 0) == OffsetEntry(42, 3, "m", 7, res.queue_offset)
    image = crash_image(store, tmp_path)  # no checkpoint, no flush: only the log has it
    again = reopen(image)
    try:
        e = again.consumer_offsets.query_entry("g1", "T", 0)
        assert (e.offset, e.leader_epoch, e.metadata, e.commit_timestamp) == (42, 3, "m", 7)
        assert again.consumer_offsets.offsets_of("g1") == {("T", 0): 42, ("T", 1): 5}
    finally:
        again.shutdown()


def test_records_use_kafkas_formats_and_the_groups_partition(make_store):
    store = make_store()
    store.consumer_offsets.commit_durable("grp", {("topic", 7): OffsetEntry(99, 2, "meta", 1234)})
    p = partition_for("grp", 50)
    # Java: Utils.abs("grp".hashCode()) % 50
    assert p == abs(sum(ord(c) * 31 ** i for i, c in enumerate(reversed("grp"))) % 2**32) % 50
    records = list(StateLog(store, CONSUMER_OFFSETS, 50).read(p))
    assert len(records) == 1
    key, value = records[0].key, records[0].value
    # OffsetCommitKey v1: version(2) group(str) topic(str) partition(4)
    assert key == struct.pack(">h", 1) + struct.pack(">h", 3) + b"grp" + struct.pack(">h", 5) + b"topic" + struct.pack(">i", 7)
    # OffsetCommitValue v3: version(2) offset(8) leaderEpoch(4) metadata(str) commitTimestamp(8)
    assert value == struct.pack(">hqi", 3, 99, 2) + struct.pack(">h", 4) + b"meta" + struct.pack(">q", 1234)


def test_native_commits_reach_the_log_at_the_flush_interval(make_store, tmp_path):
    store = make_store(flush_consumer_offset_interval=3_600_000, state_checkpoint_interval=3_600_000)
    offs = store.consumer_offsets
    offs.commit("native", "T", 0, 10)
    lost = crash_image(store, tmp_path, "before-flush")
    offs.flush_dirty()
    offs.commit("native", "T", 1, 20)
    kept = crash_image(store, tmp_path, "after-flush")
    for image, expected in ((lost, {}), (kept, {("T", 0): 10})):
        again = reopen(image)
        try:  # RocketMQ's promise: at most the last flush interval of progress is lost
            assert again.consumer_offsets.offsets_of("native") == expected
        finally:
            again.shutdown()


def test_transactional_offsets_take_effect_with_the_commit_marker(make_store, tmp_path):
    store = make_store(state_checkpoint_interval=3_600_000)
    offs = store.consumer_offsets
    offs.commit_durable("g", {("T", 0): OffsetEntry(1)})
    assert offs.stage_transactional("g", 500, 0, {("T", 0): OffsetEntry(10)}).ok
    assert offs.stage_transactional("g", 501, 0, {("T", 1): OffsetEntry(20)}).ok
    assert offs.query("g", "T", 0) == 1 and offs.has_pending("g", "T", 0) and offs.has_pending("g", "T", 1)
    p = offs.partition_of("g")
    mid = crash_image(store, tmp_path, "mid")  # both transactions open
    assert offs.complete_transaction(p, 500, 0, commit=True).ok
    assert offs.complete_transaction(p, 501, 0, commit=False).ok
    assert offs.query("g", "T", 0) == 10 and offs.query("g", "T", 1) == -1 and not offs.has_pending("g", "T", 0)
    done = crash_image(store, tmp_path, "done")

    again = reopen(mid)
    try:
        assert again.consumer_offsets.query("g", "T", 0) == 1 and again.consumer_offsets.has_pending("g", "T", 0)
        # the transaction coordinator's recovery writes the marker: the staged offset applies
        assert again.consumer_offsets.complete_transaction(p, 500, 0, commit=True).ok
        assert again.consumer_offsets.query("g", "T", 0) == 10
    finally:
        again.shutdown()
    again = reopen(done)
    try:
        assert again.consumer_offsets.offsets_of("g") == {("T", 0): 10}
        assert not again.consumer_offsets.has_pending("g", "T", 1)
    finally:
        again.shutdown()


def test_tombstones_and_group_metadata(make_store, tmp_path):
    store = make_store()
    offs = store.consumer_offsets
    offs.commit_durable("a", {("T", 0): OffsetEntry(3), ("U", 0): OffsetEntry(4)})
    offs.commit_durable("b", {("T", 0): OffsetEntry(5)})
    offs.store_group_metadata("a", b"\x00\x03opaque")
    offs.store_group_metadata("b", b"\x00\x03other")
    offs.delete("a", "U", 0)
    offs.delete_group("b")
    image = crash_image(store, tmp_path)
    again = reopen(image)
    try:
        co = again.consumer_offsets
        assert co.offsets_of("a") == {("T", 0): 3} and co.offsets_of("b") == {}
        assert co.group_metadata() == {"a": b"\x00\x03opaque"}
        assert co.groups() == {"a"}
    finally:
        again.shutdown()


def test_group_records_of_other_owners_survive_crash_and_checkpoint(make_store, tmp_path):
    """Consumer/share group state and group configs (opaque, one kind per owner): the latest per
    (kind, group) comes back from the log alone and from a checkpoint, and DeleteGroups'
    tombstones remove every kind of the group."""
    store = make_store(state_checkpoint_interval=3_600_000)
    offs = store.consumer_offsets
    assert offs.store_group_record("cg", 32000, b"epoch-1").ok
    assert offs.store_group_record("cg", 32000, b"epoch-2").ok
    assert offs.store_group_record("cg", 32001, b"configs").ok
    assert offs.store_group_record("gone", 32000, b"x").ok
    offs.commit_durable("gone", {("T", 0): OffsetEntry(1)})
    assert offs.delete_group("gone").ok
    image = crash_image(store, tmp_path)  # only the log has them
    assert offs.checkpoint()
    image2 = crash_image(store, tmp_path, "checkpointed")
    for img in (image, image2):
        again = reopen(img)
        try:
            co = again.consumer_offsets
            assert co.group_records(32000) == {"cg": b"epoch-2"}
            assert co.group_records(32001) == {"cg": b"configs"}
            assert co.offsets_of("gone") == {}
        finally:
            again.shutdown()


def test_deleting_a_reserved_group_name_keeps_the_operator_records(make_store, tmp_path):
    """Names beginning with a NUL hold operator tables (dynamic broker configs, quotas): the
    offsets of a group of that name can go, its operator records never do."""
    store = make_store()
    offs = store.consumer_offsets
    assert offs.store_group_record("\x00", 32100, b"cluster-default").ok
    offs.commit_durable("\x00", {("T", 0): OffsetEntry(7)})
    assert offs.delete_group("\x00").ok
    again = reopen(crash_image(store, tmp_path))
    try:
        assert again.consumer_offsets.group_records(32100) == {"\x00": b"cluster-default"}
        assert again.consumer_offsets.offsets_of("\x00") == {}
    finally:
        again.shutdown()


def test_checkpoint_then_replay_and_retention_keeps_what_the_replay_needs(make_store, tmp_path):
    store = make_store(state_checkpoint_interval=3_600_000, file_reserved_time=0)
    offs = store.consumer_offsets
    offs.commit_durable("g", {("T", 0): OffsetEntry(1)})
    assert offs.checkpoint()
    doc = json.loads((store.config_dir / "consumerOffset.json").read_text())
    p = offs.partition_of("g")
    assert doc["positions"][str(p)] == 1 and doc["offsetTable"]["T@g"] == {"0": 1}
    offs.commit_durable("g", {("T", 0): OffsetEntry(2)})  # after the checkpoint: only in the log
    for i in range(400):  # fill several 64 KiB segments with other data
        assert store.put_record_batch("Filler", 0, _batch(i)).ok
    # the segment holding the commit after the checkpoint stays, everything older may go
    store.clean_expired_files(force=True)
    assert store.commitlog.min_offset <= offs.log.needed_commitlog_offset(offs._positions)
    image = crash_image(store, tmp_path)
    again = reopen(image)
    try:
        assert again.consumer_offsets.query("g", "T", 0) == 2
    finally:
        again.shutdown()
    offs.checkpoint()  # the checkpoint moves: nothing is pinned any more
    store.clean_expired_files(force=True)
    assert store.commitlog.min_offset > 0


def test_offsets_written_before_they_were_records_are_kept(tmp_path, make_store):
    root = tmp_path / "old"
    (root / "config").mkdir(parents=True)
    (root / "config" / "consumerOffset.json").write_text(json.dumps(
        {"offsetTable": {"T@old": {"0": 7, "1": 8}}, "metadataTable": {"T@old": {"1": "m"}}}))
    store = make_store(root=root)
    assert store.consumer_offsets.offsets_of("old") == {("T", 0): 7, ("T", 1): 8}
    assert store.consumer_offsets.query_metadata("old", "T", 1) == "m"
    store.consumer_offsets.flush_dirty()  # carried into the log
    image = crash_image(store, tmp_path)
    (image / "config" / "consumerOffset.json").unlink()
    again = reopen(image)
    try:
        assert again.consumer_offsets.offsets_of("old") == {("T", 0): 7, ("T", 1): 8}
    finally:
        again.shutdown()


def _batch(i: int) -> bytes:
    from engine import record_batch as rb

    return rb.build_batch([rb.Record(0, 0, None, bytes(400), [])])


def test_an_entry_no_record_can_hold_never_stops_the_others_being_saved(tmp_path, make_store):
    """A queue id outside int32 or a name over 32 KiB (from an old offsets file, or a caller that
    skipped the decoder's checks) is refused or dropped with an error event; every other
    group's offsets still reach the log, and deleting the topic still works."""
    import pytest

    from engine.consumer_offset import OffsetKeyError

    huge = "g" * 40_000
    root = tmp_path / "old"
    (root / "config").mkdir(parents=True)
    (root / "config" / "consumerOffset.json").write_text(json.dumps(
        {"offsetTable": {"T@ok": {"0": 7}, f"T@{huge}": {"0": 1}, "T@wide": {str(2**40): 3}, "T@ok2": {"1": 9}}}))
    store = make_store(root=root)
    offs = store.consumer_offsets
    with pytest.raises(OffsetKeyError):
        offs.commit("fresh", "T", 2**31, 1)
    with pytest.raises(OffsetKeyError):
        offs.commit(huge, "T", 0, 1)
    offs.commit("fresh", "T", 0, 5)
    offs.flush_dirty()  # must not raise
    image = crash_image(store, tmp_path)
    (image / "config" / "consumerOffset.json").unlink()
    again = reopen(image)
    try:
        saved = again.consumer_offsets
        assert saved.offsets_of("ok") == {("T", 0): 7}
        assert saved.offsets_of("ok2") == {("T", 1): 9}
        assert saved.offsets_of("fresh") == {("T", 0): 5}
        assert saved.offsets_of("wide") == {}
    finally:
        again.shutdown()
    offs.delete_topic("T")  # tombstones for what records can hold; the rest leaves memory
    assert offs.groups_of_topic("T") == set()


def test_the_cleaner_on_consumer_offsets_keeps_the_state_a_replay_rebuilds(make_store, tmp_path):
    """``__consumer_offsets`` is compacted: once the cleaner has removed superseded commits
    (dead-list units in the log), a replay from the log's start -- a crash with no checkpoint --
    still rebuilds every group's latest offsets, plain and transactional."""
    store = make_store(state_checkpoint_interval=3_600_000, log_cleaner_backoff_ms=3_600_000)
    offs = store.consumer_offsets
    p = offs.partition_of("g")
    for i in range(700):  # ~100 KB of commits of two keys: past one 64 KiB Kafka segment
        assert offs.commit_durable("g", {("T", 0): OffsetEntry(i), ("T", 1): OffsetEntry(10 * i)}).ok
    assert offs.stage_transactional("g", 77, 0, {("T", 2): OffsetEntry(5)}).ok
    assert offs.complete_transaction(p, 77, 0, True).ok
    removed = store.compactor.clean()
    assert removed > 1000, removed
    records = list(StateLog(store, CONSUMER_OFFSETS, 50).read(p))
    assert len(records) < 400, len(records)  # what a consumer of the partition reads now
    image = crash_image(store, tmp_path)
    (image / "config" / "consumerOffset.json").unlink(missing_ok=True)
    again = reopen(image)
    try:
        assert again.consumer_offsets.offsets_of("g") == {("T", 0): 699, ("T", 1): 6990, ("T", 2): 5}
        assert len(list(StateLog(again, CONSUMER_OFFSETS, 50).read(p))) == len(records)
    finally:
        again.shutdown()
