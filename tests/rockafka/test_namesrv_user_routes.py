"""A secured standalone NameServer keeps no users, yet an ordinary user's RocketMQ client gets
its routes from it: a route read signed by an access key the NameServer does not know is
checked by a registered master (signature and DESCRIBE on the topic), so clients of a secured
multi-node cluster need no super-user secret (docs/design/security.md, "Standalone NameServer")."""

from __future__ import annotations

import pytest

from tests.support.node import RunningNode, StandaloneNamesrv

pytestmark = pytest.mark.timeout(180)

SECURED = {"authenticationEnabled": "true", "authorizationEnabled": "true",
           "innerClientAuthenticationCredentials": "node:Inner-Secret-77"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("ns-users")
    ns = StandaloneNamesrv(base, settings=dict(SECURED))
    try:
        node = RunningNode(base / "data", settings={**SECURED, "namesrvAddr": ns.addr,
                                                    "initAuthenticationUser": "admin:admin-pw"})
        with node:
            yield ns, node
    finally:
        ns.stop()


def test_a_user_with_a_grant_gets_routes_from_a_standalone_namesrv_and_others_do_not(cluster):
    from gateway_native.client import Admin, Message, MQClientError, Producer

    ns, node = cluster
    admin = Admin(ns.addr, credentials=("admin", "admin-pw")).start()  # signed by a broker's user, not the inner one
    try:
        admin.create_topic("orders", 2)  # the cluster view and the route come through the NameServer too
        admin.update_acl_config("alice", "alice-secret", topic_perms="orders=PUB")
        admin.update_acl_config("bob", "bob-secret", topic_perms="other=PUB")
    finally:
        admin.shutdown()

    with Producer("p-alice", ns.addr, credentials=("alice", "alice-secret")) as producer:
        assert producer.send(Message("orders", b"routed for alice")).status.name == "SEND_OK"

    # the NameServer refuses the route itself, with the broker's reason
    for who, secret, why in (("bob", "bob-secret", "User:bob may not DESCRIBE TOPIC orders"),
                             ("alice", "not-her-secret", "signature check failed for AccessKey alice")):
        with Producer(f"p-{who}", ns.addr, credentials=(who, secret), send_msg_timeout=3000) as producer:
            with pytest.raises(MQClientError, match=why):
                producer.send(Message("orders", b"no route for this one"))
    log = ns.path.read_text()
    assert "alice-secret" not in log and "bob-secret" not in log
