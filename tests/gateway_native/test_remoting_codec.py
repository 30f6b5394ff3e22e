"""Remoting frame codec: golden frames in both header serializations, round trips, bad frames."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, strategies as st

from gateway_native.remoting import command as rc
from gateway_native.remoting.codes import LanguageCode, RequestCode, SerializeType
from gateway_native.remoting.message_codec import (
    decode_batch_body, encode_batch_item, properties_to_string, string_to_properties, tags_hash,
)


@pytest.fixture(autouse=True, scope="module", params=["compiled", "python"])
def codec(request):
    """Every test here runs with the codec command.py binds (the compiled one, when built) and
    with the Python codec it falls back to (tests/gateway_native/test_framecodec.py compares
    the two directly)."""
    if request.param == "compiled":
        if rc._framecodec is None:
            pytest.skip("gateway_native.remoting._framecodec was not built")
        yield
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(rc, "decode_frame", rc.decode_frame_py)  # FrameDecoder.feed looks it up on each call
        mp.setattr(rc, "encode", rc.encode_py)
        yield


def test_the_compiled_codec_is_built():
    # `pip install -e .` compiles gateway_native/remoting/_framecodec.c when a C compiler is there,
    # as on every machine this suite runs on; the Python codec stays as its fallback
    assert rc._framecodec is not None, "gateway_native.remoting._framecodec was not built: is a C compiler installed?"


# GET_ROUTEINFO_BY_TOPIC as RocketMQSerializable writes it: code 105, JAVA, version 401,
# opaque 7, flag 0, no remark, extFields {topic: T}.
GOLDEN_ROCKETMQ = bytes.fromhex(
    "00000025"          # length = 4 + 33 header bytes, no body
    "01000021"          # serialize type 1 (ROCKETMQ) << 24 | header length 33
    "0069" "00" "0191"  # code 105, language JAVA, version 401
    "00000007" "00000000"  # opaque 7, flag 0
    "00000000"          # remark: empty
    "0000000c" "0005" "746f706963" "00000001" "54"  # extFields: 'topic' -> 'T'
)


# Captured from the stock Java client (a raw socket posing as the NameServer): the first request
# rocketmq-client 4.9.8 sends, GET_ROUTEINFO_BY_TOPIC for TBW102, in each serialization, and the
# same request from rocketmq-client 5.5.0 with ROCKETMQ headers.
CAPTURED_JAVA_4_9_8_JSON = bytes.fromhex(
    "00000084000000807b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a22544257313032227d2c22666c"
    "6167223a302c226c616e6775616765223a224a415641222c226f7061717565223a302c2273657269616c697a65547970654375727265"
    "6e74525043223a224a534f4e222c2276657273696f6e223a3430397d")
CAPTURED_JAVA_4_9_8_ROCKETMQ = bytes.fromhex(
    "0000002a010000260069000199000000010000000000000000000000110005746f70696300000006544257313032")
CAPTURED_JAVA_5_5_0_ROCKETMQ = bytes.fromhex(
    "0000002a010000260069000201000000000000000000000000000000110005746f70696300000006544257313032")


@pytest.mark.parametrize("frame, stype, version, opaque", [
    (CAPTURED_JAVA_4_9_8_JSON, SerializeType.JSON, 409, 0),
    (CAPTURED_JAVA_4_9_8_ROCKETMQ, SerializeType.ROCKETMQ, 409, 1),
    (CAPTURED_JAVA_5_5_0_ROCKETMQ, SerializeType.ROCKETMQ, 513, 0),
])
def test_frames_captured_from_the_java_client(frame, stype, version, opaque):
    cmd = rc.FrameDecoder().feed(frame)[0]
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (RequestCode.GET_ROUTEINFO_BY_TOPIC, LanguageCode.JAVA,
                                                                         version, opaque, 0)
    assert cmd.ext_fields == {"topic": "TBW102"} and cmd.remark is None and cmd.serialize_type == stype
    assert rc.encode(cmd) == frame  # byte for byte, fastjson's field order included


def test_golden_rocketmq_header_decodes():
    cmds = rc.FrameDecoder().feed(GOLDEN_ROCKETMQ)
    assert len(cmds) == 1
    cmd = cmds[0]
    assert (cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag) == (105, LanguageCode.JAVA, 401, 7, 0)
    assert cmd.remark is None and cmd.ext_fields == {"topic": "T"} and cmd.body == b""
    assert cmd.serialize_type == SerializeType.ROCKETMQ
    assert rc.encode(cmd) == GOLDEN_ROCKETMQ


def test_golden_json_header_decodes():
    header = (b'{"code":310,"extFields":{"a":"g","b":"T"},"flag":0,"language":"JAVA","opaque":3,'
              b'"serializeTypeCurrentRPC":"JSON","version":401}')
    frame = struct.pack(">ii", 4 + len(header) + 3, len(header)) + header + b"abc"
    cmd = rc.FrameDecoder().feed(frame)[0]
    assert cmd.code == RequestCode.SEND_MESSAGE_V2 and cmd.opaque == 3 and cmd.version == 401
    assert cmd.ext_fields == {"a": "g", "b": "T"} and cmd.body == b"abc"
    assert rc.encode(cmd) == frame


def test_response_keeps_opaque_and_serialization_and_sets_flag():
    req = rc.decode_frame(GOLDEN_ROCKETMQ[4:])
    resp = req.response(17, "No topic route info", {"x": 1, "ok": True})
    assert resp.is_response and not resp.is_oneway and resp.opaque == 7
    again = rc.decode_frame(rc.encode(resp)[4:])
    assert again.serialize_type == SerializeType.ROCKETMQ and again.remark == "No topic route info"
    assert again.ext_fields == {"x": "1", "ok": "true"}
    j = rc.RemotingCommand.request(34, {"a": 1}, oneway=True)
    header = json.loads(rc.encode(j)[8:])
    assert header["flag"] == 2 and header["language"] == "PYTHON" and header["extFields"] == {"a": "1"}


def test_frame_too_large_is_refused_from_the_length_alone():
    dec = rc.FrameDecoder()
    with pytest.raises(rc.FrameTooLargeError):
        dec.feed(struct.pack(">i", 16 * 1024 * 1024 + 1))


def test_a_command_the_frame_cannot_hold_is_refused_with_a_codec_error():
    # a header of 16 MiB does not fit the mark's 24 bits: without the check its length would run
    # into the serialize type byte and the peer would read a different frame
    big = rc.RemotingCommand(code=0, opaque=1, flag=1, remark="r" * (16 * 1024 * 1024), ext_fields={}, body=b"",
                             language=LanguageCode.JAVA, version=0, serialize_type=SerializeType.JSON)
    with pytest.raises(rc.RemotingCommandError, match="does not fit a frame"):
        rc.encode(big)
    # the ROCKETMQ header holds code and version as Java shorts
    wide = rc.RemotingCommand(code=0, opaque=1, flag=1, remark=None, ext_fields={}, body=b"",
                              language=LanguageCode.JAVA, version=70000, serialize_type=SerializeType.ROCKETMQ)
    with pytest.raises(rc.RemotingCommandError, match="does not fit the ROCKETMQ header"):
        rc.encode(wide)


@pytest.mark.parametrize("frame", [
    struct.pack(">ii", 8, 0x02000004) + b"abcd",             # unknown serialize type
    struct.pack(">ii", 8, 0x00000004) + b"{{{{",             # bad JSON
    struct.pack(">ii", 6, 0x00000002) + b"[]",               # JSON not an object
    struct.pack(">ii", 8, 0x00000100) + b"abcd",             # header longer than frame
    struct.pack(">ii", 10, 0x01000006) + b"\x00" * 6,        # ROCKETMQ header too short
    GOLDEN_ROCKETMQ[:-7] + b"\x00\x00\x00\x09" + GOLDEN_ROCKETMQ[-3:],  # extFields value runs past the header
    struct.pack(">i", 2) + b"ab",                            # length smaller than the mark
])
def test_malformed_frames_raise_codec_errors(frame):
    with pytest.raises(rc.RemotingCommandError) as info:
        rc.FrameDecoder().feed(frame)
    assert str(info.value)


def test_json_header_with_wrong_types_is_an_error():
    for header in (b'{"code":"x"}', b'{"code":1,"extFields":[1]}', b'{"code":1,"language":[]}', b'{"code":1,"remark":5}'):
        with pytest.raises(rc.RemotingCommandError):
            rc.decode_frame(struct.pack(">i", len(header)) + header)


_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(code=st.integers(-32768, 32767), opaque=st.integers(-(2 ** 31), 2 ** 31 - 1), flag=st.integers(0, 3),
       version=st.integers(0, 32767), remark=st.one_of(st.none(), _text.filter(bool)),
       ext=st.dictionaries(_text.filter(bool), _text, max_size=6), body=st.binary(max_size=64),
       stype=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))
def test_round_trip(code, opaque, flag, version, remark, ext, body, stype):
    if stype == SerializeType.ROCKETMQ:
        ext = {k: v for k, v in ext.items() if v}  # a zero-length string is null in the binary form
    cmd = rc.RemotingCommand(code=code, opaque=opaque, flag=flag, remark=remark, ext_fields=ext, body=body,
                             language=LanguageCode.PYTHON, version=version, serialize_type=stype)
    data = rc.encode(cmd)
    dec = rc.FrameDecoder()
    out = []
    for i in range(0, len(data), 7):  # arbitrary split points
        out += dec.feed(data[i:i + 7])
    assert out == [cmd] and dec.pending == 0


@given(st.dictionaries(st.text(alphabet="abcXYZ_09", min_size=1, max_size=8), st.text(alphabet="abc 123-_", max_size=8), max_size=5),
       st.binary(max_size=50), st.integers(0, 100))
def test_batch_body_round_trip(props, body, flag):
    data = encode_batch_item(body, props, flag) * 2
    items = decode_batch_body(data)
    assert [(i.body, i.properties, i.flag) for i in items] == [(body, props, flag)] * 2
    assert string_to_properties(properties_to_string(props)) == props


def test_tags_hash_is_javas_string_hashcode():
    assert tags_hash("TagA") == 2598919
    assert tags_hash("hello") == 99162322
    assert tags_hash("a much longer tag that overflows") < 0 or tags_hash("a much longer tag that overflows") < 2 ** 31
    assert tags_hash("") == 0


@given(code=st.integers(-32768, 32767), opaque=st.integers(-(2 ** 31), 2 ** 31 - 1),
       language=st.integers(-1, 20), remark=st.one_of(st.none(), st.text(max_size=12)),
       ext=st.dictionaries(st.text(max_size=8), st.text(max_size=12), max_size=5))
def test_json_header_is_what_json_dumps_renders(code, opaque, language, remark, ext):
    """The formatted JSON header is byte for byte the ``json.dumps`` rendering (control
    characters, quotes, backslashes, non-ASCII and lone surrogates included), and parses back."""
    cmd = rc.RemotingCommand(code=code, opaque=opaque, flag=1, remark=remark, ext_fields=ext, language=language)
    try:
        lang = LanguageCode(language).name
    except ValueError:
        lang = "OTHER"
    obj = {"code": code, "extFields": ext, "flag": 1, "language": lang, "opaque": opaque,
           "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    if remark is not None:
        obj["remark"] = remark
    expected = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "replace")
    assert rc.encode_header_json(cmd) == expected
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in "".join([*ext, *ext.values(), remark or ""])):
        back = rc.decode_header_json(expected)
        assert (back.ext_fields, back.remark, back.opaque) == (ext, remark, opaque)


def test_json_escapes_are_accepted_and_lone_surrogates_refused():
    # a Java client escapes the property separators in every send header
    header = b'{"code":310,"extFields":{"i":"UNIQ_KEY\\u0001AB\\u0002TAGS\\u0001\\uD83D\\uDE00\\u0002"}}'
    assert rc.decode_header_json(header).ext_fields["i"] == "UNIQ_KEY\x01AB\x02TAGS\x01\U0001F600\x02"
    for lone in (b'{"code":1,"remark":"a\\uDBFFb"}', b'{"code":1,"extFields":{"k":"\\udc00"}}'):
        with pytest.raises(rc.RemotingCommandError, match="surrogate"):
            rc.decode_header_json(lone)
