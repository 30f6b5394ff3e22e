"""Admin HTTP: cross-site writes are refused with security on or off, and on a secured node
every route but the health check needs a login; a DLQ resend needs the right to the group
(docs/design/security.md, "Admin HTTP and CLI")."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest

from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(120)


def post(url: str, body: bytes, content_type: str, headers: dict | None = None, auth=None) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": content_type, **(headers or {})})
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"raw": raw.decode("utf-8", "replace")}


def get(url: str, auth=None) -> int:
    req = urllib.request.Request(url)
    if auth:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=20) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


@pytest.fixture(scope="module")
def open_node(tmp_path_factory):
    with RunningNode(tmp_path_factory.mktemp("admin-open") / "data") as n:
        yield n


def test_cross_site_text_plain_dlq_resend_is_refused(open_node):
    # what a page on any site can make a browser send without asking
    code, doc = post(f"{open_node.admin_url}/api/dlq/g1/resend", b'{"msg_id": "X"}', "text/plain")
    assert code == 403 and "application/json" in doc["error"]


def test_foreign_origin_is_refused(open_node):
    code, doc = post(f"{open_node.admin_url}/api/dlq/g1/resend", b'{"msg_id": "X"}', "application/json",
                     {"Origin": "https://evil.example"})
    assert code == 403 and "Origin" in doc["error"]


def test_console_form_without_csrf_token_is_refused(open_node):
    code, doc = post(f"{open_node.admin_url}/dlq/g1/resend", b"msg_id=X", "application/x-www-form-urlencoded")
    assert code == 403 and "CSRF" in doc["error"]


def test_same_site_json_post_still_works(open_node):
    code, doc = post(f"{open_node.admin_url}/api/dlq/g1/resend", b'{"msg_id": "0A"}', "application/json")
    assert code in (400, 404, 502) and "error" in doc  # reached the handler: no such dead letter


def test_admin_binds_loopback_by_default(open_node):
    text = open_node.log_path.read_text()
    assert "admin_http_listening" in text and "host='127.0.0.1'" in text.split("admin_http_listening", 1)[1][:200]


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    settings = {"authenticationEnabled": "true", "authorizationEnabled": "true",
                "initAuthenticationUser": "admin:admin-pw", "innerClientAuthenticationCredentials": "node:node-secret",
                "connection.failed.authentication.delay.ms": "10"}
    from tests.support.node import free_port

    node = RunningNode(tmp_path_factory.mktemp("admin-sec") / "data", settings=settings)
    node.sasl_port = free_port()
    node.settings.update({"listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}",
                          "sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    with node:
        yield node


def test_dlq_resend_over_http_needs_a_login(secured):
    code, _ = post(f"{secured.admin_url}/api/dlq/g1/resend", b'{"msg_id": "0A"}', "application/json")
    assert code == 401
    code, _ = post(f"{secured.admin_url}/api/dlq/g1/resend", b'{"msg_id": "0A"}', "application/json",
                   auth=("admin", "wrong"))
    assert code == 401
    code, doc = post(f"{secured.admin_url}/api/dlq/g1/resend", b'{"msg_id": "0A"}', "application/json",
                     auth=("admin", "admin-pw"))
    assert code in (400, 404, 502), doc  # authorized: the handler answered about the message itself


def test_reads_need_a_login_health_does_not(secured):
    assert get(f"{secured.admin_url}/api/health") == 200
    assert get(f"{secured.admin_url}/api/topics") == 401
    assert get(f"{secured.admin_url}/") == 401
    assert get(f"{secured.admin_url}/api/topics", auth=("admin", "admin-pw")) == 200


def test_user_without_rights_is_forbidden(secured):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{secured.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-pw"})
    up = UserScramCredentialUpsertion("viewer", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"viewer-pw")
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(20)
    assert get(f"{secured.admin_url}/api/topics", auth=("viewer", "viewer-pw")) == 403  # no DESCRIBE on the cluster
    code, doc = post(f"{secured.admin_url}/api/dlq/g1/resend", b'{"msg_id": "0A"}', "application/json",
                     auth=("viewer", "viewer-pw"))
    assert code == 403 and "may not READ GROUP g1" in doc["error"]
