"""Replication between brokers is authenticated and encrypted: a slave with the cluster's inner
credentials follows its master over TLS; a stranger who reaches the HA port cannot pull the
commitlog — plaintext is closed on an enforcing port, an unsigned or wrongly signed HELLO over
TLS gets WELCOME_REFUSED and the connection is closed (docs/design/security.md)."""

from __future__ import annotations

import socket
import ssl
import time

import pytest

from engine.ha import protocol as P
from engine.security import hello_signature
from tests.support.group import BrokerGroup, http_json

pytestmark = pytest.mark.timeout(240)

INNER = ("rockafka-node", "inner-secret")
ADMIN = ("admin", "admin-pw")


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    settings = {"authenticationEnabled": "true", "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}",
                "initAuthenticationUser": f"{ADMIN[0]}:{ADMIN[1]}", "tlsServerMode": "enforcing", "tlsEnable": "true"}
    namesrv = {"authenticationEnabled": "true", "innerClientAuthenticationCredentials": f"{INNER[0]}:{INNER[1]}",
               "tlsServerMode": "enforcing"}
    with BrokerGroup(tmp_path_factory.mktemp("ha-sec"), role="SYNC_MASTER", settings=settings, admin_auth=ADMIN,
                     namesrv_settings=namesrv) as g:
        yield g


def _hello(identity: dict) -> bytes:
    return P.encode_hello(P.Hello(P.PROTOCOL_VERSION, 1 << 30, 7, identity))


def _tls(sock: socket.socket) -> ssl.SSLSocket:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx.wrap_socket(sock)


def _welcome_then_closed(sock) -> P.Welcome:
    reader = P.FrameReader()
    sock.settimeout(10)
    welcome = None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        reader.feed(data)
        for kind, payload in reader.frames():
            assert kind == P.WELCOME
            welcome = P.decode_welcome(payload)
    assert welcome is not None, "no WELCOME before the connection closed"
    return welcome


def test_slave_follows_master_over_tls_with_inner_credentials(group):
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": group.master.kafka_bootstrap, "acks": "all"})
    for i in range(20):
        p.produce("ha-sec-topic", f"m{i}".encode())
    assert p.flush(30) == 0
    group.wait_caught_up(group.slaves[0])
    slaves = group.ha(group.master)["slaves"]
    assert [s["inSync"] for s in slaves] == [True]


def test_plaintext_stranger_is_closed(group):
    with socket.create_connection(("127.0.0.1", group.master.ha_port), timeout=10) as s:
        s.sendall(_hello({"brokerName": "broker-a"}))
        s.settimeout(10)
        assert s.recv(65536) == b""  # closed, nothing streamed


def test_unsigned_hello_over_tls_is_refused(group):
    with _tls(socket.create_connection(("127.0.0.1", group.master.ha_port), timeout=10)) as s:
        s.sendall(_hello({"brokerName": "broker-a"}))
        w = _welcome_then_closed(s)
    assert w.status == P.WELCOME_REFUSED and "authentication failed" in w.reason


def test_wrongly_signed_hello_is_refused_and_counted(group):
    identity = {"brokerName": "broker-a", "brokerId": 7}
    identity["auth"] = hello_signature((INNER[0], "guessed"), P.identity_bytes(identity))
    with _tls(socket.create_connection(("127.0.0.1", group.master.ha_port), timeout=10)) as s:
        s.sendall(_hello(identity))
        w = _welcome_then_closed(s)
    assert w.status == P.WELCOME_REFUSED and "signature check failed" in w.reason
    text = _metrics(group)
    assert any(ln.startswith('rockafka_authentication_failures_total{listener="ha"') for ln in text.splitlines())


def _metrics(group) -> str:
    import base64
    import urllib.request

    req = urllib.request.Request(group.master.admin_url + "/metrics")
    req.add_header("Authorization", "Basic " + base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode())
    return urllib.request.urlopen(req, timeout=10).read().decode()


def test_admin_http_needs_a_login(group):
    import urllib.error

    with pytest.raises(urllib.error.HTTPError) as info:
        http_json(group.master.admin_url + "/api/ha")
    assert info.value.code == 401 and "Basic" in info.value.headers.get("WWW-Authenticate", "")
    with pytest.raises(urllib.error.HTTPError) as info:
        http_json(group.master.admin_url + "/api/ha", auth=(ADMIN[0], "wrong"))
    assert info.value.code == 401
    assert http_json(group.master.admin_url + "/api/ha", auth=ADMIN)["brokerRole"] == "SYNC_MASTER"
