"""The read rule of the one policy model (engine/security/reads.py): internal topics are a super
user's only whatever the ACLs grant, a retry / DLQ topic is its group's, and the security
records are refused even with authorization off."""

from __future__ import annotations

import pytest

from engine import security as S
from engine.config import NodeConfig
from engine.security.reads import read_resource

INTERNAL = ["rmq_sys_SECURITY", "__consumer_offsets", "__transaction_state", "SCHEDULE_TOPIC_XXXX",
            "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "rmq_sys_REVIVE_LOG_c1",
            "RMQ_SYS_TRACE_TOPIC"]


def service(authorization: bool) -> S.SecurityService:
    cfg = NodeConfig()
    cfg.security.authorization_enabled = authorization
    cfg.security.super_users = "User:root"
    svc = S.SecurityService(None, cfg)
    everything = [S.AclBinding(rt, pt, name, "User:alice", "*", S.Operation.ALL, S.Permission.ALLOW)
                  for rt, pt, name in ((S.ResourceType.TOPIC, S.PatternType.LITERAL, "*"),
                                       (S.ResourceType.TOPIC, S.PatternType.PREFIXED, "rmq_sys_"),
                                       (S.ResourceType.TOPIC, S.PatternType.LITERAL, "__consumer_offsets"),
                                       (S.ResourceType.GROUP, S.PatternType.LITERAL, "g1"))]
    svc.state.acls.replace(everything)
    return svc


@pytest.mark.parametrize("topic", INTERNAL)
def test_internal_topics_are_refused_whatever_the_acls_grant(topic):
    svc = service(True)
    assert not svc.may_read("User:alice", topic)
    if topic != "RMQ_SYS_TRACE_TOPIC":  # traces: written (and so described) under a grant
        assert not svc.authorize("User:alice", S.Operation.DESCRIBE, S.ResourceType.TOPIC, topic)
    assert svc.may_read("User:root", topic)  # a super user (the node's inner principal is one)


def test_ordinary_topics_follow_the_acls():
    svc = service(True)
    assert svc.may_read("User:alice", "orders") and not svc.may_read("User:bob", "orders")


def test_traces_may_be_written_under_a_grant_but_not_read():
    svc = service(True)
    assert svc.authorize("User:alice", S.Operation.WRITE, S.ResourceType.TOPIC, "RMQ_SYS_TRACE_TOPIC")
    assert not svc.may_read("User:alice", "RMQ_SYS_TRACE_TOPIC")


def test_a_retry_or_dlq_topic_is_its_groups():
    assert read_resource("%DLQ%g1") == (S.Operation.READ, S.ResourceType.GROUP, "g1")
    assert read_resource("%RETRY%g1") == (S.Operation.READ, S.ResourceType.GROUP, "g1")
    svc = service(True)
    assert svc.may_read("User:alice", "%DLQ%g1") and not svc.may_read("User:alice", "%DLQ%g2")


def test_without_authorization_only_the_security_records_are_refused():
    svc = service(False)
    assert not svc.may_read("User:ANONYMOUS", "rmq_sys_SECURITY")
    assert svc.may_read("User:ANONYMOUS", "__consumer_offsets")  # Kafka without an authorizer
