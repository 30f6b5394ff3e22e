"""Credentials and ACLs live in the log: they survive a restart, reach a slave by replication
(which refuses changes), a snapshot record replaces what came before it, and retention keeps the
last snapshot and what follows while letting older segments go (docs/design/security.md)."""

from __future__ import annotations

import time

import pytest

from engine import security as S
from engine.config import BrokerConfig, NodeConfig
from engine.message import Message
from engine.store import MessageStore
from engine_support import small_config
from tests.support.node import free_port


def wait_until(cond, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def binding(name="orders", principal="User:bob", op=S.Operation.READ, pattern=S.PatternType.LITERAL):
    return S.AclBinding(S.ResourceType.TOPIC, pattern, name, principal, "*", op, S.Permission.ALLOW)


def node_config(**security) -> NodeConfig:
    cfg = NodeConfig()
    for k, v in security.items():
        setattr(cfg.security, k, v)
    return cfg


@pytest.fixture
def stores(tmp_path):
    made: list[MessageStore] = []

    def make(name="master", **cfg) -> MessageStore:
        role = cfg.pop("broker_role", "ASYNC_MASTER")
        bc = BrokerConfig(ha_listen_port=free_port() if role != "SLAVE" else 0, broker_id=1 if role == "SLAVE" else 0)
        s = MessageStore(small_config(tmp_path / name, broker_role=role, **cfg), broker_config=bc)
        s.start()
        made.append(s)
        return s
    yield make
    for s in reversed(made):
        svc = getattr(s, "_security_service", None)
        if svc is not None:
            svc.stop()
        s.shutdown()


def test_users_and_acls_survive_a_restart_and_no_password_is_stored(stores, tmp_path):
    m = stores()
    cfg = node_config(init_authentication_user="admin:admin-pw", authorization_enabled=True)
    sec = S.for_store(m, cfg)
    sec.upsert_scram("alice", S.ScramCredential.from_password("SCRAM-SHA-512", "alice-pw"))
    sec.create_acls([binding(), binding("pay-", op=S.Operation.WRITE, pattern=S.PatternType.PREFIXED)])
    sec.set_secret("bob", "bob-secret")
    sec.stop()
    m.shutdown()
    raw = b"".join(p.read_bytes() for p in (tmp_path / "master" / "commitlog").iterdir())
    assert b"alice-pw" not in raw and b"admin-pw" not in raw  # salted keys only
    assert b"bob-secret" not in raw  # sealed with the key beside the data directory
    key_file = tmp_path / "rockafka-auth.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    m2 = MessageStore(m.config, broker_config=m.broker_config)
    m2.start()
    try:
        sec2 = S.SecurityService(m2, cfg)
        sec2.start()
        assert sec2.verify_password("alice", b"alice-pw") and not sec2.verify_password("alice", b"x")
        assert sec2.verify_password("admin", b"admin-pw")
        assert sec2.authorize("User:bob", S.Operation.READ, S.ResourceType.TOPIC, "orders")
        assert sec2.authorize("User:bob", S.Operation.WRITE, S.ResourceType.TOPIC, "pay-eu")
        assert not sec2.authorize("User:bob", S.Operation.WRITE, S.ResourceType.TOPIC, "orders")
        assert sec2.secret_of("bob") == "bob-secret"
        sec2.stop()
    finally:
        m2.shutdown()


def test_slave_follows_the_masters_security_state_and_refuses_changes(stores):
    m = stores(broker_role="ASYNC_MASTER")
    sec = S.for_store(m, node_config(authorization_enabled=True))
    sec.create_acls([binding()])
    s = stores("slave", broker_role="SLAVE", ha_master_address=f"127.0.0.1:{m.ha.port}")
    slave_sec = S.for_store(s, node_config(authorization_enabled=True))
    wait_until(lambda: slave_sec.authorize("User:bob", S.Operation.READ, S.ResourceType.TOPIC, "orders"),
               what="the slave to know the ACL")
    sec.delete_acls([S.AclFilter(principal="User:bob")])
    wait_until(lambda: not slave_sec.authorize("User:bob", S.Operation.READ, S.ResourceType.TOPIC, "orders"),
               what="the slave to drop the ACL")
    with pytest.raises(S.SecurityStateError, match="slave"):
        slave_sec.create_acls([binding("other")])


def test_a_snapshot_replaces_what_came_before_and_retention_keeps_it(stores):
    m = stores(mapped_file_size_commit_log=64 * 1024)
    sec = S.for_store(m, node_config(authorization_enabled=True))
    sec.create_acls([binding()])
    first = m.commitlog.min_offset
    for i in range(600):  # fill several segments after the security records
        m.put_message(Message(topic="filler", body=b"x" * 400, queue_id=0))
    guard = sec.state.log.needed_commitlog_offset(sec.state.snapshot_position)
    assert guard is not None and guard <= first + 4096  # the records are still needed
    sec.state.write_snapshot()
    assert sec.state.snapshot_position > 0
    after = sec.state.log.needed_commitlog_offset(sec.state.snapshot_position)
    assert after is not None and after > guard  # older segments may go now
    m.config.file_reserved_time = 0
    m.clean_expired_files(force=True)
    assert m.commitlog.min_offset > first  # retention deleted the segment of the first records
    fresh = S.SecurityService(m, node_config(authorization_enabled=True))
    fresh.state.start()  # replays from the snapshot: nothing lost
    assert fresh.authorize("User:bob", S.Operation.READ, S.ResourceType.TOPIC, "orders")
    fresh.state.stop()


def test_rocketmq_users_have_one_password_a_type_and_a_status_that_survive_a_restart(stores, tmp_path):
    """ACL 2.0 users (mqadmin createUser): the password signs remoting/gRPC requests and logs in
    over SCRAM; a Super user may do everything; a disabled one authenticates nowhere; the profile
    survives a restart and a snapshot."""
    m = stores()
    cfg = node_config(authorization_enabled=True)
    sec = S.for_store(m, cfg)
    sec.create_user("dave", "dave-pw", "Super", None)
    sec.create_user("erin", "erin-pw", None, None)
    with pytest.raises(S.CredentialError, match="The user is existed"):
        sec.create_user("erin", "x", None, None)
    assert sec.secret_of("dave") == "dave-pw" and sec.verify_password("dave", b"dave-pw")
    assert sec.authorize("User:dave", S.Operation.ALTER, S.ResourceType.CLUSTER, S.CLUSTER_NAME)
    assert not sec.authorize("User:erin", S.Operation.READ, S.ResourceType.TOPIC, "orders")  # deny by default
    sec.update_user("erin", None, None, "disable")
    assert sec.secret_of("erin") is None and not sec.verify_password("erin", b"erin-pw")
    assert sec.scram_credential("erin", "SCRAM-SHA-256") is None
    sec.state.write_snapshot()
    sec.stop()
    m.shutdown()
    m2 = MessageStore(m.config, broker_config=m.broker_config)
    m2.start()
    try:
        sec2 = S.SecurityService(m2, cfg)
        sec2.start()
        assert sec2.secret_of("dave") == "dave-pw"  # sealed in the log, opened with the key file
        assert sec2.user_info("dave") == {"username": "dave", "password": "******", "userType": "Super",
                                          "userStatus": "enable"}
        assert sec2.user_info("erin")["userStatus"] == "disable" and sec2.secret_of("erin") is None
        assert sec2.delete_user("dave") and sec2.user_info("dave") is None
        assert not sec2.authorize("User:dave", S.Operation.ALTER, S.ResourceType.CLUSTER, S.CLUSTER_NAME)
        sec2.stop()
    finally:
        m2.shutdown()


def test_secrets_in_clear_from_an_earlier_version_are_resealed_at_start_and_a_rotated_key_reseals_all(stores, tmp_path):
    """Format-1 ``secret`` records (the secret in clear) still open, and a master's start writes
    them sealed (a snapshot replay starts from); a key rotation re-seals every secret under the
    new key through the one writer and drops the old key from the key file."""
    m = stores()
    cfg = node_config()
    sec = S.for_store(m, cfg)
    sec.state.write([("secret", {"v": 1, "user": "old", "secret": "old-clear-secret"})])  # as 1.x wrote it
    assert sec.state.reseal_needed == {"old"}
    sec.stop()
    m.shutdown()
    m2 = MessageStore(m.config, broker_config=m.broker_config)
    m2.start()
    try:
        sec2 = S.SecurityService(m2, cfg)
        sec2.start()
        assert sec2.secret_of("old") == "old-clear-secret" and not sec2.state.reseal_needed
        last = list(sec2.state.log.read_from(sec2.state.snapshot_position))
        assert last[0][1] == "snapshot" and "old-clear-secret" not in str(last[0][2])
        key_file = tmp_path / "rockafka-auth.key"
        kid_before = sec2.box.current_kid
        sec2.set_secret("new", "new-secret")
        kid = sec2.rotate_key()
        assert kid != kid_before and kid_before not in key_file.read_text() and kid in key_file.read_text()
        sec2.stop()
        sec3 = S.SecurityService(m2, cfg)  # replays with the rotated key file only
        sec3.start()
        assert sec3.secret_of("old") == "old-clear-secret" and sec3.secret_of("new") == "new-secret"
        assert not sec3.state.reseal_needed
        sec3.stop()
    finally:
        m2.shutdown()


def test_a_node_without_the_key_keeps_the_sealed_secrets_it_cannot_open(stores, tmp_path):
    """A promoted slave whose key file was not copied cannot open the secrets, and must not drop
    them: its snapshots carry them sealed; with the key back they open again."""
    m = stores()
    sec = S.for_store(m, node_config())
    sec.set_secret("carol", "carol-secret")
    sec.stop()
    keyless = node_config(auth_secret_key_path=str(tmp_path / "elsewhere" / "other.key"))
    sec2 = S.SecurityService(m, keyless)
    sec2.start()
    try:
        assert sec2.secret_of("carol") is None and "carol" in sec2.state.users()
        assert sec2.user_info("carol")["password"] == "******"
        sec2.set_secret("dave", "dave-secret")  # sealed with the other key
        sec2.state.write_snapshot()
    finally:
        sec2.stop()
    sec3 = S.SecurityService(m, node_config())  # the original key file again
    sec3.start()
    try:
        assert sec3.secret_of("carol") == "carol-secret"
        assert sec3.secret_of("dave") is None  # sealed with the key only the keyless node had
    finally:
        sec3.stop()
