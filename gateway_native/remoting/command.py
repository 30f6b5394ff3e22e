"""RemotingCommand and its frame codec (sans-IO: bytes in, commands out, no sockets).

Frame layout (all big-endian)::

    length(4)                      bytes that follow: 4 + header length + body length
    serializeType(1)|headerLen(3)  high byte 0 = JSON header, 1 = ROCKETMQ binary header
    header(headerLen)
    body(length - 4 - headerLen)

ROCKETMQ binary header: code(2) + language(1) + version(2) + opaque(4) + flag(4) +
remarkLen(4) + remark + extFieldsLen(4) + { keyLen(2) + key + valueLen(4) + value }*.
A zero-length string decodes as null, as ``RocketMQSerializable`` has it.

JSON header: fastjson's rendering of ``RemotingCommand`` — ``code``, ``language`` (the enum name;
an ordinal is accepted too), ``version``, ``opaque``, ``flag``, ``remark``, ``extFields``
(string -> string) and ``serializeTypeCurrentRPC``.

Invariants: a frame whose declared length exceeds ``MAX_FRAME_SIZE`` is refused from its four
length bytes alone, before its body is buffered; every decoding problem raises
``RemotingCommandError`` (the server closes only that connection) -- JSON Python cannot hold
included (nested deeper than the recursion limit, integers over 4300 digits, lone UTF-16
surrogates from ``\\u`` escapes; ``loads_json`` is the one parser for headers and bodies);
``encode(decode(x))`` round-trips every field; encoding never raises on a string (a lone
surrogate becomes '?': UTF-8 with "replace"). Flag bit 0 marks a response, bit 1 a oneway request.

Compiled path: ``decode_frame`` and ``encode`` are those of ``_framecodec.c`` when the extension
was built (setup.py; optional). It decodes ROCKETMQ headers and the JSON headers clients send (one
flat object of the fields above, ints in the Java int range, extFields of strings; escapes
included) and encodes JSON-header commands whose fields have their usual types; everything else
-- malformed frames, duplicate or unknown keys, lone surrogate escapes, other value types -- it
defers to ``decode_frame_py`` and ``encode_py`` here, which keep the semantics and error messages.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import json.scanner
import re
import struct
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable, Mapping

from .codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType, SERVER_VERSION

MAX_FRAME_SIZE = 16 * 1024 * 1024  # Netty's frame limit in RocketMQ (16 MiB)

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag = 13 bytes
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")
_opaque_counter = itertools.count(1)


# A \u escape of a UTF-16 surrogate (D800-DFFF). Java clients escape the property separators
# (\u0001, \u0002) in every send header, so loads_json re-checks the parsed text only on this.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]").search


_scan_once = json.scanner.make_scanner(json.JSONDecoder())  # what json.loads runs (the C scanner)


class RemotingCommandError(ValueError):
    """A frame that cannot be decoded; the message says which part is wrong."""


def loads_json(data: bytes | bytearray | memoryview | str, what: str = "JSON") -> Any:
    """Parse JSON from a peer; ``RemotingCommandError`` (a ValueError) for anything Python's
    parser rejects or cannot hold, so callers catching ValueError answer instead of crashing."""
    try:
        text = data if isinstance(data, str) else bytes(data).decode("utf-8")
        try:  # json.loads without its two Python frames; anything but one bare value goes through it
            obj, end = _scan_once(text, 0)
        except StopIteration:
            end = -1
        if end != len(text):
            obj = json.loads(text)
    except UnicodeDecodeError as exc:
        raise RemotingCommandError(f"{what} is not valid UTF-8: {exc.reason} at byte {exc.start}") from None
    except RecursionError:
        raise RemotingCommandError(f"{what} is nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise RemotingCommandError(f"{what} is not valid JSON: {str(exc)[:200]}") from None
    # only a \uD800-\uDFFF escape can produce a lone surrogate (UTF-8 cannot hold one)
    if "\\u" in text and _SURROGATE_ESCAPE(text):
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise RemotingCommandError(f"{what} holds a lone UTF-16 surrogate (\\ud800-\\udfff escape)") from None
        except RecursionError:
            raise RemotingCommandError(f"{what} is nested too deeply") from None
    return obj


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "replace")


class FrameTooLargeError(RemotingCommandError):
    pass


def next_opaque() -> int:
    return next(_opaque_counter) & 0x7FFFFFFF


def _ext_value(value: Any) -> str:
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


# the enum members the hot paths use, looked up once (an Enum attribute costs a descriptor call)
_JSON = SerializeType.JSON
_ROCKETMQ = SerializeType.ROCKETMQ
_JAVA = LanguageCode.JAVA


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: int = LanguageCode.JAVA
    version: int = SERVER_VERSION
    serialize_type: int = SerializeType.JSON

    # -- construction helpers ------------------------------------------------------------
    @classmethod
    def request(cls, code: int, fields: Mapping[str, Any] | None = None, body: bytes = b"", *,
                oneway: bool = False, language: int = LanguageCode.PYTHON, version: int = SERVER_VERSION,
                serialize_type: int = SerializeType.JSON) -> "RemotingCommand":
        ext = {k: v if type(v) is str else _ext_value(v) for k, v in (fields or {}).items() if v is not None}
        return cls(code=int(code), opaque=next_opaque(), flag=FLAG_ONEWAY if oneway else 0, ext_fields=ext,
                   body=body, language=language, version=version, serialize_type=serialize_type)

    def response(self, code: int, remark: str | None = None, fields: Mapping[str, Any] | None = None,
                 body: bytes = b"", serialize_type: int | None = None) -> "RemotingCommand":
        """A reply to this request: same opaque, response flag set, in the request's serialization."""
        ext = {k: v if type(v) is str else _ext_value(v) for k, v in (fields or {}).items() if v is not None}
        return RemotingCommand(int(code), self.opaque, FLAG_RESPONSE, remark, ext, body, _JAVA, SERVER_VERSION,
                               self.serialize_type if serialize_type is None else serialize_type)

    def response_with(self, code: int, remark: str | None, ext_fields: dict[str, str]) -> "RemotingCommand":
        """``response`` for a caller whose ``ext_fields`` values are all ``str`` already (taken
        as is, not copied): the answer to every send is built with it."""
        return RemotingCommand(int(code), self.opaque, FLAG_RESPONSE, remark, ext_fields, b"", _JAVA, SERVER_VERSION,
                               self.serialize_type)

    @property
    def is_response(self) -> bool:
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & FLAG_ONEWAY)

    # -- typed access to extFields (header fields) ---------------------------------------
    def get_str(self, name: str, default: str | None = None) -> str | None:
        value = self.ext_fields.get(name, default)
        if value is not None and name in NAME_FIELDS:
            _check_name(name, value)
        return value

    def require_str(self, name: str) -> str:
        value = self.ext_fields.get(name)
        if value is None or value == "":
            raise HeaderFieldError(f"the request header field '{name}' is null")
        if name in NAME_FIELDS:
            _check_name(name, value)
        return value

    def get_int(self, name: str, default: int | None = None) -> int | None:
        raw = self.ext_fields.get(name)
        if raw is None or raw == "":
            return default
        if raw.isdigit() and raw.isascii() and (len(raw) < 10 or len(raw) < 19 and name not in INT32_FIELDS):
            return int(raw)  # the usual field: digits only, in range of its Java int or long
        if len(raw) > 24:  # no Java long has more characters; int() of a huge string is slow
            raise HeaderFieldError(f"the request header field '{name}' is not a number: {raw[:40]!r}...")
        try:
            value = int(raw)
        except ValueError:
            raise HeaderFieldError(f"the request header field '{name}' is not a number: {raw!r}") from None
        lo, hi = (_INT_MIN, _INT_MAX) if name in INT32_FIELDS else (_LONG_MIN, _LONG_MAX)
        if not lo <= value <= hi:
            kind = "int" if name in INT32_FIELDS else "long"
            raise HeaderFieldError(f"the request header field '{name}' is out of the Java {kind} range: {raw}")
        return value

    def require_int(self, name: str) -> int:
        value = self.get_int(name)
        if value is None:
            raise HeaderFieldError(f"the request header field '{name}' is null")
        return value

    def get_bool(self, name: str, default: bool = False) -> bool:
        raw = self.ext_fields.get(name)
        if raw is None or raw == "":
            return default
        return raw.lower() == "true"


class HeaderFieldError(ValueError):
    """A request header field is missing or of the wrong type (answered, not a framing error)."""


# Header fields are Java ``Integer``/``Long`` and names in RocketMQ's header classes; a value
# outside its Java type is refused where it is read, as fastjson refuses it, so nothing behind
# the decoder meets a number or a name its fixed-width encodings cannot hold (consume queue
# units, offset records). Fields not listed here are Java longs. The single letters are
# SEND_MESSAGE_V2's field names (d defaultTopicQueueNums, e queueId, f sysFlag, h flag,
# j reconsumeTimes, l maxReconsumeTimes; a producerGroup, b topic, c defaultTopic).
INT32_FIELDS = frozenset({
    "queueId", "sysFlag", "flag", "reconsumeTimes", "maxReconsumeTimes", "maxMsgNums", "maxNum",
    "defaultTopicQueueNums", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "delayLevel",
    "queueNums", "topicFilterType", "initMode", "d", "e", "f", "h", "j", "l"})
NAME_FIELDS = frozenset({"topic", "consumerGroup", "group", "producerGroup", "groupName", "originTopic",
                         "retryTopic", "a", "b", "c"})
# RocketMQ's own names are far shorter (topics 127, groups 255 characters); retry and dead-letter
# topics add a prefix to a group name, Kafka topics may have 249 characters.
NAME_MAX_LENGTH = 1024
_INT_MIN, _INT_MAX = -2**31, 2**31 - 1
_LONG_MIN, _LONG_MAX = -2**63, 2**63 - 1


def _check_name(name: str, value: str) -> None:
    if len(value) > NAME_MAX_LENGTH:
        raise HeaderFieldError(f"the request header field '{name}' is {len(value)} characters long, "
                               f"more than {NAME_MAX_LENGTH}")


# -- header (de)serialization ------------------------------------------------------------

def encode_header_rocketmq(cmd: RemotingCommand) -> bytes:
    try:
        fixed = _FIXED.pack(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag)
    except struct.error as exc:  # code and version are Java shorts in this serialization
        raise RemotingCommandError(f"command {cmd.code} (version {cmd.version}, language {cmd.language}) does not "
                                   f"fit the ROCKETMQ header: {exc}") from None
    parts = [fixed]
    remark = _utf8(cmd.remark) if cmd.remark else b""
    parts.append(_I32.pack(len(remark)))
    parts.append(remark)
    ext = []
    for k, v in cmd.ext_fields.items():
        if k is None or v is None:
            continue
        kb, vb = _utf8(k), _utf8(v)
        ext.append(_U16.pack(len(kb)) + kb + _I32.pack(len(vb)) + vb)
    ext_bytes = b"".join(ext)
    parts.append(_I32.pack(len(ext_bytes)))
    parts.append(ext_bytes)
    return b"".join(parts)


def decode_header_rocketmq(data: bytes) -> RemotingCommand:
    n = len(data)
    if n < _FIXED.size + 8:
        raise RemotingCommandError(f"ROCKETMQ header too short: {n} bytes")
    code, language, version, opaque, flag = _FIXED.unpack_from(data, 0)
    pos = _FIXED.size
    (rlen,) = _I32.unpack_from(data, pos)
    pos += 4
    if rlen < 0 or pos + rlen + 4 > n:
        raise RemotingCommandError(f"ROCKETMQ header remark length {rlen} exceeds header length {n}")
    remark = data[pos:pos + rlen].decode("utf-8", "replace") if rlen else None
    pos += rlen
    (elen,) = _I32.unpack_from(data, pos)
    pos += 4
    if elen < 0 or pos + elen != n:
        raise RemotingCommandError(f"ROCKETMQ header extFields length {elen} does not match header length {n}")
    ext: dict[str, str] = {}
    end = pos + elen
    while pos < end:
        if pos + 2 > end:
            raise RemotingCommandError("ROCKETMQ header extFields truncated in a key length")
        (klen,) = _U16.unpack_from(data, pos)
        pos += 2
        if pos + klen + 4 > end:
            raise RemotingCommandError("ROCKETMQ header extFields truncated in a key")
        key = data[pos:pos + klen].decode("utf-8", "replace")
        pos += klen
        (vlen,) = _I32.unpack_from(data, pos)
        pos += 4
        if vlen < 0 or pos + vlen > end:
            raise RemotingCommandError(f"ROCKETMQ header extFields value of {key!r} truncated")
        ext[key] = data[pos:pos + vlen].decode("utf-8", "replace")
        pos += vlen
    return RemotingCommand(code, opaque, flag, remark, ext, b"", language & 0xFF, version, _ROCKETMQ)


_LANGUAGE_NAMES = {int(m): m.name for m in LanguageCode}
_json_str = json.encoder.encode_basestring  # json.dumps(s, ensure_ascii=False) of one string


def encode_header_json(cmd: RemotingCommand) -> bytes:
    """The JSON header, byte for byte what ``json.dumps(..., separators=(",", ":"),
    ensure_ascii=False)`` renders (kept as the fallback for values that are not strings), built
    by formatting: it is on every request and response."""
    lang = _LANGUAGE_NAMES.get(cmd.language, "OTHER")
    ext = cmd.ext_fields
    code, flag, opaque, version = cmd.code, cmd.flag, cmd.opaque, cmd.version
    if (type(code) is int or isinstance(code, IntEnum)) and type(flag) is int and type(opaque) is int \
            and type(version) is int and (cmd.remark is None or type(cmd.remark) is str):
        try:  # a key or value that is not a string (encode_basestring refuses it) takes json.dumps
            fields = ",".join([_json_str(k) + ":" + _json_str(v) for k, v in ext.items()])
        except TypeError:
            fields = None
        if fields is not None:
            remark = "" if cmd.remark is None else ',"remark":' + _json_str(cmd.remark)
            return _utf8(f'{{"code":{int(code)},"extFields":{{{fields}}},"flag":{flag},"language":"{lang}",'
                         f'"opaque":{opaque},"serializeTypeCurrentRPC":"JSON","version":{version}{remark}}}')
    obj: dict[str, Any] = {"code": cmd.code, "extFields": cmd.ext_fields, "flag": cmd.flag, "language": lang,
                           "opaque": cmd.opaque, "serializeTypeCurrentRPC": "JSON", "version": cmd.version}
    if cmd.remark is not None:
        obj["remark"] = cmd.remark
    return _utf8(json.dumps(obj, separators=(",", ":"), ensure_ascii=False))


_LANGUAGES = dict(LanguageCode.__members__)
_STR_ONLY = {str}


def _json_int(obj: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key, default)
    if type(value) is int and -0x80000000 <= value <= 0x7FFFFFFF:
        return value
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemotingCommandError(f"JSON header field {key!r} must be an integer, got {str(value)[:40]!r}")
    if not -2**31 <= value < 2**31:  # Java int: answers echo opaque and flag back
        raise RemotingCommandError(f"JSON header field {key!r} is out of the int range: {str(value)[:40]}")
    return value


def decode_header_json(data: bytes) -> RemotingCommand:
    obj = loads_json(data, "JSON header")
    if not isinstance(obj, dict):
        raise RemotingCommandError("JSON header must be an object")
    lang = obj.get("language", "JAVA")
    if isinstance(lang, str):
        language = _LANGUAGES.get(lang, LanguageCode.OTHER)
    elif isinstance(lang, int) and not isinstance(lang, bool):
        language = lang
    else:
        raise RemotingCommandError(f"JSON header field 'language' has a wrong type: {lang!r}")
    raw_ext = obj.get("extFields") or {}
    if not isinstance(raw_ext, dict):
        raise RemotingCommandError("JSON header field 'extFields' must be an object")
    if not raw_ext or set(map(type, raw_ext.values())) == _STR_ONLY:
        ext = raw_ext  # the usual case: every value already a string
    else:
        ext = {}
        for k, v in raw_ext.items():
            if v is None:
                continue
            if isinstance(v, bool):
                v = "true" if v else "false"
            elif isinstance(v, (dict, list)):
                raise RemotingCommandError(f"JSON header extFields value of {k!r} must be a scalar")
            ext[str(k)] = str(v)
    remark = obj.get("remark")
    if remark is not None and not isinstance(remark, str):
        raise RemotingCommandError("JSON header field 'remark' must be a string")
    get = obj.get
    code, opaque, flag, version = get("code", 0), get("opaque", 0), get("flag", 0), get("version", 0)
    if not (type(code) is int and type(opaque) is int and type(flag) is int and type(version) is int
            and -0x80000000 <= code <= 0x7FFFFFFF and -0x80000000 <= opaque <= 0x7FFFFFFF
            and -0x80000000 <= flag <= 0x7FFFFFFF and -0x80000000 <= version <= 0x7FFFFFFF):
        code, opaque, flag, version = (_json_int(obj, "code"), _json_int(obj, "opaque"), _json_int(obj, "flag"),
                                       _json_int(obj, "version"))
    return RemotingCommand(code, opaque, flag, remark, ext, b"", language, version, _JSON)


# -- frames ------------------------------------------------------------------------------

def encode_py(cmd: RemotingCommand) -> bytes:
    """The whole frame, length prefix included."""
    if cmd.serialize_type == _ROCKETMQ:
        header = encode_header_rocketmq(cmd)
    else:
        header = encode_header_json(cmd)
    body = cmd.body or b""
    if len(header) > 0xFFFFFF or 4 + len(header) + len(body) > 0x7FFFFFFF:
        # the mark holds the header length in 24 bits, the prefix the frame's in a signed 32
        raise RemotingCommandError(f"command {cmd.code} does not fit a frame: header of {len(header)} bytes "
                                   f"(at most {0xFFFFFF}), body of {len(body)} bytes")
    return struct.pack(">ii", 4 + len(header) + len(body), (int(cmd.serialize_type) << 24) | len(header)) + header + body


def check_frame_length(length: int, max_frame_size: int = MAX_FRAME_SIZE) -> None:
    """Validate the 4-byte length prefix before reading the rest of the frame."""
    if length < 4:
        raise RemotingCommandError(f"frame length {length} is smaller than the 4-byte header-length field")
    if length > max_frame_size:
        raise FrameTooLargeError(f"frame of {length} bytes exceeds the limit of {max_frame_size} bytes")


def decode_frame_py(frame: bytes | bytearray | memoryview) -> RemotingCommand:
    """Decode one frame *without* its length prefix."""
    n = len(frame)
    if n < 4:
        raise RemotingCommandError("frame shorter than its header-length field")
    (mark,) = _I32.unpack_from(frame, 0)
    stype = (mark >> 24) & 0xFF
    hlen = mark & 0xFFFFFF
    if hlen > n - 4:
        raise RemotingCommandError(f"header length {hlen} exceeds the frame ({n - 4} bytes after the mark)")
    # header and body are copied out of the frame once each (bytes: the frame may be the
    # reader's bytearray), not the whole frame first
    view = memoryview(frame)
    header = bytes(view[4:4 + hlen])
    if stype == 0:  # SerializeType.JSON
        cmd = decode_header_json(header)
    elif stype == 1:  # SerializeType.ROCKETMQ
        cmd = decode_header_rocketmq(header)
    else:
        raise RemotingCommandError(f"unknown serialize type {stype}")
    cmd.body = bytes(view[4 + hlen:])
    return cmd


try:  # the common case compiled; what it does not handle it passes to decode_frame_py / encode_py
    from . import _framecodec
except ImportError:  # pragma: no cover - the extension is optional
    _framecodec = None

_SLOTS = ("code", "opaque", "flag", "remark", "ext_fields", "body", "language", "version", "serialize_type")


def _setup_compiled(fill_slots: bool = True) -> bool:
    """Hand the compiled codec what its commands are made of and the Python codec it defers to.
    It fills RemotingCommand's slots itself (a fifth faster than calling the class) while
    ``__init__`` does nothing but assign them; answers whether it does."""
    plain = (fill_slots and [f.name for f in dataclasses.fields(RemotingCommand)] == list(_SLOTS)
             and not hasattr(RemotingCommand, "__post_init__") and RemotingCommand.__new__ is object.__new__)
    _framecodec.setup(RemotingCommand, tuple(RemotingCommand.__dict__[n] for n in _SLOTS) if plain else None,
                      _LANGUAGES, _JAVA, LanguageCode.OTHER, _LANGUAGE_NAMES, _JSON, _ROCKETMQ, IntEnum,
                      decode_frame_py, encode_py)
    return plain


decode_frame: Callable[[bytes | bytearray | memoryview], RemotingCommand] = decode_frame_py
encode: Callable[[RemotingCommand], bytes] = encode_py
if _framecodec is not None:
    _setup_compiled()
    decode_frame, encode = _framecodec.decode_frame, _framecodec.encode


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, get the complete commands they finish."""

    def __init__(self, max_frame_size: int = MAX_FRAME_SIZE):
        self.max_frame_size = max_frame_size
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[RemotingCommand]:
        self._buf += data
        out = []
        while len(self._buf) >= 4:
            (length,) = struct.unpack_from(">i", self._buf, 0)
            check_frame_length(length, self.max_frame_size)
            if len(self._buf) < 4 + length:
                break
            out.append(decode_frame(bytes(self._buf[4:4 + length])))
            del self._buf[:4 + length]
        return out

    @property
    def pending(self) -> int:
        return len(self._buf)
