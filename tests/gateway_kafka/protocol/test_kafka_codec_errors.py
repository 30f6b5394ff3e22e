"""Bad input to the Kafka codec gets a clear, typed error; never a crash or a hang.

Also checks the zero-copy promises: records decode as views of the frame and large records
leave encode_response_chunks as their own chunk.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kafka.protocol import (
    ApiKey,
    ErrorCode,
    KafkaError,
    MalformedRequestError,
    UnsupportedVersionError,
    api_schema,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)


def produce_frame(version=9, records=b"r" * 10):
    body = {"acks": -1, "timeout_ms": 1000, "topic_data": [
        {"name": "t", "partition_data": [{"index": 3, "records": records}]}]}
    return encode_request(ApiKey.PRODUCE, version, 42, body, client_id="c")[4:]


def test_unknown_api_key_keeps_header_for_the_answer():
    frame = struct.pack(">hhi", 999, 0, 77) + struct.pack(">h", 3) + b"abc"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (999, 0, 77)
    assert info.value.client_id == "abc"
    assert "unknown api key 999" in str(info.value)


def test_too_new_api_versions_request_is_unsupported_with_header():
    top = api_schema(ApiKey.API_VERSIONS).max_version
    frame = struct.pack(">hhi", ApiKey.API_VERSIONS, top + 1, 5) + struct.pack(">h", -1) + b"\x00garbage"
    with pytest.raises(UnsupportedVersionError) as info:
        decode_request(frame)
    assert info.value.correlation_id == 5 and info.value.api_version == top + 1
    assert f"supported versions are 0-{top}" in str(info.value)
    # the KIP-511 answer: a v0 body, header v0
    out = encode_response(ApiKey.API_VERSIONS, 0, 5, {"error_code": ErrorCode.UNSUPPORTED_VERSION,
                                                      "api_keys": [{"api_key": 18, "min_version": 0, "max_version": top}]})
    assert out[4:8] == struct.pack(">i", 5)
    assert out[8:10] == struct.pack(">h", 35)


def test_short_header_is_malformed():
    with pytest.raises(MalformedRequestError, match="at least 8 bytes"):
        decode_request(b"\x00\x00\x00")


def test_truncated_body_is_malformed_with_ids():
    frame = produce_frame()
    for cut in (1, 5, 20, len(frame) - 12):
        with pytest.raises(MalformedRequestError) as info:
            decode_request(frame[:-cut])
        assert info.value.correlation_id == 42 and info.value.api_key == ApiKey.PRODUCE


def test_trailing_bytes_are_ignored_and_counted():
    # Kafka brokers ignore them; librdkafka sends some (all-topics Metadata v12)
    req = decode_request(produce_frame() + b"\x01\x00\x00")
    assert req.trailing_bytes == 3
    assert req.body == decode_request(produce_frame()).body
    assert decode_request(produce_frame()).trailing_bytes == 0


def test_lying_array_length_is_rejected_without_allocating():
    frame = bytearray(produce_frame(version=8))
    # topic_data count sits after header(8) + client id(2+1) + transactional id(2) + acks(2) + timeout(4)
    pos = 8 + 3 + 2 + 2 + 4
    assert struct.unpack_from(">i", frame, pos)[0] == 1
    struct.pack_into(">i", frame, pos, 2**31 - 1)
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(bytes(frame))


def test_invalid_utf8_is_malformed():
    frame = bytearray(produce_frame(version=8))
    idx = frame.index(b"\x00\x01t") + 2
    frame[idx] = 0xFF
    with pytest.raises(MalformedRequestError, match="UTF-8"):
        decode_request(bytes(frame))


@settings(max_examples=300, deadline=None, database=None)
@given(st.binary(max_size=200), st.sampled_from([k for k in ApiKey]), st.integers(0, 17))
def test_random_bodies_raise_only_typed_errors(junk, key, version):
    frame = struct.pack(">hhi", key, version, 1) + struct.pack(">h", 1) + b"x" + junk
    try:
        decode_request(frame)
    except (MalformedRequestError, UnsupportedVersionError):
        pass


def test_records_are_views_of_the_frame():
    frame = produce_frame(records=b"R" * 100)
    req = decode_request(frame)
    rec = req.body["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(rec, memoryview) and bytes(rec) == b"R" * 100
    assert rec.obj is frame


def test_large_records_become_their_own_chunk():
    big = memoryview(bytes(range(256)) * 64)
    small = b"s" * 10
    body = {"responses": [{"name": "t", "partitions": [
        {"partition_index": 0, "records": big},
        {"partition_index": 1, "records": [small, big]},
    ]}]}
    chunks = encode_response_chunks(ApiKey.FETCH, 11, 9, body)
    assert any(c is big for c in chunks), "a large records payload must not be copied"
    joined = b"".join(bytes(c) for c in chunks)
    assert joined == encode_response(ApiKey.FETCH, 11, 9, body)
    assert struct.unpack_from(">i", joined)[0] == len(joined) - 4
    _corr, decoded = decode_response(ApiKey.FETCH, 11, joined[4:])
    parts = decoded["responses"][0]["partitions"]
    assert bytes(parts[0]["records"]) == bytes(big)
    assert bytes(parts[1]["records"]) == small + bytes(big)


def test_missing_fields_take_defaults():
    out = encode_response(ApiKey.METADATA, 12, 1, {"topics": [{"name": "t"}]})
    _c, body = decode_response(ApiKey.METADATA, 12, out[4:])
    topic = body["topics"][0]
    assert topic["error_code"] == 0 and topic["partitions"] == [] and topic["is_internal"] is False
    assert topic["topic_authorized_operations"] == -2147483648
    assert body["cluster_id"] is None and body["controller_id"] == -1


def test_fields_absent_in_version_are_ignored():
    body = {"throttle_time_ms": 5, "responses": [], "node_endpoints": [{"node_id": 1, "host": "h", "port": 1}]}
    out = encode_response(ApiKey.PRODUCE, 0, 1, body)
    _c, decoded = decode_response(ApiKey.PRODUCE, 0, out[4:])
    assert decoded == {"responses": []}


def test_flexible_response_header_has_tag_section_except_api_versions():
    out = encode_response(ApiKey.METADATA, 9, 1, {})
    assert out[8] == 0  # empty header tagged fields
    av = encode_response(ApiKey.API_VERSIONS, 3, 1, {"error_code": 0})
    assert av[8:10] == b"\x00\x00"  # error_code right after the correlation id


def test_kafka_error_carries_code_and_message():
    err = KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    assert err.code == 3 and "no such topic" in err.message
    assert KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, "name too long").message == "name too long"
    assert ErrorCode.NONE == 0 and ErrorCode.CORRUPT_MESSAGE == 2 and ErrorCode.OFFSET_OUT_OF_RANGE == 1
