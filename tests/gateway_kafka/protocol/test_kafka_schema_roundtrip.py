"""Every declared API, every version, both directions: decode(encode(x)) == x (hypothesis).

Bodies are generated from the declarations themselves, so a field whose encoding is wrong in
any version (length prefix, nullability, compact form, tagged section) fails here.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway_kafka.protocol import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    encode_response_chunks,
)
from gateway_kafka.protocol.schema import APIS, Field, _in

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
}


def _scalar(ftype: str):
    if ftype in _INT_RANGES:
        lo, hi = _INT_RANGES[ftype]
        return st.integers(min_value=lo, max_value=hi)
    if ftype == "bool":
        return st.booleans()
    if ftype == "float64":
        return st.floats(allow_nan=False)
    if ftype == "uuid":
        return st.uuids().map(lambda u: uuid.UUID(int=u.int))
    if ftype == "string":
        return st.text(max_size=20)
    if ftype in ("bytes", "records"):
        return st.binary(max_size=40)
    raise AssertionError(ftype)


def struct_strategy(fields: list[Field], version: int):
    return st.fixed_dictionaries({
        f.name: field_strategy(f, version) for f in fields if _in(f.versions, version)
    })


def field_strategy(f: Field, version: int):
    if f.type == "{}":
        base = struct_strategy(f.fields, version)
    elif f.type == "[]":
        base = st.lists(struct_strategy(f.fields, version), max_size=3)
    elif f.type.startswith("["):
        base = st.lists(_scalar(f.type[1:-1]), max_size=4)
    else:
        base = _scalar(f.type)
    if _in(f.nullable, version):
        return st.one_of(st.none(), base)
    return base


CASES = [(key, version) for key, decl in sorted(APIS.items())
         for version in range(decl.min_version, decl.max_version + 1)]


@pytest.mark.parametrize("api_key,version", CASES, ids=[f"{APIS[k].name}-v{v}" for k, v in CASES])
@settings(max_examples=6, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_request_and_response_round_trip(api_key, version, data):
    decl = APIS[api_key]
    req_body = data.draw(struct_strategy(decl.request, version), label="request")
    frame = encode_request(api_key, version, 12345, req_body, client_id="rt-client")
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    req = decode_request(frame[4:])
    assert req.header == (api_key, version, 12345, "rt-client")
    assert req.body == req_body

    resp_body = data.draw(struct_strategy(decl.response, version), label="response")
    out = encode_response(api_key, version, -7, resp_body)
    assert int.from_bytes(out[:4], "big") == len(out) - 4
    assert b"".join(bytes(c) for c in encode_response_chunks(api_key, version, -7, resp_body)) == out
    corr, body = decode_response(api_key, version, out[4:])
    assert corr == -7
    assert body == resp_body
