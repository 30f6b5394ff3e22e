"""Structure-aware fuzzing: well-formed requests with random field values, for every API and
version the gateway advertises, each on its own connection.

Every request must be answered (or, for acks=0 Produce, silently accepted, or the connection
closed) within a bounded time, the server must keep serving, and no handler may fail with an
exception (the node's log must have no ``connection_failed`` event): bad values get protocol
error codes, never crashes. Derandomized so the suite is repeatable; raise ``max_examples``
locally for a longer exploration.
"""

from __future__ import annotations

import socket
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_kafka.apis import advertised
from gateway_kafka.protocol import decode_response, encode_request
from gateway_kafka.protocol.schema import APIS, Field, _in
from tests.gateway_kafka.kafka_helpers import RawKafka

pytestmark = pytest.mark.timeout(300)

_INTS = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
TOPIC = "fuzz-topic"
VOCABULARY = [TOPIC, "fuzz-group", "consumer", "range", "PLAIN", ""]


def _scalar(ftype: str):
    if ftype in _INTS:
        bits = _INTS[ftype]
        # mostly small values (realistic), sometimes anything in range
        return st.one_of(st.integers(-3, 100), st.integers(-(2**bits), 2**bits - 1))
    if ftype in ("uint16", "uint32"):
        return st.integers(0, 2 ** (16 if ftype == "uint16" else 32) - 1)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "uuid":
        return st.uuids().map(lambda u: uuid.UUID(int=u.int))
    if ftype == "string":
        # half the time a name that exists, so requests reach real topics and groups
        return st.one_of(st.text(max_size=12), st.sampled_from(VOCABULARY))
    if ftype in ("bytes", "records"):
        return st.binary(max_size=80)
    raise AssertionError(ftype)


def _struct(fields: list[Field], version: int):
    return st.fixed_dictionaries({f.name: _field(f, version) for f in fields if _in(f.versions, version)})


def _field(f: Field, version: int):
    if f.type == "{}":
        base = _struct(f.fields, version)
    elif f.type == "[]":
        base = st.lists(_struct(f.fields, version), max_size=3)
    elif f.type.startswith("["):
        base = st.lists(_scalar(f.type[1:-1]), max_size=3)
    else:
        base = _scalar(f.type)
    return st.one_of(st.none(), base) if _in(f.nullable, version) else base


@pytest.fixture(scope="module")
def fuzz_node(tmp_path_factory):
    from tests.support.node import RunningNode

    # a node of its own: fuzzed admin requests may create topics and groups
    with RunningNode(tmp_path_factory.mktemp("fuzz") / "data", settings={"num_partitions": 1}) as n:
        from tests.gateway_kafka.kafka_helpers import create_topic, produce

        create_topic(n.kafka_bootstrap, TOPIC, partitions=2)
        produce("confluent-kafka", n.kafka_bootstrap, TOPIC, [(b"k", b"v%d" % i, [("h", b"x")]) for i in range(20)])
        yield n
    assert "connection_failed" not in n.log_tail(10**8), "a handler raised on a well-formed request"


def exchange(bootstrap: str, api_key: int, version: int, body: dict) -> str:
    """Send the request then an ApiVersions; 'answered', 'silent' (answer only to the second)
    or 'closed'. Raises on a hang (socket timeout)."""
    with RawKafka(bootstrap, timeout=30) as raw:
        try:
            raw.send_raw(encode_request(api_key, version, 1, body, "fuzz")
                         + encode_request(18, 3, 2, {"client_software_name": "f", "client_software_version": "1"},
                                          "fuzz"))
            seen = []
            while True:
                frame = raw.read_frame()
                if frame is None:
                    return "closed"
                corr = struct.unpack_from(">i", frame)[0]
                if corr == 1:
                    decode_response(api_key, version, frame)  # the answer must be well-formed
                seen.append(corr)
                if corr == 2:
                    return "answered" if 1 in seen else "silent"
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        except socket.timeout:
            raise AssertionError(f"no answer to api {api_key} v{version} within 30 s: {body!r}") from None


CASES = [(k, v) for k, lo, hi in advertised() for v in range(lo, hi + 1)]


@pytest.mark.parametrize("api_key", sorted({k for k, _ in CASES}), ids=lambda k: APIS[k].name)
@settings(max_examples=25, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_well_formed_requests(fuzz_node, api_key, data):
    versions = [v for k, v in CASES if k == api_key]
    version = data.draw(st.sampled_from(versions), label="version")
    body = data.draw(_struct(APIS[api_key].request, version), label="body")
    if api_key == 1:  # Fetch: keep the long poll short so a parked fetch cannot outlive the test
        body["max_wait_ms"] = min(abs(body.get("max_wait_ms") or 0), 500)
    if api_key in (11, 14) and "rebalance_timeout_ms" in body:  # JoinGroup: bounded parking
        body["rebalance_timeout_ms"] = min(abs(body["rebalance_timeout_ms"]), 2000)
    if api_key == 11:
        body["session_timeout_ms"] = min(abs(body.get("session_timeout_ms") or 0), 10_000)
    outcome = exchange(fuzz_node.kafka_bootstrap, api_key, version, body)
    assert outcome in ("answered", "silent", "closed")
    if outcome == "silent":
        assert api_key == 0 and body.get("acks") == 0, "only acks=0 Produce goes unanswered"
    with RawKafka(fuzz_node.kafka_bootstrap) as ok:
        assert ok.request(18, 3, {"client_software_name": "f", "client_software_version": "1"})["error_code"] == 0


def _metadata_frame(topic: bytes, client_id: bytes = b"fuzz") -> bytes:
    body = encode_request(3, 9, 7, {"topics": [{"name": "PLACEHOLDER"}], "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False}, "CLIENTID")[4:]
    body = body.replace(b"PLACEHOLDER", topic).replace(b"CLIENTID", client_id)
    # compact strings carry their length + 1 (varint), the header client id an int16 length
    body = body.replace(bytes([len("PLACEHOLDER") + 1]) + topic, bytes([len(topic) + 1]) + topic)
    body = body.replace(struct.pack(">h", len("CLIENTID")) + client_id, struct.pack(">h", len(client_id)) + client_id)
    return struct.pack(">i", len(body)) + body


# Frames no well-formed request produces: lone surrogates and invalid UTF-8 in strings, a length
# prefix past socket.request.max.bytes or negative, a lying array length. Each closes (or is
# answered on) its own connection; the node logs no traceback (checked by the fixture).
EDGE_FRAMES = {
    "surrogate-topic": _metadata_frame(b"\xed\xa0\x80"),
    "invalid-utf8-topic": _metadata_frame(b"\xff\xfe"),
    "surrogate-client-id": _metadata_frame(b"t", b"\xed\xbf\xbf"),
    "oversized-prefix": struct.pack(">i", 200 * 1024 * 1024),
    "negative-prefix": struct.pack(">i", -5),
    "lying-array": struct.pack(">ihhih", 14, 3, 9, 1, 0) + b"\x00" + b"\xff\xff\xff\x7f",
}


@pytest.mark.parametrize("name", sorted(EDGE_FRAMES))
def test_edge_frames_close_only_their_connection(fuzz_node, name):
    with RawKafka(fuzz_node.kafka_bootstrap, timeout=30) as raw:
        raw.send_raw(EDGE_FRAMES[name])
        try:
            frame = raw.read_frame()
        except (ConnectionResetError, BrokenPipeError):
            frame = None
        if frame is not None:  # answered: a well-formed response to correlation id 7
            assert struct.unpack_from(">i", frame)[0] == 7
    with RawKafka(fuzz_node.kafka_bootstrap) as ok:
        assert ok.request(18, 3, {"client_software_name": "f", "client_software_version": "1"})["error_code"] == 0
