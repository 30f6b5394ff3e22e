"""Kafka records <-> RocketMQ message units (engine.batch_convert), both directions.

Units are built and read with the engine's own unit codec (engine.message); batches with
engine.record_batch and cross-read by kafka-python's record reader.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from engine import batch_convert as bc
from engine import message as m
from engine import record_batch as rb

STORE_HOST = ("10.1.2.3", 10911)
BORN_HOST = ("10.9.8.7", 40000)


def batch_unit(batch: bytes, *, queue_offset=100, commitlog_offset=4096, queue_id=3, topic="orders"):
    return m.encode_unit(topic=topic.encode(), body=batch, props=b"", queue_id=queue_id,
                         queue_offset=queue_offset, physical_offset=commitlog_offset,
                         sys_flag=m.INNER_BATCH_FLAG, born_timestamp=1, born_host=BORN_HOST,
                         store_timestamp=1_700_000_999_000, store_host=STORE_HOST)


def native_unit(msg: m.Message, *, queue_offset=7, commitlog_offset=8192):
    return m.encode_message(msg, queue_offset=queue_offset, physical_offset=commitlog_offset,
                            store_timestamp=1_700_000_999_000, store_host=STORE_HOST)


def test_expand_maps_every_record_to_its_own_message():
    records = [
        rb.Record(0, 0, b"order-1", b"v0", [("rmq.tags", b"TagA"), ("trace", b"t0")]),
        rb.Record(1, 5, None, None, [("rmq.keys", b"k1 k2")]),
        rb.Record(2, 9, b"order-3", b"v2", [("rmq.uniq.key", b"ABCDEF"), ("rmq.sys.WAIT", b"false")]),
    ]
    unit = batch_unit(rb.build_batch(records, base_offset=0, base_timestamp=1_700_000_000_000))
    units = bc.expand_batch_unit(unit)
    msgs = [m.decode_message(u, check_crc=True) for u in units]
    assert [x.queue_offset for x in msgs] == [100, 101, 102]
    assert {x.commitlog_offset for x in msgs} == {4096}
    assert {(x.topic, x.queue_id) for x in msgs} == {("orders", 3)}
    assert [x.body for x in msgs] == [b"v0", b"", b"v2"]
    assert [x.born_timestamp for x in msgs] == [1_700_000_000_000, 1_700_000_000_005, 1_700_000_000_009]
    assert all(not x.is_inner_batch for x in msgs)
    assert msgs[0].tags == "TagA" and msgs[0].keys == ["order-1"]
    assert msgs[0].properties["trace"] == "t0"
    assert msgs[1].tags is None and msgs[1].keys == ["k1", "k2"]
    assert msgs[2].uniq_key == "ABCDEF" and msgs[2].properties["WAIT"] == "false"
    assert [x.properties[bc.PROPERTY_KAFKA_OFFSET] for x in msgs] == ["100", "101", "102"]
    assert {x.properties[bc.PROPERTY_KAFKA_PARTITION] for x in msgs} == {"3"}
    # message ids clients see (UNIQ_KEY) are distinct and stable across expansions
    uniq = [x.uniq_key for x in msgs]
    assert len(set(uniq)) == 3
    assert [m.decode_message(u).uniq_key for u in bc.expand_batch_unit(unit)] == uniq
    assert len(uniq[0]) == 32


def test_expanding_a_compressed_batch():
    records = [rb.Record(i, i, None, b"payload-%d" % i * 50, []) for i in range(20)]
    for codec in (rb.COMPRESSION_GZIP, rb.COMPRESSION_SNAPPY, rb.COMPRESSION_LZ4, rb.COMPRESSION_ZSTD):
        units = bc.expand_batch_unit(batch_unit(rb.build_batch(records, compression=codec, base_timestamp=0)))
        assert [m.decode_message(u).body for u in units] == [r.value for r in records]


def test_header_named_like_a_system_property_does_not_become_one():
    rec = rb.Record(0, 0, None, b"x", [("DELAY", b"3"), ("TAGS", b"evil"), ("KAFKA_OFFSET", b"1"),
                                       ("rmq.unknown", b"u")])
    msg = m.decode_message(bc.expand_batch_unit(batch_unit(rb.build_batch([rec], base_timestamp=0)))[0])
    assert "DELAY" not in msg.properties and msg.tags is None
    assert msg.properties[bc.PROPERTY_KAFKA_OFFSET] == "100"
    _key, headers = bc.message_headers(msg.properties)
    assert [h for h in headers if not h[0].startswith("rmq.uniq")] == list(rec.headers)


def test_control_batches_expand_to_nothing():
    marker = rb.build_control_batch(rb.CONTROL_TYPE_COMMIT, producer_id=5, producer_epoch=1)
    assert bc.expand_batch_unit(batch_unit(marker)) == []


def test_expand_rejects_a_regular_unit():
    with pytest.raises(ValueError, match="INNER_BATCH"):
        bc.expand_batch_unit(native_unit(m.Message("t", b"x")))


def test_log_append_time_batch_uses_the_batch_timestamp():
    batch = rb.build_batch([rb.Record(0, 0, None, b"a", [])], base_timestamp=5,
                           timestamp_type=rb.TIMESTAMP_LOG_APPEND_TIME, max_timestamp=777)
    assert m.decode_message(bc.expand_batch_unit(batch_unit(batch))[0]).born_timestamp == 777


def test_unit_to_batch_for_a_native_message():
    msg = m.Message("orders", b"hello", tags="TagB", keys=["id-9", "alt"],
                    properties={"color": "red", "UNIQ_KEY": "U1", "WAIT": "true"},
                    queue_id=1, born_timestamp=1_690_000_000_000, born_host=BORN_HOST)
    batch = bc.unit_to_batch(native_unit(msg, queue_offset=55))
    header, records = rb.decode_batch(batch)
    rb.validate_batch(batch)
    assert header.base_offset == 55 and header.record_count == 1
    assert header.timestamp_type == rb.TIMESTAMP_CREATE_TIME
    (rec,) = records
    assert rec.key == b"id-9" and rec.value == b"hello"
    assert rec.absolute_timestamp(header) == 1_690_000_000_000
    assert dict(rec.headers) == {"color": b"red", "rmq.tags": b"TagB", "rmq.keys": b"id-9 alt",
                                 "rmq.uniq.key": b"U1", "rmq.sys.WAIT": b"true"}
    # a real Kafka client library reads the batch
    (kmsg,) = list(DefaultRecordBatch(batch))
    assert (kmsg.offset, kmsg.key, kmsg.value, kmsg.timestamp) == (55, b"id-9", b"hello", 1_690_000_000_000)


def test_unit_to_batch_without_keys_has_null_key():
    (rec,) = rb.decode_records(bc.unit_to_batch(native_unit(m.Message("t", b"b", born_timestamp=1))))
    assert rec.key is None and rec.value == b"b"


def test_unit_to_batch_decompresses_rocketmq_compressed_bodies():
    body = b"large body " * 1000
    unit = m.encode_unit(topic=b"t", body=zlib.compress(body), props=b"", queue_id=0, queue_offset=3,
                         sys_flag=m.COMPRESSED_FLAG, born_timestamp=9)
    (rec,) = rb.decode_records(bc.unit_to_batch(unit))
    assert rec.value == body


def test_unit_to_batch_of_a_batch_unit_returns_the_stored_batch_at_its_offset():
    batch = rb.build_batch([rb.Record(i, 0, None, b"x", []) for i in range(4)], base_timestamp=0)
    out = bc.unit_to_batch(batch_unit(batch, queue_offset=900))
    header = rb.validate_batch(out)
    assert header.base_offset == 900 and header.record_count == 4
    assert out[8:] == batch[8:]


def test_escaping_round_trips_awkward_values():
    for value in (None, b"", b"plain", b"\x01\x02", b"\xff\xfe", b"rmq.null", b"rmq.b64:AAAA", "é".encode()):
        assert bc.unescape_value(bc.escape_value(value)) == value
        text = bc.escape_value(value)
        assert "\x01" not in text and "\x02" not in text


# --- property-based round trips ------------------------------------------------------------

prop_text = st.text(alphabet=st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)),
                    max_size=12)
key_word = st.text(alphabet=st.characters(blacklist_characters=" \x01\x02", blacklist_categories=("Cs",)),
                   min_size=1, max_size=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=200), tags=st.one_of(st.none(), key_word),
       keys=st.lists(key_word, max_size=3, unique=True),
       user=st.dictionaries(prop_text.filter(lambda s: s and not s.startswith("rmq.")
                                             and s not in bc.SYSTEM_PROPERTIES
                                             and s not in ("KAFKA_PARTITION", "KAFKA_OFFSET", "KAFKA_KEY")),
                            prop_text, max_size=4),
       system=st.dictionaries(st.sampled_from(["WAIT", "DELAY", "UNIQ_KEY", "TRACE_ON", "MAX_RECONSUME_TIMES"]),
                              key_word, max_size=3),
       born=st.integers(min_value=0, max_value=2**44), queue_offset=st.integers(0, 2**40))
def test_native_to_batch_to_native(body, tags, keys, user, system, born, queue_offset):
    user = {k: v for k, v in user.items() if not v.startswith("rmq.")}
    msg = m.Message("topic-a", body, tags=tags, keys=keys or None, properties={**user, **system},
                    queue_id=2, born_timestamp=born)
    original = m.decode_message(native_unit(msg, queue_offset=queue_offset))
    batch = bc.unit_to_batch(native_unit(msg, queue_offset=queue_offset))
    (back,) = [m.decode_message(u) for u in bc.expand_batch_unit(batch_unit(batch, queue_offset=queue_offset, queue_id=2))]
    assert back.body == body
    assert back.born_timestamp == born
    assert back.queue_offset == queue_offset
    assert back.tags == original.tags and back.keys == original.keys
    props = {k: v for k, v in back.properties.items() if k not in (bc.PROPERTY_KAFKA_PARTITION, bc.PROPERTY_KAFKA_OFFSET)}
    expected = dict(original.properties)
    if "UNIQ_KEY" not in expected:
        expected["UNIQ_KEY"] = back.uniq_key  # derived for messages that had none
    assert props == expected


header_names = st.text(max_size=10).filter(lambda s: not s.startswith("rmq."))
header_values = st.one_of(st.none(), st.binary(max_size=30))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw=st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=12)), st.one_of(st.none(), st.binary(max_size=50)),
                              st.lists(st.tuples(header_names, header_values), max_size=5)),
                    min_size=1, max_size=6))
def test_batch_to_native_to_batch_keeps_key_value_headers(raw):
    records = [rb.Record(i, i * 3, k, v, h) for i, (k, v, h) in enumerate(raw)]
    units = bc.expand_batch_unit(batch_unit(rb.build_batch(records, base_timestamp=10_000)))
    assert len(units) == len(records)
    for rec, unit in zip(records, units):
        again = rb.decode_records(bc.unit_to_batch(unit))[0]
        assert again.key == rec.key
        assert again.value == (rec.value if rec.value is not None else b"")
        user_headers = [h for h in again.headers if h[0] not in (bc.HEADER_KEYS, bc.HEADER_UNIQ_KEY)]
        assert user_headers == list(rec.headers)
        assert rb.decode_batch(bc.unit_to_batch(unit))[0].base_timestamp == 10_000 + rec.timestamp_delta


def test_through_the_real_store(tmp_path):
    """A batch stored by MessageStore.put_record_batch expands at the offsets the store gave it,
    and a natively put message comes back as a batch at its queue offset."""
    from engine.store import MessageStore
    from tests.engine.engine_support import small_config

    store = MessageStore(small_config(tmp_path))
    store.start()
    try:
        native = store.put_message(m.Message("mixed", b"native-0", tags="T0", keys=["n0"], queue_id=0))
        assert native.ok
        records = [rb.Record(i, i, b"k%d" % i, b"kafka-%d" % i, [("rmq.tags", b"TK")]) for i in range(3)]
        put = store.put_record_batch("mixed", 0, rb.build_batch(records, base_timestamp=1_700_000_000_000))
        assert put.ok and put.queue_offset == 1 and put.record_count == 3
        # the facade promises visibility once put returns
        got = store.get_message("g", "mixed", 0, 0, 10)
        assert len(got.messages) == 2
        native_unit_bytes, batch_unit_bytes = got.messages
        expanded = [m.decode_message(u) for u in bc.expand_batch_unit(batch_unit_bytes)]
        assert [x.queue_offset for x in expanded] == [1, 2, 3]
        assert [x.body for x in expanded] == [b"kafka-0", b"kafka-1", b"kafka-2"]
        assert {x.tags for x in expanded} == {"TK"}
        assert [x.keys for x in expanded] == [["k0"], ["k1"], ["k2"]]
        (rec,) = rb.decode_records(bc.unit_to_batch(native_unit_bytes))
        assert rb.parse_header(bc.unit_to_batch(native_unit_bytes)).base_offset == 0
        assert rec.value == b"native-0" and rec.key == b"n0" and dict(rec.headers)["rmq.tags"] == b"T0"
        stored = bc.unit_to_batch(batch_unit_bytes)
        assert rb.validate_batch(stored).base_offset == 1
        assert [r.value for r in rb.decode_records(stored)] == [r.value for r in records]
    finally:
        store.shutdown()
