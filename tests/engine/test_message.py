"""The commitlog unit codec: RocketMQ's field layout, hosts, properties, ids, tag hashes."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.message import (BLANK_MAGIC_CODE, BORNHOST_V6_FLAG, MAGIC_CODE_V1, MAGIC_CODE_V2, STOREHOST_V6_FLAG,
                            Message, body_crc, decode_message, decode_message_id, decode_properties,
                            encode_message, encode_properties, message_id, tags_code)


def test_magic_codes_are_rocketmqs():
    assert MAGIC_CODE_V1 & 0xFFFFFFFF == 0xDAA320A7
    assert MAGIC_CODE_V2 & 0xFFFFFFFF == 0xDAA320AB
    assert BLANK_MAGIC_CODE & 0xFFFFFFFF == 0xCBD43194


def test_tags_code_is_java_string_hashcode():
    assert tags_code("hello") == 99162322
    assert tags_code("abc") == 96354
    assert tags_code("TagA") == 2598919
    assert tags_code("a-very-long-tag-that-overflows") == _java_hash("a-very-long-tag-that-overflows")
    assert tags_code("中文") == _java_hash("中文")
    assert tags_code(None) == 0 and tags_code("") == 0


def _java_hash(s: str) -> int:
    h = 0
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    for u in units:
        h = (31 * h + u) % 2**32
    return h - 2**32 if h >= 2**31 else h


def test_unit_field_positions_match_rocketmq_layout():
    msg = Message("TopicA", b"body!", tags="T", keys=["k1", "k2"], queue_id=3, flag=7,
                  born_timestamp=1111, born_host=("10.0.0.1", 5555), reconsume_times=2,
                  prepared_transaction_offset=99)
    unit = encode_message(msg, queue_offset=42, physical_offset=4096, store_timestamp=2222,
                          store_host=("192.168.1.2", 10911))
    total, magic, crc, qid, flag, qoff, phy, sysflag, born_ts = struct.unpack_from(">iiiiiqqiq", unit)
    assert total == len(unit)
    assert magic == MAGIC_CODE_V1
    assert crc == body_crc(b"body!")
    assert (qid, flag, qoff, phy, sysflag, born_ts) == (3, 7, 42, 4096, 0, 1111)
    assert unit[48:52] == bytes([10, 0, 0, 1]) and struct.unpack_from(">i", unit, 52)[0] == 5555
    assert struct.unpack_from(">q", unit, 56)[0] == 2222
    assert unit[64:68] == bytes([192, 168, 1, 2]) and struct.unpack_from(">i", unit, 68)[0] == 10911
    assert struct.unpack_from(">iqi", unit, 72) == (2, 99, 5)
    assert unit[88:93] == b"body!"
    assert unit[93] == 6 and unit[94:100] == b"TopicA"
    props_len = struct.unpack_from(">H", unit, 100)[0]
    assert unit[102:] == b"TAGS\x01T\x02KEYS\x01k1 k2\x02" and props_len == len(unit) - 102


def test_decode_returns_every_field():
    msg = Message("TopicA", b"xyz", tags="TagA", keys=["a", "b"], properties={"UNIQ_KEY": "U1", "p": "v"}, queue_id=1)
    m = decode_message(encode_message(msg, queue_offset=5, physical_offset=77, store_timestamp=123,
                                      store_host=("127.0.0.1", 10911)))
    assert (m.topic, m.body, m.tags, m.keys, m.queue_id, m.queue_offset, m.commitlog_offset) == (
        "TopicA", b"xyz", "TagA", ["a", "b"], 1, 5, 77)
    assert m.properties["p"] == "v" and m.uniq_key == "U1" and m.store_timestamp == 123
    assert m.msg_id == "7F00000100002A9F000000000000004D"
    assert decode_message_id(m.msg_id) == (("127.0.0.1", 10911), 77)


def test_long_topic_uses_magic_v2_and_ipv6_hosts_set_sysflag_bits():
    topic = "t" * 200
    unit = encode_message(Message(topic, b"b", born_host="[::1]:80"), store_host=("::2", 9))
    m = decode_message(unit)
    assert m.magic_code == MAGIC_CODE_V2 and m.topic == topic
    assert m.sys_flag & BORNHOST_V6_FLAG and m.sys_flag & STOREHOST_V6_FLAG
    assert m.born_host == ("::1", 80) and m.store_host == ("::2", 9)
    assert len(m.msg_id) == 56


def test_message_id_is_store_host_and_offset():
    assert message_id(("10.1.2.3", 10911), 1 << 32) == "0A01020300002A9F0000000100000000"


props_st = st.dictionaries(
    st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=20),
    st.text(st.characters(blacklist_characters="\x00\x01\x02", blacklist_categories=("Cs",)), max_size=40),
    max_size=8)


@given(props_st)
def test_properties_round_trip(props):
    assert decode_properties(encode_properties(props)) == props


@settings(max_examples=200)
@given(
    topic=st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=300),
    body=st.binary(max_size=2000),
    props=props_st,
    queue_id=st.integers(0, 1000),
    qoff=st.integers(0, 2**62),
    phy=st.integers(0, 2**62),
    ts=st.integers(0, 2**50),
    v6=st.booleans(),
)
def test_unit_round_trip(topic, body, props, queue_id, qoff, phy, ts, v6):
    host = ("::1", 1234) if v6 else ("1.2.3.4", 1234)
    msg = Message(topic, body, properties=props, queue_id=queue_id, born_timestamp=ts, born_host=host)
    unit = encode_message(msg, queue_offset=qoff, physical_offset=phy, store_timestamp=ts + 1, store_host=host)
    m = decode_message(unit, check_crc=True)
    assert (m.topic, m.body, m.properties, m.queue_id, m.queue_offset, m.commitlog_offset) == (
        topic, body, props, queue_id, qoff, phy)
    assert (m.born_timestamp, m.store_timestamp, m.born_host, m.store_host, m.store_size) == (
        ts, ts + 1, host, host, len(unit))


@settings(max_examples=300)
@given(st.data())
def test_mutated_units_fail_only_with_message_format_error(data):
    from engine.message import MessageFormatError

    unit = bytearray(encode_message(Message("Topic", data.draw(st.binary(max_size=64)), tags="t", keys=["k"]),
                                    store_host=("1.2.3.4", 5)))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(unit) - 1))
        unit[pos] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(unit)))
    try:
        m = decode_message(bytes(unit[:cut]), check_crc=data.draw(st.booleans()))
    except MessageFormatError:
        return
    assert m.store_size <= cut


@given(st.binary(max_size=200))
def test_random_bytes_fail_only_with_message_format_error(raw):
    from engine.message import MessageFormatError

    try:
        decode_message(raw)
    except MessageFormatError:
        pass


def test_unit_whose_body_reaches_its_end_is_rejected_cleanly():
    from engine.message import MessageFormatError, UnitHeader

    unit = bytearray(encode_message(Message("T", b"abc")))
    struct.pack_into(">i", unit, 84, len(unit) - 88)  # body length swallowing topic and properties
    try:
        UnitHeader(bytes(unit), 0)
    except MessageFormatError:
        pass
    else:
        raise AssertionError("accepted a unit whose body overruns its topic")
