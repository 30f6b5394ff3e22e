"""IndexFile layout and IndexService: chains newest first, new file when full, time ranges."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.file_io import MemoryFileIO
from engine.index_file import HEADER_SIZE, IndexFile, IndexService, key_hash


def test_header_slot_and_entry_layout():
    fio = MemoryFileIO()
    f = IndexFile(fio, "/i/x", slot_num=8, index_num=16)
    assert f.size == 40 + 8 * 4 + 16 * 20
    f.put_key("T#k", 1000, 5_000)
    f.put_key("T#k", 2000, 7_500)
    buf = f.segment.buf
    begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count = struct.unpack_from(">qqqqii", buf, 0)
    assert (begin_ts, end_ts, begin_phy, end_phy, slot_count, index_count) == (5_000, 7_500, 1000, 2000, 1, 3)
    slot = HEADER_SIZE + (key_hash("T#k") % 8) * 4
    assert struct.unpack_from(">i", buf, slot)[0] == 2
    entry2 = HEADER_SIZE + 8 * 4 + 2 * 20
    assert struct.unpack_from(">iqii", buf, entry2) == (key_hash("T#k"), 2000, 2, 1)
    out: list[int] = []
    f.select("T#k", 10, 0, 10_000, out)
    assert out == [2000, 1000]


def test_service_rolls_to_new_file_when_full_and_queries_all(tmp_path):
    fio = MemoryFileIO()
    svc = IndexService(fio, "/idx", slot_num=4, index_num=5)
    svc.load()
    for i in range(20):
        svc.build_index("T", [f"k{i % 3}"], i * 100, 1_000 + i)
    assert len(svc.files) == 5  # 4 entries per file (entry 0 unused)
    hits = svc.query("T", "k0", 100, 0, 10**12)
    assert hits == [i * 100 for i in range(18, -1, -3)]
    reopened = IndexService(fio, "/idx", slot_num=4, index_num=5)
    reopened.load()
    assert reopened.query("T", "k1", 3, 0, 10**12) == [1900, 1600, 1300]


def test_entries_added_again_after_a_crash_do_not_hide_older_offsets_of_the_key():
    # each recovery after a kill adds the entries past the index checkpoint again; a query for
    # the key's newest two offsets must still get two different ones
    svc = IndexService(MemoryFileIO(), "/idx", slot_num=8, index_num=64)
    svc.load()
    svc.build_index("T", ["k"], 100, 1_000)
    for _ in range(5):  # five crashes re-adding the newer unit
        svc.build_index("T", ["k"], 200, 2_000)
    assert svc.query("T", "k", 2, 0, 10**12) == [200, 100]
    assert svc.query("T", "k", 1, 0, 10**12) == [200]


def test_key_hash_is_non_negative():
    assert all(key_hash(k) >= 0 for k in ["", "a", "polygenelubricants", "T#" + "x" * 50])


def test_a_put_killed_between_slot_and_header_keeps_the_older_chain():
    """put_key writes entry, slot, header in that order. A process killed after the slot but
    before the header leaves the slot pointing at an uncounted entry; after the restart the
    older keys of that slot must still be found, before and after the next put."""
    fio = MemoryFileIO()
    f = IndexFile(fio, "/i/x", slot_num=1, index_num=16)  # one slot: every key shares the chain
    f.put_key("T#a", 100, 1_000)
    f.put_key("T#b", 200, 1_000)
    # the interrupted put of T#c: entry at position index_count (prev = current head), then slot
    count = f.index_count
    entry = HEADER_SIZE + 1 * 4 + count * 20
    f.segment.write(entry, struct.pack(">iqii", key_hash("T#c"), 300, 0, count - 1))
    f.segment.write(HEADER_SIZE, struct.pack(">i", count))
    restarted = IndexFile(fio.crash(power_loss=False), "/i/x", slot_num=1, index_num=16)
    assert restarted.index_count == count  # the header never counted T#c

    def find(key):
        out: list[int] = []
        restarted.select(key, 10, 0, 10_000, out)
        return out

    assert find("T#a") == [100] and find("T#b") == [200] and find("T#c") == []
    restarted.put_key("T#d", 400, 1_000)  # overwrites the uncounted entry
    assert find("T#a") == [100] and find("T#b") == [200] and find("T#d") == [400]


def test_a_torn_put_is_undone_before_a_put_of_another_slot_overwrites_it():
    """The same kill, but the next put after the restart hashes to another slot: it writes its
    entry where the torn one was, so a slot still pointing there would lead into the other
    slot's chain and lose every older key of its own."""
    slots = 4
    keys = [f"T#k{i}" for i in range(64)]
    first = [k for k in keys if key_hash(k) % slots == 1][:3]
    other = next(k for k in keys if key_hash(k) % slots == 2)
    fio = MemoryFileIO()
    f = IndexFile(fio, "/i/x", slot_num=slots, index_num=16)
    f.put_key(first[0], 100, 1_000)
    f.put_key(first[1], 200, 1_000)
    count = f.index_count  # the interrupted put of first[2]: entry, then slot, no header
    f.segment.write(HEADER_SIZE + slots * 4 + count * 20, struct.pack(">iqii", key_hash(first[2]), 300, 0, count - 1))
    f.segment.write(HEADER_SIZE + 1 * 4, struct.pack(">i", count))
    restarted = IndexFile(fio.crash(power_loss=False), "/i/x", slot_num=slots, index_num=16)

    def find(key):
        out: list[int] = []
        restarted.select(key, 10, 0, 10_000, out)
        return out

    restarted.put_key(other, 400, 1_000)  # takes the entry position the torn put had written
    assert find(first[0]) == [100] and find(first[1]) == [200] and find(other) == [400]
    assert find(first[2]) == []
    restarted.put_key(first[2], 300, 1_000)  # recovery adds the torn key again
    assert find(first[2]) == [300] and find(first[0]) == [100]


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=())))
def test_the_compiled_key_hash_is_javas_string_hashcode(text):
    """The index's key hash is compiled (engine/_recordwalk.c) with a Python fallback: both give
    Java's String.hashCode over UTF-16 code units (astral characters as surrogate pairs, a lone
    surrogate as itself), which RocketMQ's index files hold."""
    from engine import index_file
    from engine.message import tags_code

    assert index_file._java_hash is not index_file._java_hash_py, "engine._recordwalk was not built"
    for s in (text, "T#" + text, "\ud800x" + text, "中文😀" + text):
        assert index_file._java_hash(s) == index_file._java_hash_py(s) == tags_code(s)
