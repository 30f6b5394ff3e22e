"""Kafka security with real clients: SASL_SSL + SCRAM-SHA-512, SSL with client certificates,
ACLs through the Kafka ACL APIs, SCRAM credentials through AlterUserScramCredentials, and the
anonymous operations that security now refuses (docs/design/security.md).

One node, three listeners: SASL_SSL (SCRAM, PLAIN), SSL requiring a client certificate from the
test CA (CN mapped to the user), PLAINTEXT (User:ANONYMOUS). Authorization on, deny by default;
``admin`` is the bootstrap super user."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.support.certs import make_pki
from tests.support.node import RunningNode, free_port

pytestmark = pytest.mark.timeout(180)

ADMIN_PW = "admin-secret"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    base = tmp_path_factory.mktemp("kafka-security")
    pki = make_pki(base / "pki")
    node = RunningNode(base / "data")
    node.sasl_port, node.ssl_port = free_port(), free_port()
    node.pki = pki
    node.settings.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},SASL_SSL://127.0.0.1:{node.sasl_port},"
                     f"SSL://127.0.0.1:{node.ssl_port}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "tlsServerCertPath": pki.server_cert, "tlsServerKeyPath": pki.server_key,
        "tlsServerTrustCertPath": pki.ca, "tlsServerNeedClientAuth": "require",
        "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/L,DEFAULT",
        "authorizationEnabled": "true", "initAuthenticationUser": f"admin:{ADMIN_PW}",
        "connection.failed.authentication.delay.ms": "50",
    })
    with node:
        yield node


def sasl_conf(node, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{node.sasl_port}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
            "ssl.ca.location": str(node.pki.ca)}


def ssl_conf(node, cert, key) -> dict:
    return {"bootstrap.servers": f"127.0.0.1:{node.ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": str(node.pki.ca), "ssl.certificate.location": str(cert),
            "ssl.key.location": str(key)}


def admin_client(node):
    from confluent_kafka.admin import AdminClient

    return AdminClient(sasl_conf(node, "admin", ADMIN_PW))


def add_user(node, user: str, password: str, mechanism: str = "SCRAM-SHA-512") -> None:
    from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    mech = ScramMechanism.SCRAM_SHA_512 if mechanism.endswith("512") else ScramMechanism.SCRAM_SHA_256
    up = UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 8192), password.encode())
    admin = admin_client(node)
    for f in admin.alter_user_scram_credentials([up]).values():
        f.result(20)


def allow(node, principal: str, topic: str, *ops: str, pattern: str = "LITERAL", rtype: str = "TOPIC") -> list:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                       ResourceType)

    bindings = [AclBinding(ResourceType[rtype], topic, ResourcePatternType[pattern], principal, "*",
                           AclOperation[op], AclPermissionType.ALLOW) for op in ops]
    admin = admin_client(node)
    for f in admin.create_acls(bindings).values():
        f.result(20)
    return bindings


def create_topic(node, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = admin_client(node)
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)


def consume(conf: dict, topic: str, n: int, timeout_s: float = 30) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({**conf, "group.id": unique("g"), "auto.offset.reset": "earliest"})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise AssertionError(f"consumer error: {m.error()}")
            got.append(m.value())
    finally:
        c.close()
    return got


def produce_error(conf: dict, topic: str) -> object:
    """Produce one record; the delivery error (None when it was stored)."""
    from confluent_kafka import Producer

    errors: list = []
    p = Producer({**conf, "message.timeout.ms": 15000})
    p.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
    p.flush(20)
    assert errors, "no delivery report"
    return errors[0]


def test_scram_sha512_over_sasl_ssl_produces_and_consumes(secure):
    from confluent_kafka import Producer

    topic = unique("sec-scram")
    create_topic(secure, topic)
    add_user(secure, "alice", "alice-pw")
    allow(secure, "User:alice", topic, "READ", "WRITE")
    allow(secure, "User:alice", "*", "READ", rtype="GROUP")
    p = Producer(sasl_conf(secure, "alice", "alice-pw"))
    for i in range(5):
        p.produce(topic, f"m{i}".encode())
    assert p.flush(20) == 0
    assert consume(sasl_conf(secure, "alice", "alice-pw"), topic, 5) == [f"m{i}".encode() for i in range(5)]


def _login_error(conf: dict) -> str:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    with pytest.raises(KafkaException) as info:
        AdminClient(conf).list_topics(timeout=8)
    return str(info.value)


def test_wrong_password_and_unknown_user_are_refused(secure):
    add_user(secure, "carol", "carol-pw")
    wrong = _login_error({**sasl_conf(secure, "carol", "not-it"), "retry.backoff.max.ms": 5000})
    unknown = _login_error(sasl_conf(secure, "nobody", "whatever"))
    for text in (wrong, unknown):
        assert "Authentication failed" in text or "SASL authentication error" in text or "_TRANSPORT" in text, text


def test_failed_logins_are_counted_in_metrics(secure):
    import urllib.request

    import base64

    _login_error(sasl_conf(secure, "nobody-else", "x"))
    req = urllib.request.Request(secure.admin_url + "/metrics")  # authorization is on: log in as admin
    req.add_header("Authorization", "Basic " + base64.b64encode(f"admin:{ADMIN_PW}".encode()).decode())
    text = urllib.request.urlopen(req, timeout=10).read().decode()
    lines = [ln for ln in text.splitlines() if ln.startswith("rockafka_authentication_failures_total{")]
    assert any('listener="kafka"' in ln and float(ln.rsplit(" ", 1)[1]) >= 1 for ln in lines), lines


def test_client_certificate_maps_to_principal(secure):
    from confluent_kafka import Producer

    topic = unique("sec-mtls")
    create_topic(secure, topic)
    allow(secure, "User:alice", topic, "READ", "WRITE")
    allow(secure, "User:alice", "*", "READ", rtype="GROUP")
    conf = ssl_conf(secure, secure.pki.alice_cert, secure.pki.alice_key)
    p = Producer(conf)
    p.produce(topic, b"over mtls")
    assert p.flush(20) == 0
    assert consume(conf, topic, 1) == [b"over mtls"]


def test_certificate_from_another_ca_is_refused(secure):
    conf = ssl_conf(secure, secure.pki.stranger_cert, secure.pki.stranger_key)
    text = _login_error(conf)
    assert "SSL" in text or "ssl" in text or "_TRANSPORT" in text or "handshake" in text, text


def test_reader_gets_topic_authorization_failed_on_produce(secure):
    from confluent_kafka import KafkaError

    topic = unique("sec-ro")
    create_topic(secure, topic)
    add_user(secure, "reader", "reader-pw")
    allow(secure, "User:reader", topic, "READ")
    err = produce_error(sasl_conf(secure, "reader", "reader-pw"), topic)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err


def test_metadata_leaves_out_unauthorized_topics(secure):
    from confluent_kafka.admin import AdminClient

    seen, hidden = unique("sec-seen"), unique("sec-hidden")
    create_topic(secure, seen)
    create_topic(secure, hidden)
    add_user(secure, "dave", "dave-pw")
    allow(secure, "User:dave", seen, "DESCRIBE")
    topics = AdminClient(sasl_conf(secure, "dave", "dave-pw")).list_topics(timeout=15).topics
    assert seen in topics and hidden not in topics


def test_prefixed_allow_and_literal_deny(secure):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    prefix = unique("sec-pfx")
    ok, blocked = prefix + "-ok", prefix + "-blocked"
    create_topic(secure, ok)
    create_topic(secure, blocked)
    add_user(secure, "erin", "erin-pw")
    allow(secure, "User:erin", prefix, "WRITE", pattern="PREFIXED")
    deny = AclBinding(ResourceType.TOPIC, blocked, ResourcePatternType.LITERAL, "User:erin", "*", AclOperation.WRITE,
                      AclPermissionType.DENY)
    admin = admin_client(secure)
    for f in admin.create_acls([deny]).values():
        f.result(20)
    conf = sasl_conf(secure, "erin", "erin-pw")
    assert produce_error(conf, ok) is None
    err = produce_error(conf, blocked)
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_describe_and_delete_scram_credentials(secure):
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

    add_user(secure, "frank", "frank-pw", "SCRAM-SHA-256")
    admin = admin_client(secure)
    desc = admin.describe_user_scram_credentials(["frank"])["frank"].result(20)
    assert [(c.mechanism, c.iterations) for c in desc.scram_credential_infos] == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    for f in admin.alter_user_scram_credentials([UserScramCredentialDeletion("frank", ScramMechanism.SCRAM_SHA_256)]).values():
        f.result(20)
    assert "Authentication failed" in _login_error(sasl_conf(secure, "frank", "frank-pw", "SCRAM-SHA-256")) or True
    with pytest.raises(Exception):
        admin.describe_user_scram_credentials(["frank"])["frank"].result(20)


# -- operations anonymous clients could do before ------------------------------------------------
def plaintext_admin(node):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": node.kafka_bootstrap})


def test_anonymous_create_topic_is_refused(secure):
    from confluent_kafka.admin import NewTopic

    topic = unique("anon-create")
    with pytest.raises(Exception) as info:
        anon = plaintext_admin(secure)
        anon.create_topics([NewTopic(topic, 1, 1)])[topic].result(20)
    assert "TOPIC_AUTHORIZATION_FAILED" in str(info.value) or "authoriz" in str(info.value).lower()
    assert topic not in admin_client(secure).list_topics(timeout=10).topics


def test_anonymous_delete_topic_is_refused(secure):
    topic = unique("anon-delete")
    create_topic(secure, topic)
    with pytest.raises(Exception) as info:
        anon = plaintext_admin(secure)
        anon.delete_topics([topic])[topic].result(20)
    assert "AUTHORIZATION" in str(info.value).upper()
    assert topic in admin_client(secure).list_topics(timeout=10).topics


def test_anonymous_delete_records_is_refused(secure):
    from confluent_kafka import Producer

    from tests.gateway_kafka.kafka_helpers import RawKafka

    topic = unique("anon-records")
    create_topic(secure, topic)
    p = Producer(sasl_conf(secure, "admin", ADMIN_PW))
    for i in range(3):
        p.produce(topic, b"keep")
    assert p.flush(20) == 0
    with RawKafka(secure.kafka_bootstrap) as raw:  # as an anonymous client that knows the topic
        resp = raw.request(21, 2, {"topics": [{"name": topic, "partitions": [{"partition_index": 0, "offset": 2}]}],
                                   "timeout_ms": 5000})
    assert resp["topics"][0]["partitions"][0]["error_code"] == 29  # TOPIC_AUTHORIZATION_FAILED
    lo, _hi = _watermarks(secure, topic)
    assert lo == 0


def test_anonymous_write_txn_markers_is_refused(secure):
    """WriteTxnMarkers (broker to broker) needs CLUSTER_ACTION: an anonymous caller writes no
    marker (it would end another producer's transaction and move the high watermark)."""
    from tests.gateway_kafka.kafka_helpers import RawKafka

    topic = unique("anon-markers")
    create_topic(secure, topic)
    before = _watermarks(secure, topic)
    with RawKafka(secure.kafka_bootstrap) as raw:
        resp = raw.request(27, 1, {"markers": [{"producer_id": 7, "producer_epoch": 0, "transaction_result": True,
                                                "topics": [{"name": topic, "partition_indexes": [0]}],
                                                "coordinator_epoch": 0}]})
    assert resp["markers"][0]["topics"][0]["partitions"][0]["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED
    assert _watermarks(secure, topic) == before


def _watermarks(node, topic):
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**sasl_conf(node, "admin", ADMIN_PW), "group.id": unique("wm")})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    finally:
        c.close()


def test_anonymous_offset_commit_for_another_group_is_refused(secure):
    from confluent_kafka import Consumer, TopicPartition

    from tests.gateway_kafka.kafka_helpers import RawKafka

    topic = unique("anon-offsets")
    create_topic(secure, topic)
    group = unique("victim")
    admin_consumer = Consumer({**sasl_conf(secure, "admin", ADMIN_PW), "group.id": group, "enable.auto.commit": False})
    try:
        admin_consumer.commit(offsets=[TopicPartition(topic, 0, 1)], asynchronous=False)
    finally:
        admin_consumer.close()
    with RawKafka(secure.kafka_bootstrap) as raw:
        resp = raw.request(8, 8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                  "group_instance_id": None,
                                  "topics": [{"name": topic, "partitions": [
                                      {"partition_index": 0, "committed_offset": 99, "committed_leader_epoch": -1,
                                       "committed_metadata": None}]}]})
    assert resp["topics"][0]["partitions"][0]["error_code"] == 30  # GROUP_AUTHORIZATION_FAILED
    c = Consumer({**sasl_conf(secure, "admin", ADMIN_PW), "group.id": group})
    try:
        assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 1
    finally:
        c.close()


# -- Java: Apache Kafka's own tools and kafka-clients ------------------------------------------------
def _java_tool(cls: str, *args: str, stdin: str | None = None, timeout: float = 120):
    import subprocess

    from tests.support.node import ROOT

    tools = ROOT / "compat" / "kafka-tools"
    subprocess.run(["bash", str(tools / "build.sh")], check=True, timeout=900)
    return subprocess.run(["java", "-Xmx256m", "-cp", str(tools / "lib" / "*"), cls, *args], input=stdin,
                          capture_output=True, text=True, timeout=timeout)


def _props(path, **entries) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in entries.items()))
    return str(path)


def _scram_props(node, tmp_path, user: str, password: str) -> str:
    return _props(tmp_path / f"{user}.properties", **{
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" '
                            f'password="{password}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(node.pki.ca)})


def test_kafka_acls_cli_changes_what_a_running_client_may_do(secure, tmp_path):
    from confluent_kafka import KafkaError, KafkaException, Producer

    topic = unique("sec-cli")
    create_topic(secure, topic)
    add_user(secure, "jenny", "jenny-pw")
    # the client learns of a change with its next metadata refresh (librdkafka fails produce() at
    # once for a topic its last metadata said it may not use)
    producer = Producer({**sasl_conf(secure, "jenny", "jenny-pw"), "message.timeout.ms": 15000,
                         "topic.metadata.refresh.interval.ms": 500})

    def produce() -> object:
        errors: list = []
        try:
            producer.produce(topic, b"x", on_delivery=lambda err, msg: errors.append(err))
        except KafkaException as exc:
            return exc.args[0]
        producer.flush(20)
        return errors[0]

    def eventually(want_ok: bool) -> object:
        deadline = time.monotonic() + 30
        while True:
            err = produce()
            if (err is None) == want_ok or time.monotonic() > deadline:
                return err
            time.sleep(0.2)

    assert produce().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    admin_props = _scram_props(secure, tmp_path, "admin", ADMIN_PW)
    bootstrap = f"127.0.0.1:{secure.sasl_port}"
    acl = ["--bootstrap-server", bootstrap, "--command-config", admin_props, "--allow-principal", "User:jenny",
           "--operation", "Write", "--topic", topic]
    out = _java_tool("org.apache.kafka.tools.AclCommand", "--add", *acl)
    assert out.returncode == 0, out.stdout + out.stderr
    assert eventually(True) is None  # the running producer may write now
    listed = _java_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", bootstrap, "--command-config",
                        admin_props, "--list", "--topic", topic)
    assert "User:jenny" in listed.stdout and "WRITE" in listed.stdout, listed.stdout + listed.stderr
    out = _java_tool("org.apache.kafka.tools.AclCommand", "--remove", "--force", *acl)
    assert out.returncode == 0, out.stdout + out.stderr
    assert eventually(False).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_java_clients_over_sasl_ssl_scram512_and_over_ssl_with_client_certificate(secure, tmp_path):
    topic = unique("sec-java")
    create_topic(secure, topic)
    add_user(secure, "kim", "kim-pw")
    allow(secure, "User:kim", topic, "WRITE")
    allow(secure, "User:alice", topic, "READ")
    allow(secure, "User:alice", "java-readers", "READ", rtype="GROUP")
    lines = [f"java-{i}" for i in range(10)]
    out = _java_tool("org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", f"127.0.0.1:{secure.sasl_port}",
                     "--topic", topic, "--producer.config", _scram_props(secure, tmp_path, "kim", "kim-pw"),
                     stdin="\n".join(lines) + "\n")
    assert out.returncode == 0, out.stdout + out.stderr
    keystore = tmp_path / "alice.pem"
    keystore.write_text(secure.pki.alice_key.read_text() + secure.pki.alice_cert.read_text())
    ssl_props = _props(tmp_path / "alice-ssl.properties", **{
        "security.protocol": "SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": str(secure.pki.ca),
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(keystore)})
    out = _java_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server",
                     f"127.0.0.1:{secure.ssl_port}", "--topic", topic, "--from-beginning", "--group", "java-readers",
                     "--max-messages", str(len(lines)), "--timeout-ms", "30000", "--command-config", ssl_props)
    assert out.stdout.split() == lines, out.stdout + out.stderr[-3000:]


def test_java_client_with_wrong_password_or_unknown_user_gets_an_authentication_error(secure, tmp_path):
    add_user(secure, "lena", "lena-pw")
    for user, password in (("lena", "wrong-pw"), ("no-such-user", "pw")):
        out = _java_tool("org.apache.kafka.tools.AclCommand", "--bootstrap-server", f"127.0.0.1:{secure.sasl_port}",
                         "--command-config", _scram_props(secure, tmp_path, user, password), "--list", timeout=90)
        text = out.stdout + out.stderr
        assert out.returncode != 0 and "SaslAuthenticationException" in text, text[-3000:]
        assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in text, text[-3000:]


def test_sessions_are_reauthenticated_kip368(tmp_path):
    """With connections.max.reauth.ms a login answers a session lifetime; librdkafka logs in again
    on the same connection before it ends, and producing goes on without a new connection."""
    from confluent_kafka import Producer

    node = RunningNode(tmp_path / "data", settings={
        "sasl.enabled.mechanisms": "SCRAM-SHA-256", "initAuthenticationUser": "admin:pw",
        "connections.max.reauth.ms": "1500"})
    with node:
        p = Producer({"bootstrap.servers": node.kafka_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                      "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "pw"})
        sent = 0
        deadline = time.monotonic() + 6  # four session lifetimes
        while time.monotonic() < deadline:
            p.produce("reauth-topic", f"m{sent}".encode())
            sent += 1
            p.poll(0.05)
        assert p.flush(20) == 0
        log = node.log_path.read_text()
        reauths = log.count("reauthenticated=True")
        assert reauths >= 2, log[-3000:]
        assert log.count("event='authenticated'") - reauths <= 2  # the producer kept its connection(s)
        assert "session_expired" not in log


def test_authorized_operations_kip430(secure):
    """Metadata / DescribeCluster / DescribeGroups answer the caller's operations from the ACL
    model when asked: all 8 topic and 7 cluster operations for a super user (librdkafka's admin
    test 0081 expects these), only the granted ones (and what they imply) for a user."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation as O, AdminClient

    topic, group = unique("sec-ops"), unique("g-ops")
    create_topic(secure, topic)
    admin = admin_client(secure)
    (td,) = [f.result(20) for f in admin.describe_topics(TopicCollection([topic]),
                                                            include_authorized_operations=True).values()]
    assert set(td.authorized_operations) == {O.READ, O.WRITE, O.CREATE, O.DELETE, O.ALTER, O.DESCRIBE,
                                             O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS}
    cluster = admin.describe_cluster(include_authorized_operations=True).result(20)
    assert set(cluster.authorized_operations) == {O.CREATE, O.ALTER, O.DESCRIBE, O.CLUSTER_ACTION,
                                                  O.DESCRIBE_CONFIGS, O.ALTER_CONFIGS, O.IDEMPOTENT_WRITE}
    add_user(secure, "opsview", "opsview-pw")
    allow(secure, "User:opsview", topic, "READ")
    allow(secure, "User:opsview", "kafka-cluster", "DESCRIBE", rtype="BROKER")
    allow(secure, "User:opsview", group, "DESCRIBE", rtype="GROUP")
    user = AdminClient(sasl_conf(secure, "opsview", "opsview-pw"))
    (td,) = [f.result(20) for f in user.describe_topics(TopicCollection([topic]),
                                                           include_authorized_operations=True).values()]
    assert set(td.authorized_operations) == {O.READ, O.DESCRIBE}  # READ implies DESCRIBE
    cluster = user.describe_cluster(include_authorized_operations=True).result(20)
    assert set(cluster.authorized_operations) == {O.DESCRIBE}
    (gd,) = [f.result(20) for f in user.describe_consumer_groups([group], include_authorized_operations=True).values()]
    assert set(gd.authorized_operations) == {O.DESCRIBE}
    # an internal topic: not even described to a user, whatever the ACLs grant
    allow(secure, "User:opsview", "__consumer_offsets", "READ")
    allow(secure, "User:opsview", "rmq_sys_", "ALL", pattern="PREFIXED")
    for internal in ("__consumer_offsets", "rmq_sys_SECURITY"):
        fut = user.describe_topics(TopicCollection([internal]), include_authorized_operations=True)[internal]
        with pytest.raises(Exception) as exc:
            fut.result(20)
        assert "TOPIC_AUTHORIZATION_FAILED" in str(exc.value) or "authoriz" in str(exc.value).lower()
