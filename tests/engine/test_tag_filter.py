"""Tag expressions: `*`, `TagA||TagB`, hash filtering in the queue and the exact check."""

from __future__ import annotations

from engine.message import Message, decode_message, tags_code
from engine.store import GetMessageStatus
from engine.tag_filter import TagMessageFilter, parse_tag_expression, tags_match


def test_parse_expressions():
    assert parse_tag_expression("*").matches_all
    assert parse_tag_expression(None).matches_all and parse_tag_expression("  ").matches_all
    e = parse_tag_expression("TagA || TagB||TagC ")
    assert e.tags == {"TagA", "TagB", "TagC"} and tags_code("TagB") in e.codes
    assert parse_tag_expression("TagA||*").matches_all


def test_exact_match_helper():
    assert tags_match("TagA||TagB", "TagB")
    assert not tags_match("TagA||TagB", "TagC")
    assert not tags_match("TagA", None)
    assert tags_match("*", None)


def test_get_message_filters_by_tag(make_store):
    store = make_store()
    for i in range(12):
        store.put_message(Message("F", b"%d" % i, tags=["TagA", "TagB", "TagC"][i % 3]))
    store.put_message(Message("F", b"untagged"))
    got = store.get_message("g", "F", 0, 0, 100, message_filter=TagMessageFilter("TagA||TagC"))
    assert [decode_message(m).tags for m in got.messages] == ["TagA", "TagC"] * 4
    assert got.next_begin_offset == 13
    none = store.get_message("g", "F", 0, 0, 100, message_filter=TagMessageFilter("TagZ"))
    assert none.status is GetMessageStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 13
    everything = store.get_message("g", "F", 0, 0, 100, message_filter=TagMessageFilter("*"))
    assert len(everything.messages) == 13


def test_hash_collision_is_caught_by_the_exact_check(make_store):
    # "Aa" and "BB" have the same Java hashCode
    assert tags_code("Aa") == tags_code("BB")
    store = make_store()
    store.put_message(Message("H", b"1", tags="Aa"))
    store.put_message(Message("H", b"2", tags="BB"))
    f = TagMessageFilter("Aa")
    got = store.get_message("g", "H", 0, 0, 10, message_filter=f)
    assert [decode_message(m).body for m in got.messages] == [b"1"]
