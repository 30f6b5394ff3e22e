"""Frames <-> typed requests and responses: request/response headers and the API entry points.

Owns the framing contract the Kafka gateway's server and handlers code against (documented in
docs/design/kafka-protocol.md):

- ``decode_request(frame)`` takes a frame WITHOUT its 4-byte length prefix and returns a
  ``Request(header, body)``; ``UnsupportedVersionError`` when the api key is unknown or the
  version not declared (the header is still parsed, so the server can answer ApiVersions with
  UNSUPPORTED_VERSION in a v0 body, KIP-511); ``MalformedRequestError`` for anything else
  that does not follow the schema. Bytes after the body's last field are ignored (as Kafka
  brokers do) and counted in ``Request.trailing_bytes``.
- ``encode_response(...)`` returns a whole frame INCLUDING the length prefix;
  ``encode_response_chunks(...)`` the same bytes as a list of buffers, large ``records``
  payloads kept as their own (uncopied) chunks.

Header versions: requests use header v2 (client id + tagged fields) in flexible versions and
v1 otherwise; responses use header v1 (tagged fields) in flexible versions and v0 otherwise,
except ApiVersions, whose response header is always v0 so a client can read it before it
knows which versions the server speaks.
"""

from __future__ import annotations

import enum
import struct
from typing import Any, NamedTuple

from . import messages  # noqa: F401  (registers every API declaration)
from . import primitives as p
from .schema import APIS, ApiDeclaration

API_VERSIONS_KEY = 18
_REQUEST_HEADER = struct.Struct(">hhi")
_INT32 = struct.Struct(">i")
_read_client_id, _write_client_id = p.string_codec(flexible=False, nullable=True)


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    STREAMS_GROUP_HEARTBEAT = 88
    STREAMS_GROUP_DESCRIBE = 89
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


class Request(NamedTuple):
    header: RequestHeader
    body: dict
    trailing_bytes: int = 0  # bytes after the body's last field (ignored)

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id


class ApiRange(NamedTuple):
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version, None when no version is flexible


class UnsupportedVersionError(Exception):
    """The api key is unknown or the version is not declared; the header was parsed."""

    def __init__(self, api_key: int, api_version: int, correlation_id: int,
                 client_id: str | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        self.client_id = client_id
        decl = APIS.get(api_key)
        if decl is None:
            why = f"unknown api key {api_key}"
        else:
            why = (f"{decl.name} (key {api_key}) version {api_version} is not supported; "
                   f"supported versions are {decl.min_version}-{decl.max_version}")
        super().__init__(why)


class MalformedRequestError(Exception):
    """The frame does not follow the declared schema; the connection should be closed.

    ``correlation_id``/``api_key``/``api_version`` are set when the header could be read.
    """

    def __init__(self, message: str, *, api_key: int | None = None,
                 api_version: int | None = None, correlation_id: int | None = None) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        super().__init__(message)


def api_schema(api_key: int) -> ApiRange:
    """Declared (min_version, max_version, flexible_from) of an API; KeyError when unknown."""
    decl = APIS.get(api_key)
    if decl is None:
        raise KeyError(f"api key {api_key} is not declared")
    return ApiRange(decl.min_version, decl.max_version, decl.flexible_from)


def declared_api_keys() -> list[int]:
    return sorted(APIS)


def api_name(api_key: int) -> str:
    decl = APIS.get(api_key)
    return decl.name if decl else f"Unknown({api_key})"


def _declaration(api_key: int, api_version: int) -> ApiDeclaration:
    decl = APIS.get(api_key)
    if decl is None or not decl.min_version <= api_version <= decl.max_version:
        raise UnsupportedVersionError(api_key, api_version, -1)
    return decl


def _as_view(frame) -> memoryview:
    view = memoryview(frame)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view


# --- requests ----------------------------------------------------------------------------------

_REQUEST_READERS: dict[tuple[int, int], tuple[ApiDeclaration, object, bool]] = {}


def _request_reader(api_key: int, api_version: int):
    """(declaration, body reader, flexible) for a declared (key, version), else None; cached."""
    entry = _REQUEST_READERS.get((api_key, api_version))
    if entry is None:
        decl = APIS.get(api_key)
        if decl is None or not decl.min_version <= api_version <= decl.max_version:
            return None
        entry = (decl, decl.request_codec(api_version)[0], decl.is_flexible(api_version))
        _REQUEST_READERS[(api_key, api_version)] = entry
    return entry


def decode_request(frame) -> Request:
    """Decode one request frame (without the 4-byte length prefix)."""
    view = frame if type(frame) is bytes else _as_view(frame)
    if len(view) < 8:
        raise MalformedRequestError(
            f"request header needs at least {_REQUEST_HEADER.size} bytes, frame has {len(view)}")
    api_key, api_version, correlation_id = _REQUEST_HEADER.unpack_from(view, 0)
    entry = _request_reader(api_key, api_version)
    try:
        client_id, pos = _read_client_id(view, 8)
    except p.ProtocolDecodeError as exc:
        if entry is None:
            raise UnsupportedVersionError(api_key, api_version, correlation_id) from None
        raise MalformedRequestError(f"request header: {exc}", api_key=api_key, api_version=api_version,
                                    correlation_id=correlation_id) from None
    if entry is None:
        raise UnsupportedVersionError(api_key, api_version, correlation_id, client_id)
    decl, read, flexible = entry
    try:
        if flexible:
            if view[pos] == 0:  # the usual empty header tag section
                pos += 1
            else:
                pos = p.skip_tagged_fields(view, pos)
        body, pos = read(view, pos)
    except (p.ProtocolDecodeError, ValueError, IndexError, TypeError) as exc:
        # ValueError/IndexError/TypeError: defensive, any other decode slip is still "malformed"
        raise MalformedRequestError(f"{decl.name} v{api_version} request: {exc}", api_key=api_key,
                                    api_version=api_version, correlation_id=correlation_id) from None
    # Bytes after the last field are ignored, as Kafka brokers do: librdkafka 2.x sends three
    # extra bytes with an all-topics Metadata v12 request. The count is reported, not fatal.
    return Request(RequestHeader(api_key, api_version, correlation_id, client_id), body,
                   len(view) - pos)


def encode_request(api_key: int, api_version: int, correlation_id: int, body: dict,
                   client_id: str | None = None) -> bytes:
    """A whole request frame including the length prefix (clients and tests use this)."""
    decl = _declaration(api_key, api_version)
    w = p.Writer()
    w.buf += b"\x00\x00\x00\x00"
    w.buf += _REQUEST_HEADER.pack(api_key, api_version, correlation_id)
    _write_client_id(w, client_id)
    if decl.is_flexible(api_version):
        w.buf.append(0)  # no header tagged fields
    decl.request_codec(api_version)[1](w, body)
    w.buf[0:4] = _INT32.pack(len(w.buf) - 4)
    return bytes(w.buf)


# --- responses ---------------------------------------------------------------------------------

def _response_header_flexible(decl: ApiDeclaration, api_version: int) -> bool:
    return decl.key != API_VERSIONS_KEY and decl.is_flexible(api_version)


def _encode_response(api_key: int, api_version: int, correlation_id: int, body: dict,
                     zero_copy: bool) -> p.Writer:
    decl = _declaration(api_key, api_version)
    w = p.Writer(zero_copy)
    w.buf += b"\x00\x00\x00\x00"
    w.buf += _INT32.pack(correlation_id)
    if _response_header_flexible(decl, api_version):
        w.buf.append(0)
    decl.response_codec(api_version)[1](w, body)
    first = w.parts[0] if w.parts else w.buf
    first[0:4] = _INT32.pack(w.size() - 4)
    return w


def encode_response(api_key: int, api_version: int, correlation_id: int, body: dict) -> bytes:
    """The full response frame, length prefix included, ready to write."""
    return _encode_response(api_key, api_version, correlation_id, body, False).getvalue()


def encode_response_chunks(api_key: int, api_version: int, correlation_id: int,
                           body: dict) -> list:
    """The same frame as ``encode_response`` as a list of buffers for ``writelines``: record
    payloads of 1 KiB or more (bytes, memoryviews, or lists of buffers given as a ``records``
    value) are passed through as their own chunks, never copied into one big bytes object."""
    return _encode_response(api_key, api_version, correlation_id, body, True).chunks()


def decode_response(api_key: int, api_version: int, frame) -> tuple[int, dict]:
    """Decode a response frame (without length prefix) -> (correlation_id, body)."""
    decl = _declaration(api_key, api_version)
    view = _as_view(frame)
    try:
        (correlation_id,) = _INT32.unpack_from(view, 0)
        pos = 4
        if _response_header_flexible(decl, api_version):
            pos = p.skip_tagged_fields(view, pos)
        body, pos = decl.response_codec(api_version)[0](view, pos)
    except (p.ProtocolDecodeError, struct.error) as exc:
        raise MalformedRequestError(f"{decl.name} v{api_version} response: {exc}") from None
    if pos != len(view):
        raise MalformedRequestError(
            f"{decl.name} v{api_version} response has {len(view) - pos} bytes after its last field")
    return correlation_id, body


def decode_request_body(api_key: int, api_version: int, data) -> dict:
    """Decode a bare request body (no header); for tests and tools."""
    decl = _declaration(api_key, api_version)
    body, pos = decl.request_codec(api_version)[0](_as_view(data), 0)
    if pos != len(data):
        raise MalformedRequestError(f"{len(data) - pos} bytes after the body")
    return body


def body_defaults(api_key: int, api_version: int, which: str = "response") -> dict[str, Any]:
    """Every top-level field of a body in ``api_version`` with its default value."""
    decl = _declaration(api_key, api_version)
    fields = decl.response if which == "response" else decl.request
    from .schema import _in
    return {f.name: f.default(api_version) for f in fields if _in(f.versions, api_version)}
