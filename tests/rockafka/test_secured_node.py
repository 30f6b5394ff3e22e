"""A secured node as the README sets it up, with the certificates ``deploy/dev/make-certs.sh``
makes: TLS only (``tlsServerMode=enforcing``) and client certificates required. The node's
broker registers with its own NameServer over TLS without being told (``tlsEnable`` implied);
``rockafka admin --tls --cert/--key`` logs in with a client certificate; a node whose broker
cannot register with its own NameServer stops with the reason instead of reporting ready
(docs/design/security.md, "Listeners and TLS")."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.node import ROOT, NodeStartError, RunningNode, rockafka_command

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", str(ROOT / "deploy" / "dev" / "make-certs.sh"), "-d", str(d / "ok"), "-u", "admin"],
                   check=True, capture_output=True, timeout=120)
    subprocess.run(["bash", str(ROOT / "deploy" / "dev" / "make-certs.sh"), "-d", str(d / "other")],
                   check=True, capture_output=True, timeout=120)
    return d


def settings(ca_dir, trust_dir) -> dict[str, str]:
    return {"tlsServerMode": "enforcing", "tlsServerCertPath": str(ca_dir / "server.crt"),
            "tlsServerKeyPath": str(ca_dir / "server.key"), "tlsServerTrustCertPath": str(trust_dir / "ca.crt"),
            "tlsServerNeedClientAuth": "require", "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
            "authenticationEnabled": "true", "authorizationEnabled": "true", "initAuthenticationUser": "admin:admin-pw"}


def admin(node, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, "--tls", *args],
                          capture_output=True, text=True, timeout=60)


def test_admin_logs_in_with_a_client_certificate_where_one_is_required(certs, tmp_path):
    ok = certs / "ok"
    with RunningNode(tmp_path / "data", settings=settings(ok, ok)) as node:
        assert "tls_enable_implied" in node.log_path.read_text()
        # no certificate: the TLS handshake is refused, whatever the signature
        out = admin(node, "--access-key", "admin", "--secret-key", "admin-pw", "topics", "list")
        assert out.returncode != 0
        # admin's certificate (CN=admin -> User:admin, the bootstrap super user), no signature
        out = admin(node, "--cert", str(ok / "admin.crt"), "--key", str(ok / "admin.key"), "--ca", str(ok / "ca.crt"),
                    "topics", "create", "orders")
        assert out.returncode == 0, out.stderr
        out = admin(node, "--cert", str(ok / "admin.crt"), "--key", str(ok / "admin.key"), "topics", "list")
        assert out.returncode == 0 and "orders" in out.stdout, out.stderr
        out = admin(node, "--cert", str(ok / "admin.crt"), "topics", "list")
        assert out.returncode != 0 and "--cert and --key go together" in out.stderr


def test_a_node_that_cannot_register_with_its_own_namesrv_fails_instead_of_reporting_ready(certs, tmp_path):
    # client certificates must come from another CA than the one that signed the node's own:
    # its broker's TLS connection to its own NameServer is refused
    node = RunningNode(tmp_path / "data", settings=settings(certs / "ok", certs / "other"), ready_timeout=60)
    with pytest.raises(NodeStartError):
        node.start()
    text = node.log_path.read_text()
    assert "node_ready" not in text
    assert "could not register with this node's own NameServer" in text, text[-3000:]


def test_a_secured_controller_without_inner_credentials_refuses_to_start_with_an_open_raft_port(tmp_path):
    from tests.support.node import free_port

    raft = free_port()
    out = subprocess.run(rockafka_command() + [
        "namesrv", "--host", "127.0.0.1", "--port", str(free_port()), "--data-dir", str(tmp_path / "ns"),
        "--kv-config", str(tmp_path / "ns" / "kv.json"), "--set", "enableControllerInNamesrv=true",
        "--set", f"controllerDLegerPeers=n0-127.0.0.1:{raft}", "--set", "controllerDLegerSelfId=n0",
        "--set", "authenticationEnabled=true"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "innerClientAuthenticationCredentials" in out.stderr and "Raft" in out.stderr


def test_a_listener_bound_to_loopback_is_never_advertised_on_another_address(tmp_path):
    """``advertised_host`` names where remote clients reach the node; a listener bound to
    127.0.0.1 is reachable there only, so Metadata on it names 127.0.0.1."""
    from confluent_kafka.admin import AdminClient

    from tests.support.node import free_port

    node = RunningNode(tmp_path / "data", settings={"advertised_host": "10.255.0.9"})
    node.sasl_port = free_port()
    node.settings["listeners"] = f"PLAINTEXT://127.0.0.1:{node.kafka_port},SASL_PLAINTEXT://127.0.0.1:{node.sasl_port}"
    node.settings["sasl.enabled.mechanisms"] = "PLAIN"
    with node:
        md = AdminClient({"bootstrap.servers": f"127.0.0.1:{node.kafka_port}"}).list_topics(timeout=20)
        assert [(b.host, b.port) for b in md.brokers.values()] == [("127.0.0.1", node.kafka_port)]
