"""The remote tier's manifest (engine/tiered/manifest.py) in a real store's log.

Every change is a record of the internal state topic; a store opened again on the same files
replays the same view: which ranges are readable remotely, which uploads are orphans.
"""

from __future__ import annotations

import dataclasses

import pytest

from engine.tiered.manifest import (COMMITTED, MANIFEST_TOPIC, Manifest, ManifestConflict,
                                    RemoteSegment)


def seg(base, end, upload_id, queue_id=0, topic="orders", **kw):
    return RemoteSegment(topic=topic, queue_id=queue_id, base=base, end=end, upload_id=upload_id,
                         state="", log_key=f"{topic}/{queue_id}/{base:020d}-{upload_id}.log",
                         idx_key=f"{topic}/{queue_id}/{base:020d}-{upload_id}.idx", **kw)


def committed(m, base, end, upload_id, size=100, **kw):
    s = m.start(seg(base, end, upload_id, **kw))
    return m.commit(dataclasses.replace(s, log_size=size, log_crc32c=7, first_timestamp=base,
                                        last_timestamp=end - 1))


def test_only_committed_ranges_are_readable_and_survive_a_restart(make_store, tmp_path):
    store = make_store()
    m = Manifest(store)
    m.load()
    committed(m, 0, 100, "a1", size=1000)
    committed(m, 100, 250, "a2", size=1500)
    m.start(seg(250, 400, "a3"))                       # in flight when the node stops
    committed(m, 0, 50, "b1", queue_id=1, size=10)

    assert m.segment_for("orders", 0, 99).upload_id == "a1"
    assert m.segment_for("orders", 0, 100).upload_id == "a2"
    assert m.segment_for("orders", 0, 250) is None     # started, not committed: not readable
    assert (m.remote_start("orders", 0), m.remote_end("orders", 0)) == (0, 250)
    assert m.remote_bytes("orders") == 2510
    store.shutdown()

    again = Manifest(make_store())
    assert again.load() == 7                            # 4 started + 3 committed records
    assert [(s.base, s.end, s.state) for s in again.segments("orders", 0)] == \
        [(0, 100, COMMITTED), (100, 250, COMMITTED)]
    assert again.segment_for("orders", 1, 49).log_size == 10
    assert [o.upload_id for o in again.orphans()] == ["a3"]
    assert again.log.store.topic_config.get(MANIFEST_TOPIC).attributes["internal"] == "true"


def test_refused_changes_leave_the_manifest_as_it_was(make_store):
    m = Manifest(make_store())
    m.load()
    committed(m, 0, 100, "a1")
    with pytest.raises(ManifestConflict):
        m.start(seg(50, 150, "x"))                      # overlaps a committed range
    with pytest.raises(ManifestConflict):
        m.commit(seg(100, 200, "never-started"))
    m.start(seg(100, 200, "a2"))
    with pytest.raises(ManifestConflict):
        m.start(seg(100, 200, "a2-retry"))              # the orphan is swept first
    with pytest.raises(ManifestConflict):
        m.commit(seg(100, 200, "other-upload"))         # another upload's commit
    m.forget_orphan("orders/0/100")
    committed(m, 100, 200, "a2-retry")
    assert [s.upload_id for s in m.segments("orders", 0)] == ["a1", "a2-retry"]
    assert m.orphans() == []


def test_remote_retention_moves_the_remote_start(make_store):
    store = make_store()
    m = Manifest(store)
    m.load()
    committed(m, 0, 100, "a1")
    committed(m, 100, 200, "a2")
    m.mark_deleted("orders/0/0")
    assert m.remote_start("orders", 0) == 100           # readers stop using it at once
    assert m.segment_for("orders", 0, 5) is None
    assert [s.key for s in m.delete_marked()] == ["orders/0/0"]
    m.deleted("orders/0/0")
    with pytest.raises(ManifestConflict):
        m.mark_deleted("orders/0/0")
    store.shutdown()
    again = Manifest(make_store())
    again.load()
    assert [s.base for s in again.segments("orders", 0)] == [100]
    assert again.delete_marked() == []


def test_a_follower_catches_up_with_what_the_writer_appended(make_store):
    store = make_store()
    writer = Manifest(store)
    writer.load()
    committed(writer, 0, 100, "w1")
    follower = Manifest(store)            # a slave's view: the same log, replayed
    follower.load()
    assert follower.remote_end("orders", 0) == 100
    committed(writer, 100, 200, "w2")
    writer.mark_deleted("orders/0/0")
    writer.deleted("orders/0/0")
    assert follower.remote_end("orders", 0) == 100   # not before it reads the log again
    assert follower.catch_up() == 4                  # started, committed, delete_marked, tombstone
    assert [s.base for s in follower.segments("orders", 0)] == [100]
    assert follower.remote_start("orders", 0) == 100 and follower.catch_up() == 0
