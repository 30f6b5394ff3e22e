"""The gRPC front on a secured node, with the official RocketMQ 5 Python client
(``rocketmq-python-client``, ``Credentials(accessKey, secretKey)``): a user with the right ACLs
sends and consumes; a wrong secret, an unknown access key and an anonymous client are refused
with UNAUTHORIZED (40100), a user without PUB on a topic with FORBIDDEN (40300), each with the
reason. Users and permissions go through RocketMQ's updateAclConfig (the remoting secret is the
gRPC secret too), signed with the node's inner credentials.

One node serves the module; every wait is bounded."""

from __future__ import annotations

import logging
import uuid

import pytest

rocketmq = pytest.importorskip("rocketmq")  # the official client: part of the test extras

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer  # noqa: E402

from tests.support.node import RunningNode  # noqa: E402

pytestmark = pytest.mark.timeout(180)

INNER = ("rockafka-node", "node-secret-1")


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    node = RunningNode(tmp_path_factory.mktemp("grpc-acl") / "data", settings={
        "authenticationEnabled": "true", "authorizationEnabled": "true",
        "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}",
        "connection.failed.authentication.delay.ms": "20",
    })
    with node:
        yield node


@pytest.fixture(scope="module")
def app(secured):
    """User ``app``: PUB|SUB on topic rw, SUB on topic ro, SUB on its group."""
    from gateway_native.client import Admin

    rw, ro, group = unique("T_rw"), unique("T_ro"), unique("C_app")
    with Admin(secured.namesrv_addr, timeout_ms=10_000, credentials=INNER) as a:
        a.create_topic(rw, 2)
        a.create_topic(ro, 2)
        a.update_acl_config("app", "app-secret", topic_perms=f"{rw}=PUB|SUB,{ro}=SUB", group_perms=f"{group}=SUB")
    return {"rw": rw, "ro": ro, "group": group}


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def client_log():
    """What the official client logs (it does not propagate to the root logger): where it reports
    a refused route lookup, with the node's code and message."""
    logger = logging.getLogger("rocketmq-python-client")
    h = _Records()
    logger.addHandler(h)
    try:
        yield h.lines
    finally:
        logger.removeHandler(h)


def config(node, ak: str = "", sk: str = "") -> ClientConfiguration:
    return ClientConfiguration(node.grpc_endpoint, Credentials(ak, sk) if ak else Credentials(), request_timeout=10)


def message(topic: str, body: bytes) -> Message:
    m = Message()
    m.topic = topic
    m.body = body
    return m


def test_allowed_user_sends_and_receives(secured, app):
    cfg = config(secured, "app", "app-secret")
    p = Producer(cfg)
    p.startup()
    try:
        sent = {p.send(message(app["rw"], f"m{i}".encode())).message_id for i in range(3)}
    finally:
        p.shutdown()
    c = SimpleConsumer(cfg, app["group"], {app["rw"]: FilterExpression()}, await_duration=3)
    c.startup()
    try:
        import time

        got: dict[str, bytes] = {}
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for m in c.receive(16, 20):
                got[m.message_id] = m.body
                c.ack(m)
        assert set(got) == sent and sorted(got.values()) == [b"m0", b"m1", b"m2"]
    finally:
        c.shutdown()


@pytest.mark.parametrize("ak,sk,why", [
    ("app", "not-the-secret", "check signature failed for access key app"),
    ("ghost", "whatever", "User:ghost is not found"),
    ("", "", "authentication header is null"),
], ids=["wrong-secret", "unknown-key", "anonymous"])
def test_unauthenticated_clients_are_refused(secured, app, client_log, ak, sk, why):
    p = Producer(config(secured, ak, sk))
    p.startup()
    try:
        with pytest.raises(Exception, match="failed to fetch topic"):
            p.send(message(app["rw"], b"nope"))
    finally:
        p.shutdown()
    # the client reports the node's answer to its route lookup: UNAUTHORIZED with the reason
    refusals = [line for line in client_log if "40100" in line]
    assert refusals and why in refusals[0], client_log[-5:]


def test_user_without_pub_cannot_send(secured, app):
    from rocketmq.v5.exception import ForbiddenException

    p = Producer(config(secured, "app", "app-secret"))
    p.startup()
    try:
        with pytest.raises(ForbiddenException) as exc:  # SUB on the topic: the route is visible, sending is not
            p.send(message(app["ro"], b"nope"))
        assert exc.value.code == 40300 and f"User:app may not WRITE TOPIC {app['ro']}" in str(exc.value)
    finally:
        p.shutdown()


def test_consumer_group_without_sub_cannot_receive(secured, app):
    from rocketmq.v5.exception import ForbiddenException

    c = SimpleConsumer(config(secured, "app", "app-secret"), unique("C_other"), {app["rw"]: FilterExpression()},
                       await_duration=1)
    c.startup()
    try:
        with pytest.raises(ForbiddenException) as exc:
            c.receive(1, 10)
        assert exc.value.code == 40300 and "User:app may not READ GROUP C_other" in str(exc.value)
    finally:
        c.shutdown()


def test_guessing_a_secret_is_throttled_with_too_many_requests(secured, app, client_log):
    """Past the per-user rate of failed checks (engine/security/throttle.py, shared with every
    listener) a signature is not checked: the route lookup answers TOO_MANY_REQUESTS (42900)."""
    p = Producer(config(secured, "guessed", "a-guess"))
    p.startup()
    try:
        for _ in range(12):
            with pytest.raises(Exception, match="failed to fetch topic"):
                p.send(message(app["rw"], b"nope"))
    finally:
        p.shutdown()
    throttled = [line for line in client_log if "42900" in line]
    assert throttled and "too many failed authentications for access key guessed" in throttled[0], client_log[-5:]
