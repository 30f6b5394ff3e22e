"""Bad input at the broker and the NameServer: garbage, truncated and oversized frames close only
that connection; unknown codes and bad header fields get error answers; other clients keep
working throughout."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from gateway_native.client import Message, Producer
from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
from gateway_native.remoting.command import FrameDecoder, RemotingCommand, encode
from gateway_native.transport import open_connection


def host_port(addr: str) -> tuple[str, int]:
    h, p = addr.rsplit(":", 1)
    return h, int(p)


def request(addr: str, cmd: RemotingCommand, timeout: float = 10) -> RemotingCommand:
    with socket.create_connection(host_port(addr), timeout=timeout) as s:
        s.sendall(encode(cmd))
        dec = FrameDecoder()
        while True:
            data = s.recv(1 << 20)
            assert data, "connection closed without an answer"
            out = dec.feed(data)
            if out:
                return out[0]


def closed_by_peer(s: socket.socket, timeout: float = 10) -> bool:
    s.settimeout(timeout)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.fixture(scope="module")
def producer(node):
    with Producer("badinput", node.namesrv_addr) as p:
        yield p


def still_serving(node, producer) -> None:
    assert producer.send(Message("BadInputAlive", b"ok")).status.name == "SEND_OK"
    resp = request(node.namesrv_addr, RemotingCommand.request(RC.GET_BROKER_CLUSTER_INFO))
    assert resp.code == R.SUCCESS


def json_frame(header: bytes, body: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(header) + len(body), len(header)) + header + body


@pytest.mark.parametrize("target", ["broker", "namesrv"])
@pytest.mark.parametrize("payload", [
    b"\x00\x00\x00\x08\x05\x00\x00\x04abcd",                  # unknown serialize type
    b"\x00\x00\x00\x08\x00\x00\x00\x04{{{{",                  # not JSON
    b"\x00\x00\x00\x08\x00\x00\x10\x00abcd",                  # header longer than the frame
    b"\x00\x00\x00\x02ab",                                     # shorter than the mark
    b"\xff\xff\xff\xff",                                       # negative length
    struct.pack(">i", 64 * 1024 * 1024),                       # 64 MiB: refused before buffering
    b"\x00\x00\x00\x0d\x01\x00\x00\x09" + b"\x00" * 6 + b"xyz",  # ROCKETMQ header too short
    json_frame(b'{"code":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),  # nested 100,000 deep
    json_frame(b'{"code":' + b"9" * 5000 + b"}"),              # a 5,000-digit number
    json_frame(b'{"code":105,"remark":"\\ud800"}'),            # a lone surrogate
    json_frame(b'{"code":105,"extFields":{"topic":"\\udfff"}}'),
    json_frame(b'{"code":105,"opaque":99999999999}'),           # outside Java's int
])
def test_malformed_frames_close_only_that_connection(node, producer, target, payload):
    addr = node.broker_addr if target == "broker" else node.namesrv_addr
    tracebacks = node.log_tail(10**8).count("Traceback")
    with socket.create_connection(host_port(addr), timeout=10) as bystander, \
            socket.create_connection(host_port(addr), timeout=10) as bad:
        bad.sendall(payload)
        assert closed_by_peer(bad)
        # the bystander connection on the same listener still works
        bystander.sendall(encode(RemotingCommand.request(RC.GET_BROKER_CLUSTER_INFO if target == "namesrv" else RC.GET_MAX_OFFSET,
                                                         {"topic": "BadInputAlive", "queueId": 0})))
        dec = FrameDecoder()
        out = []
        while not out:
            chunk = bystander.recv(65536)
            assert chunk
            out = dec.feed(chunk)
        assert out[0].is_response
    still_serving(node, producer)
    assert node.log_tail(10**8).count("Traceback") == tracebacks, "a bad frame was logged as a crash"


# Request bodies (JSON) Python cannot hold: answered with the processor's error, no traceback.
UNHOLDABLE_BODIES = [b"[" * 100_000 + b"]" * 100_000, b'{"clientID": ' + b"7" * 5000 + b"}",
                     b'{"clientID": "\\ud800", "consumerDataSet": []}', b"\xc3\x28"]


@pytest.mark.parametrize("code, remark_part", [(RC.HEART_BEAT, "heartbeat"), (RC.LOCK_BATCH_MQ, "lock"),
                                               (RC.CHECK_CLIENT_CONFIG, ""),
                                               (RC.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, "subscription group")])
@pytest.mark.parametrize("body", UNHOLDABLE_BODIES, ids=["deep", "digits", "surrogate", "not-utf8"])
def test_bodies_json_cannot_hold_get_error_answers(node, producer, code, remark_part, body):
    tracebacks = node.log_tail(10**8).count("Traceback")
    resp = request(node.broker_addr, RemotingCommand.request(code, {}, body))
    assert resp.code != R.SUCCESS and remark_part in (resp.remark or "").lower(), (resp.code, resp.remark)
    still_serving(node, producer)
    assert node.log_tail(10**8).count("Traceback") == tracebacks


def test_truncated_frame_then_disconnect(node, producer):
    frame = encode(RemotingCommand.request(RC.SEND_MESSAGE_V2, {"a": "g", "b": "T"}, b"x" * 100))
    for cut in (1, 3, 7, 20, len(frame) - 1):
        with socket.create_connection(host_port(node.broker_addr), timeout=10) as s:
            s.sendall(frame[:cut])
    still_serving(node, producer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=200))
def test_random_bytes_never_break_the_broker(node, producer, junk):
    with socket.create_connection(host_port(node.broker_addr), timeout=10) as s:
        s.sendall(junk)
        s.shutdown(socket.SHUT_WR)
        closed_by_peer(s, 5)
    assert request(node.broker_addr, RemotingCommand.request(RC.GET_MAX_OFFSET, {"topic": "X", "queueId": 0})).code == R.SUCCESS


def test_unknown_request_code_is_answered(node):
    for addr in (node.broker_addr, node.namesrv_addr):
        resp = request(addr, RemotingCommand.request(9999, {"x": "y"}))
        assert resp.code == R.REQUEST_CODE_NOT_SUPPORTED and "9999" in resp.remark
    cold = 2003  # GET_COLD_DATA_FLOW_CTR_INFO: a real RocketMQ 5 code this broker does not implement
    resp = request(node.broker_addr, RemotingCommand.request(cold))
    assert resp.code == R.REQUEST_CODE_NOT_SUPPORTED and str(cold) in resp.remark
    resp = request(node.broker_addr, RemotingCommand.request(RC.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}))
    assert resp.code == R.REQUEST_CODE_NOT_SUPPORTED and "GET_ROUTEINFO_BY_TOPIC" in resp.remark  # a NameServer code


@pytest.mark.parametrize("code, fields, expected, remark_part", [
    (RC.GET_MAX_OFFSET, {"topic": "T", "queueId": "zero"}, R.SYSTEM_ERROR, "queueId"),
    (RC.GET_MAX_OFFSET, {"queueId": "0"}, R.SYSTEM_ERROR, "topic"),
    (RC.PULL_MESSAGE, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": "0", "queueOffset": "x"}, R.SYSTEM_ERROR, "queueOffset"),
    (RC.PULL_MESSAGE, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": 99, "queueOffset": 0,
                       "sysFlag": 4, "subscription": "*"}, R.SYSTEM_ERROR, "queueId[99] is illegal"),
    (RC.PULL_MESSAGE, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": 0, "queueOffset": 0, "sysFlag": 4,
                       "subscription": "a >", "expressionType": "SQL92"}, R.SUBSCRIPTION_PARSE_FAILED, "SQL92"),
    (RC.PULL_MESSAGE, {"consumerGroup": "nobody", "topic": "BadInputAlive", "queueId": 0, "queueOffset": 0, "sysFlag": 0},
     R.SUBSCRIPTION_NOT_EXIST, "group"),
    (RC.PULL_MESSAGE, {"consumerGroup": "g", "topic": "NoSuchTopicHere", "queueId": 0, "queueOffset": 0}, R.TOPIC_NOT_EXIST, "NoSuchTopicHere"),
    (RC.SEND_MESSAGE_V2, {"a": "g", "b": "bad topic!", "e": 0}, R.INVALID_PARAMETER, "illegal"),
    (RC.SEND_BATCH_MESSAGE, {"a": "g", "b": "BadInputAlive", "e": 0}, R.MESSAGE_ILLEGAL, "batch"),
    (RC.CHECK_CLIENT_CONFIG, None, R.SUBSCRIPTION_PARSE_FAILED, "SQL92"),
    (RC.HEART_BEAT, None, R.SYSTEM_ERROR, "heartbeat"),
    (RC.UPDATE_AND_CREATE_TOPIC, {"topic": "TBW102"}, R.SYSTEM_ERROR, "system topic"),
    # values the store's fixed-width records cannot hold: refused where the header is read
    (RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": 2**31, "commitOffset": 1},
     R.SYSTEM_ERROR, "queueId' is out of the Java int range"),
    (RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g" * 40_000, "topic": "BadInputAlive", "queueId": 0,
                                 "commitOffset": 1}, R.SYSTEM_ERROR, "consumerGroup' is 40000 characters long"),
    (RC.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": 0,
                                 "commitOffset": 2**63}, R.SYSTEM_ERROR, "commitOffset' is out of the Java long range"),
    (RC.INVOKE_BROKER_TO_RESET_OFFSET, {"group": "g" * 40_000, "topic": "BadInputAlive", "timestamp": -1},
     R.SYSTEM_ERROR, "group' is 40000 characters long"),
    (RC.QUERY_CONSUMER_OFFSET, {"consumerGroup": "g", "topic": "BadInputAlive", "queueId": -2**31 - 1},
     R.SYSTEM_ERROR, "queueId"),
])
def test_bad_header_fields_get_error_answers(node, producer, code, fields, expected, remark_part):
    producer.send(Message("BadInputAlive", b"seed"))
    body = b""
    if code == RC.SEND_BATCH_MESSAGE:
        body = b"\x00\x00\x00\x30garbage"
    elif code == RC.CHECK_CLIENT_CONFIG:
        body = json.dumps({"subscriptionData": {"topic": "T", "subString": "a = NULL", "expressionType": "SQL92"}}).encode()
    elif code == RC.HEART_BEAT:
        body = b"[1, 2"
    tracebacks = node.log_tail(10**8).count("Traceback")
    resp = request(node.broker_addr, RemotingCommand.request(code, fields, body))
    assert resp.code == expected, (resp.code, resp.remark)
    assert remark_part.lower() in (resp.remark or "").lower()
    still_serving(node, producer)
    assert node.log_tail(10**8).count("Traceback") == tracebacks


def test_rocketmq_serialized_requests_get_rocketmq_answers(node, producer):
    producer.send(Message("BadInputAlive", b"seed"))
    resp = request(node.broker_addr, RemotingCommand.request(RC.GET_MAX_OFFSET, {"topic": "BadInputAlive", "queueId": 0},
                                                             serialize_type=1))
    assert resp.serialize_type == 1 and resp.code == R.SUCCESS and int(resp.ext_fields["offset"]) >= 0


def test_oversized_message_body_is_refused_but_the_connection_stays(node, producer):
    big = b"x" * (5 * 1024 * 1024)  # above maxMessageSize (4 MiB), below the 16 MiB frame limit
    with socket.create_connection(host_port(node.broker_addr), timeout=20) as s:
        dec = FrameDecoder()

        def roundtrip(cmd):
            s.sendall(encode(cmd))
            out = []
            while not out:
                chunk = s.recv(1 << 20)
                assert chunk
                out = dec.feed(chunk)
            return out[0]
        resp = roundtrip(RemotingCommand.request(RC.SEND_MESSAGE_V2, {"a": "g", "b": "BadInputAlive", "c": "TBW102", "d": 4,
                                                                      "e": 0, "f": 0, "g": 0, "h": 0, "i": ""}, big))
        assert resp.code == R.MESSAGE_ILLEGAL and "exceeds" in resp.remark
        ok = roundtrip(RemotingCommand.request(RC.SEND_MESSAGE_V2, {"a": "g", "b": "BadInputAlive", "c": "TBW102", "d": 4,
                                                                    "e": 0, "f": 0, "g": 0, "h": 0, "i": ""}, b"small"))
        assert ok.code == R.SUCCESS
    with pytest.raises(Exception) as info:
        producer.send(Message("BadInputAlive", os.urandom(5 * 1024 * 1024)))
    assert "max message size" in str(info.value)


def test_refused_request_code_is_logged_once_per_client(node):
    """An operator sees which client (address, version) asked for a code the broker refuses,
    once per code and client, not once per request."""

    async def thrice() -> None:
        conn = await open_connection(node.broker_addr, None, timeout=5)
        try:
            for _ in range(3):
                resp = await conn.invoke(RemotingCommand.request(200077, {"x": "y"}, version=469), 5)
                assert resp.code == R.REQUEST_CODE_NOT_SUPPORTED
        finally:
            conn.close()

    asyncio.run(thrice())
    lines = [ln for ln in node.log_tail(10**7).splitlines() if "request_code_refused" in ln and "code=200077" in ln]
    assert len(lines) == 1, lines
    assert "version=469" in lines[0] and "peer='127.0.0.1:" in lines[0] and "server='broker'" in lines[0]
