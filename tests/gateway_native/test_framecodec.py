"""The compiled remoting codec (gateway_native/remoting/_framecodec.c) against the Python codec:
on real, hand-written, random and damaged frames it either gives what the Python codec gives,
field for field, or defers to it (None) -- and never crashes, leaks or reads past a buffer."""

from __future__ import annotations

import itertools
import json
import re
import struct
import tracemalloc
from enum import IntEnum

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gateway_native.remoting import command as rc
from gateway_native.remoting.codes import LanguageCode, RequestCode, ResponseCode, SerializeType

fc = rc._framecodec
pytestmark = pytest.mark.skipif(fc is None, reason="gateway_native.remoting._framecodec was not built")

# SEND_MESSAGE_V2 as the Java client renders it (fastjson: keys sorted, the property separators escaped)
JAVA_SEND_HEADER = (
    b'{"code":310,"extFields":{"a":"g","b":"T","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0",'
    b'"i":"KEYS\\u0001k\\u0002WAIT\\u0001true\\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA",'
    b'"opaque":5,"serializeTypeCurrentRPC":"JSON","version":475}')
HAND_WRITTEN = [
    JAVA_SEND_HEADER,
    b'{"code":105,"extFields":{"topic":"TBW102"},"flag":0,"language":"JAVA","opaque":0,'
    b'"serializeTypeCurrentRPC":"JSON","version":409}',
    b'{"code":0,"extFields":{"msgId":"7F00000100002A9F0000000000000000","queueId":"0","queueOffset":"12"},'
    b'"flag":1,"language":"JAVA","opaque":5,"remark":null,"serializeTypeCurrentRPC":"JSON","version":475}',
    b'{"code":17,"flag":1,"language":"JAVA","opaque":-2147483648,"remark":"No topic route info in name server '
    b'for the topic: T\\nSee http:\\/\\/rocketmq.apache.org\\/docs\\/bestPractice\\/#FAQ","version":-1}',
    b'{"code":34,"language":"CPP","opaque":2147483647,"version":0,"flag":2}',
    b'{"code":34,"language":"GO","extFields":null}',
    b'{"code":34,"language":"SWIFT"}',  # a name RocketMQ does not know: OTHER
    b'{"code":34,"language":12,"remark":""}',
    b'{"code":-0,"language":-5}',
    b'{}',
    b' \r\n\t{ "code" : 11 , "extFields" : { "k" : "v" , "k2" : "" } , "opaque" : 3 } \n',
    b'{"extFields":{},"serializeTypeCurrentRPC":"ROCKETMQ"}',
    b'{"code":310,"extFields":{"i":"UNIQ_KEY\\u0001AB\\u0002TAGS\\u0001\\uD83D\\uDE00\\u0002",'
    b'"u":"\\u00e9\\u4e2d\\u0000"}}',
    b'{"code":310,"extFields":{"q":"a\\"b\\\\c\\/d\\b\\f\\n\\r\\t","raw":"\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80\x7f"}}',
    b'{"code":310,"extFields":{"dup":"1","x":"2","dup":"3"}}',  # extFields keeps the last value, first place
    b'{"code":310,"extFields":{"\\u006b":"\\u0076"}}',
    b'{"code":1,"remark":"' + "é".encode() * 300 + b'\\n"}',  # an escaped string past the stack buffer
]
# what the compiled decoder leaves to Python: it must answer None, and decode_frame Python's answer
DEFERRED = [
    b'', b'[]', b'"x"', b'null', b'{', b'{"code":1', b'{"code":1,}', b'{"code":1}x', b'{"code":1}}', b'{,}',
    b'\xef\xbb\xbf{"code":1}',  # a UTF-8 byte-order mark
    b'{"code":1,"code":2}', b'{"unknown":1}', b'{"Code":1}', b'{"c\\u006fde":1}', b'{"code":1.0}', b'{"code":1e3}',
    b'{"code":01}', b'{"code":-}', b'{"code":2147483648}', b'{"code":-2147483649}', b'{"code":99999999999999999999}',
    b'{"code":true}', b'{"code":null}', b'{"code":"1"}', b'{"code":NaN}', b'{"code":-Infinity}',
    b'{"language":null}', b'{"language":true}', b'{"language":2147483648}', b'{"language":[]}',
    b'{"remark":5}', b'{"remark":nul}', b'{"extFields":[]}', b'{"extFields":0}', b'{"extFields":""}',
    b'{"extFields":{"a":1}}', b'{"extFields":{"a":null}}', b'{"extFields":{"a":true}}', b'{"extFields":{"a":{}}}',
    b'{"extFields":{1:"a"}}', b'{"extFields":{"a" "b"}}', b'{"extFields":{"a":"b",}}', b'{"extFields":{"a":"b"]}',
    b'{"extFields":{"a":}', b'{"extFields":{"a":,"b":"c"}}', b'{"extFields":{"a":"b"}',
    b'{"serializeTypeCurrentRPC":0}', b'{"serializeTypeCurrentRPC":null}',
    b'{"remark":"a\\ud800"}', b'{"remark":"a\\udc00b"}', b'{"remark":"\\ud800\\u0041"}', b'{"remark":"\\ud800\\ue000"}',
    b'{"remark":"\\ud800\\ud800"}',
    b'{"serializeTypeCurrentRPC":"\\uDFFF"}', b'{"extFields":{"\\ud83d":"x"}}',
    b'{"remark":"\\x"}', b'{"remark":"\\u12"}', b'{"remark":"\\u12G4"}', b'{"remark":"\\U0041"}', b'{"remark":"\\',
    b'{"remark":"a\x00b"}', b'{"remark":"a\nb"}', b'{"remark":"a\x1fb"}',
    b'{"remark":"\xff"}', b'{"remark":"\xc3"}', b'{"remark":"\xed\xa0\x80"}', b'{"remark":"\xc0\x80"}',
    b'{"remark":"\xf4\x90\x80\x80"}', b'{"remark":"ok"}\xff', b'{"remark":"\xe9\\u0041"}',
    b'{"extFields":' + b'[' * 100_000 + b']' * 100_000 + b'}',
    b'{"extFields":{"a":' + b'{"a":' * 50_000 + b'}' * 50_001,
    b'{"code":1' + b'0' * 5000 + b'}',
]


def _fields(cmd: rc.RemotingCommand) -> tuple:
    """Every field with its type (a language name decodes to the LanguageCode member, an ordinal
    stays an int), extFields in their order."""
    assert type(cmd) is rc.RemotingCommand
    values = [getattr(cmd, name) for name in rc._SLOTS]
    values[4] = list(cmd.ext_fields.items())
    return tuple((v, type(v)) for v in values)


def _outcome(fn, arg) -> tuple:
    try:
        return "ok", _fields(fn(arg))
    except Exception as exc:  # noqa: BLE001 - the error itself is what is compared
        return "error", type(exc), str(exc)


def _json_frame(header: bytes, body: bytes = b"") -> bytes:
    """A frame without its length prefix, as decode_frame takes it."""
    return struct.pack(">i", len(header)) + header + body


def _check(frame: bytes | bytearray, handled: bool | None = None) -> None:
    """The compiled decoder gives Python's command or None; with fallback, always Python's outcome."""
    expected = _outcome(rc.decode_frame_py, frame)
    fast = fc.try_decode_frame(frame)
    if handled is not None:
        assert (fast is not None) == handled, (frame[:200], expected)
    if fast is not None:
        assert ("ok", _fields(fast)) == expected
    assert _outcome(rc.decode_frame, frame) == expected


def test_the_compiled_codec_is_bound_and_fills_the_commands_slots():
    assert rc.decode_frame is fc.decode_frame and rc.encode is fc.encode
    assert rc._setup_compiled(), "RemotingCommand changed: the compiled decoder calls it instead of filling its slots"


def _corpus() -> list[rc.RemotingCommand]:
    """Commands as the broker, the NameServer and the clients exchange them."""
    texts = ["", "T", "TopicTest", "中文-topic", "emoji 😀", 'quote " back \\ slash /', "ctl \x00\x01\x02\x1f\x7f",
             "tab\tnl\nret\r", "é" * 200, "x" * 5000, "KEYS\x01k\x02WAIT\x01true\x02"]
    cmds = []
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ):
        for i, code in enumerate([*RequestCode][::7] + [*ResponseCode][::5] + [0, -1, 32767, -32768, 2**31 - 1]):
            if stype == SerializeType.ROCKETMQ and not -32768 <= code <= 32767:
                continue  # the binary form has 2 bytes for it
            t = texts[i % len(texts)]
            ext = {"topic": t, "queueId": str(i), "k" + t: t[::-1]}
            if stype == SerializeType.ROCKETMQ:
                ext = {k: v for k, v in ext.items() if v}  # a zero-length value is null in the binary form
            remark = None if i % 3 else t or None
            cmds.append(rc.RemotingCommand(code, opaque=(i * 7919) % 2**31 - (i % 2) * 2**31, flag=i % 4, remark=remark,
                                           ext_fields=ext if i % 5 else {}, body=bytes(range(i % 256)) * (i % 3),
                                           language=[*LanguageCode][i % len(LanguageCode)], version=(i * 31) % 32768,
                                           serialize_type=stype))
        req = rc.RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, {"a": "g", "b": "T", "e": 0, "k": False},
                                         b"x" * 1024, serialize_type=stype)
        cmds += [req, req.response(ResponseCode.SUCCESS, None, {"msgId": "7F00000100002A9F", "queueOffset": 12}),
                 req.response(ResponseCode.TOPIC_NOT_EXIST, "topic T not exist"), req.response_with(0, None, {})]
    return cmds


def test_real_frames_decode_the_same():
    for cmd in _corpus():
        frame = rc.encode_py(cmd)
        assert rc.encode(cmd) == frame
        for f in (frame[4:], bytearray(frame[4:])):
            _check(f, handled=True)
        assert fc.try_decode_frame(frame[4:]) == cmd
    _check(memoryview(rc.encode_py(_corpus()[0]))[4:], handled=False)  # a view: left to Python


def test_calling_the_class_builds_the_same_commands():
    """The compiled decoder's other way of building a command (a RemotingCommand whose __init__
    does more than assign its fields)."""
    rc._setup_compiled(fill_slots=False)
    try:
        for frame in _CORPUS_FRAMES:
            _check(frame, handled=True)
    finally:
        assert rc._setup_compiled()


@pytest.mark.parametrize("header", HAND_WRITTEN)
def test_java_like_headers_decode_the_same(header):
    for body in (b"", bytes(range(256)) * 4):
        _check(_json_frame(header, body), handled=True)


@pytest.mark.parametrize("header", DEFERRED)
def test_unusual_headers_are_left_to_python(header):
    _check(_json_frame(header), handled=False)


_FIXED = struct.pack(">hbhii", 105, 0, 401, 7, 0)  # code, language, version, opaque, flag


def _rocketmq(remark: bytes, pairs: list[tuple[bytes, bytes]], fixed: bytes = _FIXED,
              ext_len: int | None = None) -> bytes:
    """A ROCKETMQ binary header."""
    ext = b"".join(struct.pack(">H", len(k)) + k + struct.pack(">i", len(v)) + v for k, v in pairs)
    ext_len = len(ext) if ext_len is None else ext_len
    return fixed + struct.pack(">i", len(remark)) + remark + struct.pack(">i", ext_len) + ext


def _rocketmq_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">i", 0x01000000 | len(header)) + header + body


@pytest.mark.parametrize("header, handled", [
    (_rocketmq(b"", [(b"topic", b"T")]), True),
    (_rocketmq(b"hi \xff", [(b"", b""), (b"\xff\xfe", b"\xed\xa0"), (b"k\0", "中".encode())]), True),  # "replace"
    (_rocketmq(b"", [], struct.pack(">hbhii", -1, -1, -1, -1, -1)), True),  # language byte 255
    (_rocketmq(b"", [(b"k", b"a"), (b"j", b"x" * 70_000), (b"k", b"b")]), True),
    (_FIXED + b"\0\0\0\0\0\0\0", False),  # too short
    (_FIXED + b"\xff\xff\xff\xff" + b"\0\0\0\0", False),  # negative remark length
    (_FIXED + b"\x7f\xff\xff\xff" + b"\0\0\0\0", False),
    (_FIXED + b"\0\0\0\x09" + b"\0\0\0\0", False),  # remark past the header
    (_rocketmq(b"", [], ext_len=1), False),  # extFields length not the rest of the header
    (_rocketmq(b"", [], ext_len=-1), False),
    (_FIXED + b"\0\0\0\0" + b"\0\0\0\x01" + b"\0", False),  # a key length cut
    (_FIXED + b"\0\0\0\0" + b"\0\0\0\x05" + b"\0\x01k\0\0", False),  # a value length cut
    (_FIXED + b"\0\0\0\0" + b"\0\0\0\x07" + b"\0\x01k\xff\xff\xff\xff", False),  # negative value length
    (_FIXED + b"\0\0\0\0" + b"\0\0\0\x08" + b"\0\x01k\0\0\0\x02a", False),  # value past the header
])
def test_rocketmq_headers(header, handled):
    _check(_rocketmq_frame(header, b"body"), handled)


@pytest.mark.parametrize("frame", [b"", b"\0\0\0", b"\0\0\0\x05{}", b"\x02\0\0\x02{}", b"\xff\0\0\0",
                                   b"\x01\xff\xff\xff" + b"\0" * 30])
def test_bad_marks_are_left_to_python(frame):
    _check(frame, handled=False)


# -- random and damaged frames ---------------------------------------------------------------------

_text = st.text(max_size=12)
_any_text = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates included
_KEYS = ["code", "language", "version", "opaque", "flag", "remark", "extFields", "serializeTypeCurrentRPC"]
_json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**31 - 2, 2**31 + 1), st.integers(), _any_text,
              st.floats(allow_nan=True, allow_infinity=True)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_any_text, inner, max_size=3)), max_leaves=6)


@st.composite
def json_headers(draw) -> bytes:
    """Headers of the known keys with well-typed values, rendered with escapes or raw UTF-8; or,
    half the time, with lone surrogates (invalid UTF-8 when raw), repeated or unknown keys and
    values of any type, now and then."""
    clean = draw(st.booleans())
    if clean:
        keys = draw(st.lists(st.sampled_from(_KEYS), unique=True))
    else:
        keys = draw(st.lists(st.sampled_from(_KEYS + ["other", ""]), max_size=9))
    text = _text if clean else _any_text
    pairs = []
    for key in keys:
        if not clean and draw(st.integers(0, 9)) == 0:
            value = draw(_json_value)
        elif key in ("code", "version", "opaque", "flag"):
            value = draw(st.integers(-2**31, 2**31 - 1))
        elif key == "language":
            value = draw(st.one_of(st.sampled_from([*LanguageCode.__members__, "KOTLIN"]), st.integers(-3, 300)))
        elif key == "extFields":
            value = draw(st.dictionaries(text, text, max_size=5))
        elif key == "remark":
            value = draw(st.one_of(st.none(), text))
        else:
            value = draw(text)
        pairs.append((key, value))
    ascii_only = draw(st.booleans())
    ws = draw(st.sampled_from(["", " ", "\n\t "]))

    def render(v) -> str:
        if isinstance(v, dict):
            return "{" + ws + ("," + ws).join(f"{render(k)}{ws}:{ws}{render(x)}" for k, x in v.items()) + "}"
        return json.dumps(v, ensure_ascii=ascii_only)

    text = ws + "{" + ws + ("," + ws).join(f'{render(k)}:{ws}{render(v)}' for k, v in pairs) + ws + "}"
    return text.encode("utf-8", "surrogatepass")


def _frames_of(commands: list[rc.RemotingCommand]) -> list[bytes]:
    return [rc.encode_py(c)[4:] for c in commands]


_CORPUS_FRAMES = _frames_of(_corpus()) + [_json_frame(h, b"body") for h in HAND_WRITTEN]


@st.composite
def damaged_frames(draw) -> bytes:
    """A real frame with bytes changed, inserted or cut (the mark's length included)."""
    frame = bytearray(draw(st.sampled_from(_CORPUS_FRAMES)))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.integers(0, 3))
        pos = draw(st.integers(0, len(frame)))
        if op == 0 and pos < len(frame):
            frame[pos] = draw(st.sampled_from([0, 0x7F, 0x80, 0xFF, *b'"\\{}[],:0-u \n', draw(st.integers(0, 255))]))
        elif op == 1:
            frame[pos:pos] = draw(st.binary(min_size=1, max_size=4))
        elif op == 2:
            del frame[pos:pos + draw(st.integers(1, 8))]
        else:
            del frame[pos:]
    return bytes(frame)


@st.composite
def faulty_json_headers(draw) -> bytes:
    """Small headers with each token now and then left out, doubled or replaced: the structure
    errors (a value missing, a brace too few, a stray comma) that byte damage seldom makes."""
    def tok(t: bytes) -> bytes:
        fault = draw(st.integers(0, 29))
        if fault < 3:
            return [b"", t + t, draw(st.sampled_from([b"{", b"}", b"[", b":", b",", b'"', b"1", b"null"]))][fault]
        return t

    def obj(pairs: list[tuple[bytes, bytes]]) -> bytes:
        return tok(b"{") + tok(b",").join(tok(k) + tok(b":") + v for k, v in pairs) + tok(b"}")

    def value(key: str) -> bytes:
        if key == "extFields":
            return obj([(json.dumps(k).encode(), tok(json.dumps(v).encode()))
                        for k, v in draw(st.dictionaries(st.sampled_from("abc"), _text, max_size=3)).items()])
        if key in ("remark", "serializeTypeCurrentRPC"):
            return tok(json.dumps(draw(_text)).encode())
        if key == "language":
            return tok(draw(st.sampled_from([b'"JAVA"', b'"GO"', b"3"])))
        return tok(str(draw(st.integers(-2**31, 2**31 - 1))).encode())

    keys = draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=4))
    return obj([(json.dumps(k).encode(), value(k)) for k in keys])


_fuzz = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_fuzz
@given(header=json_headers(), body=st.binary(max_size=8))
def test_random_json_headers(header, body):
    _check(_json_frame(header, body))


@_fuzz
@given(frame=damaged_frames())
def test_damaged_frames(frame):
    _check(frame)
    _check(bytearray(frame))


@_fuzz
@given(header=faulty_json_headers())
def test_faulty_json_headers(header):
    _check(_json_frame(header))


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[{}:,]|[^{}:,"]+')


_SMALL_HEADERS = [b'{"code":1,"extFields":{"a":"b","c":"d"}}', b'{"extFields":{"a":"b"},"remark":"r\\u00e9"}',
                  b'{"language":"JAVA","remark":null,"opaque":-1}', b'{"extFields":{}}',
                  b'{"serializeTypeCurrentRPC":"JSON","extFields":null,"language":3}']


@pytest.mark.parametrize("header", _SMALL_HEADERS)
def test_every_few_token_fault(header):
    """Each pair of tokens of a small header left out or doubled, each three left out: every
    structure error that close to a valid header."""
    tokens = _TOKEN.findall(header)
    assert b"".join(tokens) == header
    for i, j in itertools.combinations_with_replacement(range(len(tokens)), 2):
        for twice_i, twice_j in itertools.product((0, 2), repeat=2):
            faulty = [t * (twice_i if k == i else twice_j if k == j else 1) for k, t in enumerate(tokens)]
            _check(_json_frame(b"".join(faulty)))
    for left_out in itertools.combinations(range(len(tokens)), 3):
        _check(_json_frame(b"".join(t for k, t in enumerate(tokens) if k not in left_out)))


@pytest.mark.parametrize("header", _SMALL_HEADERS)
def test_every_one_byte_fault(header):
    """Each byte of a small header replaced, preceded by or replaced with a byte that matters to
    the parser, or left out."""
    for i in range(len(header) + 1):
        _check(_json_frame(header[:i] + header[i + 1:]))
        for b in (b"\0", b"\x1f", b'"', b"\\", b"{", b"}", b"[", b",", b":", b" ", b"0", b"-", b"u", b"\x80", b"\xff"):
            _check(_json_frame(header[:i] + b + header[i:]))
            _check(_json_frame(header[:i] + b + header[i + 1:]))


@_fuzz
@given(frame=st.one_of(st.binary(max_size=64),
                       st.builds(lambda t, h, b: bytes([t]) + len(h).to_bytes(3, "big") + h + b,
                                 st.sampled_from([0, 1]), st.binary(max_size=48), st.binary(max_size=4))))
def test_random_bytes(frame):
    _check(frame)


def test_common_headers_are_handled():
    """Headers the compiled decoder is meant for do not fall back (the fuzzing above would pass
    with a decoder that always defers)."""
    cmd = rc.RemotingCommand(310, 9, 0, "r\u00e9\U0001F600", {"k\x01": "v\x02\"\\", "topic": "T"}, b"b",
                             LanguageCode.JAVA, 475)
    header = json.dumps({"code": 310, "extFields": cmd.ext_fields, "flag": 0, "language": "JAVA", "opaque": 9,
                         "remark": cmd.remark, "serializeTypeCurrentRPC": "JSON", "version": 475})
    for ascii_only in (True, False):
        header = json.dumps(json.loads(header), ensure_ascii=ascii_only).encode()
        assert fc.try_decode_frame(_json_frame(header, b"b")) == cmd


# -- encoding ----------------------------------------------------------------------------------------

class _Str(str):
    pass


class _Sub(rc.RemotingCommand):
    """Not RemotingCommand itself: its fields are read as attributes, not from the slots (here
    one is computed)."""
    __slots__ = ()

    @property  # type: ignore[override]
    def version(self) -> int:
        return 7

    @version.setter
    def version(self, value: int) -> None:
        pass


_ints = st.one_of(st.integers(-2**31, 2**31 - 1), st.integers(), st.sampled_from([True, 1.0, None, "1"]),
                  st.sampled_from([*RequestCode][:5]))


@_fuzz
@given(code=_ints, opaque=_ints, flag=_ints, version=_ints,
       remark=st.one_of(st.none(), _any_text, _any_text.map(_Str), st.just(1)),
       ext=st.one_of(st.dictionaries(_any_text, _any_text, max_size=5),
                     st.dictionaries(st.one_of(_any_text, st.integers()),
                                     st.one_of(_any_text, st.integers(), _any_text.map(_Str)), max_size=3)),
       body=st.one_of(st.none(), st.binary(max_size=16), st.binary(max_size=4).map(bytearray)),
       language=st.one_of(st.sampled_from([*LanguageCode]), st.integers(-3, 300), st.just([])),
       stype=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ, 0, 5]),
       cls=st.sampled_from([rc.RemotingCommand, _Sub]))
def test_encoding_is_byte_identical(code, opaque, flag, version, remark, ext, body, language, stype, cls):
    cmd = cls(code, opaque, flag, remark, ext, body, language, version, stype)
    try:
        expected: object = rc.encode_py(cmd)
    except Exception as exc:  # noqa: BLE001
        expected = (type(exc), str(exc))
    fast = fc.try_encode(cmd)
    assert fast is None or fast == expected
    try:
        assert rc.encode(cmd) == expected
    except Exception as exc:  # noqa: BLE001
        assert (type(exc), str(exc)) == expected

    def plain_int(v, enum_ok: bool = False) -> bool:
        return (type(v) is int or enum_ok and isinstance(v, IntEnum)) and -2**63 <= v < 2**63

    version = cmd.version  # _Sub's is its own
    common = (stype is SerializeType.JSON and plain_int(code, True) and all(map(plain_int, (opaque, flag, version)))
              and (remark is None or type(remark) is str) and all(type(x) is str for kv in ext.items() for x in kv)
              and (body is None or type(body) is bytes) and not isinstance(language, list))
    assert (fast is not None) == common


def test_encoding_json_escapes_like_json_dumps():
    every_bmp = "".join(map(chr, range(0, 0xD800, 7))) + "".join(map(chr, range(0xD800, 0x10000, 13)))
    cmd = rc.RemotingCommand(1, remark=every_bmp + "\U0010FFFF\U0001F600", ext_fields={every_bmp: every_bmp[::-1]})
    assert fc.try_encode(cmd) == rc.encode_py(cmd)


def test_a_header_beyond_the_marks_length_field_is_left_to_python():
    cmd = rc.RemotingCommand(1, remark="x" * (1 << 24))  # more than the mark's 24 bits can say
    assert fc.try_encode(cmd) is None
    for encode in (rc.encode, rc.encode_py):  # both answer with Python's refusal
        with pytest.raises(rc.RemotingCommandError, match="does not fit a frame"):
            encode(cmd)


def test_subclasses_and_other_objects_encode_by_their_attributes():
    cmd = _Sub(1, 2, 3, "r", {"k": "v"}, b"b", version=475)
    assert fc.try_encode(cmd) == rc.encode_py(cmd) == rc.encode_py(rc.RemotingCommand(1, 2, 3, "r", {"k": "v"}, b"b",
                                                                                     version=7))

    class Weird:
        serialize_type = SerializeType.JSON

    with pytest.raises(AttributeError):
        rc.encode(Weird())  # type: ignore[arg-type]
    assert fc.try_encode(Weird()) is None


@pytest.mark.parametrize("name", rc._SLOTS)
def test_a_deleted_field_is_left_to_python(name):
    cmd = rc.RemotingCommand(1, remark="r")
    delattr(cmd, name)
    assert fc.try_encode(cmd) is None
    with pytest.raises(AttributeError, match=name):
        rc.encode(cmd)


# -- memory ------------------------------------------------------------------------------------------

_ENCODED = [rc.RemotingCommand(1, 2, 3, "r", {"k": "v", "k2": "é"}, b"body"),  # handled, and deferred at each check
            rc.RemotingCommand(1, 2, 3, "r", {"k": "v", "n": 1}), rc.RemotingCommand(1, 2, True),
            rc.RemotingCommand(1, remark=b"x"), rc.RemotingCommand(1, language=[])]


@pytest.mark.parametrize("frame", [_json_frame(JAVA_SEND_HEADER, b"x" * 1024), _json_frame(HAND_WRITTEN[-1]),
                                   _json_frame(b'{"extFields":{"a":"b","c":1}}'), _json_frame(b'{"remark":"\\ud800"}'),
                                   _json_frame(b'{"code":1,"language":"JAVA","remark":"x","extFields":{}} x'),
                                   _json_frame(b'{"language":"JAVA","language":"GO"}'), rc.encode_py(_ENCODED[0])[4:],
                                   _rocketmq_frame(_rocketmq(b"r", [(b"k", b"v")]), b"body"),
                                   _rocketmq_frame(_rocketmq(b"r", [(b"k", b"v")], ext_len=5))])
def test_no_references_are_leaked(frame):
    def once() -> None:
        fc.try_decode_frame(frame)
        for cmd in _ENCODED:
            fc.try_encode(cmd)

    for _ in range(200):  # warm up caches and free lists
        once()
    tracemalloc.start()
    try:
        for _ in range(5000):
            once()
        # what the calls made here allocated and still hold: an object leaked per call holds
        # 5000 x 16 bytes or more (a process-wide total also counts the worker's other threads)
        held = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, __file__)])
    finally:
        tracemalloc.stop()
    size = sum(stat.size for stat in held.statistics("filename"))
    assert size < 20_000, held.statistics("lineno")[:5]
