"""Transactional messages through the SDK against a real node: commit, rollback, unknown then a
check-back commit, check-back exhaustion then rollback, and an open transaction resolved by a
check-back after a broker restart. Short check intervals come from the node's settings."""

from __future__ import annotations

import threading
import uuid

import pytest

from gateway_native.client import (
    Admin, LitePullConsumer, LocalTransactionState as S, Message, MessageQueue, TransactionProducer,
)
from tests.gateway_native.helpers import wait_until

TXN_SETTINGS = {"transactionTimeOut": 500, "transactionCheckInterval": 200, "transactionCheckMax": 3}


def uniq(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


class Listener:
    """Local transaction outcome per message key; records every check-back it answers."""

    def __init__(self, outcomes: dict[str, S], checks: dict[str, S] | None = None):
        self.outcomes = outcomes
        self.checks = checks or {}
        self.lock = threading.Lock()
        self.checked: list[str] = []

    def execute_local_transaction(self, msg, arg):
        return self.outcomes[msg.keys if isinstance(msg.keys, str) else msg.keys[0]]

    def check_local_transaction(self, msg):
        key = msg.keys[0]
        with self.lock:
            self.checked.append(key)
        return self.checks.get(key, S.UNKNOW)

    def check_count(self, key: str) -> int:
        with self.lock:
            return self.checked.count(key)


def one_queue_topic(node) -> str:
    topic = uniq("TX")
    with Admin(node.namesrv_addr) as admin:
        admin.create_topic(topic, 1)
    return topic


def read_all(node, topic: str, expect: int) -> list:
    """Every message of the topic's single queue from offset 0, once ``expect`` are visible."""
    with LitePullConsumer(uniq("txr"), node.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        got: list = []
        wait_until(lambda: got.extend(lp.poll(200)) or len(got) >= expect, timeout=30, what=f"{expect} messages in {topic}")
        return got


def max_offset(node, topic: str) -> int:
    with Admin(node.namesrv_addr) as admin:
        return admin.max_offset(admin.message_queues(topic)[0])


@pytest.fixture
def txn_node(make_node):
    return make_node(TXN_SETTINGS)


def test_commit_rollback_and_unknown_resolved_by_check_back(txn_node):
    node = txn_node
    topic = one_queue_topic(node)
    listener = Listener({"rb": S.ROLLBACK_MESSAGE, "ok": S.COMMIT_MESSAGE, "later": S.UNKNOW},
                        checks={"later": S.COMMIT_MESSAGE})
    with TransactionProducer(uniq("tpg"), node.namesrv_addr, listener, heartbeat_broker_interval=500) as p:
        r_rb = p.send_message_in_transaction(Message(topic, b"rolled-back", keys=["rb"]))
        r_ok = p.send_message_in_transaction(Message(topic, b"committed", tags="T", keys=["ok"]))
        assert r_rb.local_transaction_state == S.ROLLBACK_MESSAGE and r_ok.local_transaction_state == S.COMMIT_MESSAGE
        # a commit is in the topic when the call returns; the rollback never reached it
        assert max_offset(node, topic) == 1
        got = read_all(node, topic, 1)
        assert [m.body for m in got] == [b"committed"]
        assert got[0].tags == "T" and got[0].keys == ["ok"] and got[0].msg_id == r_ok.msg_id
        assert "REAL_TOPIC" not in got[0].properties

        r_later = p.send_message_in_transaction(Message(topic, b"decided-by-check", keys=["later"]))
        assert r_later.local_transaction_state == S.UNKNOW
        assert max_offset(node, topic) == 1
        wait_until(lambda: max_offset(node, topic) == 2, timeout=30, what="the check-back commit")
        got = read_all(node, topic, 2)
        assert [m.body for m in got] == [b"committed", b"decided-by-check"]
        assert got[1].msg_id == r_later.msg_id
        assert listener.check_count("later") >= 1 and listener.check_count("ok") == 0 and listener.check_count("rb") == 0


def test_check_back_exhaustion_rolls_back(txn_node):
    node = txn_node
    topic = one_queue_topic(node)
    listener = Listener({"never": S.UNKNOW, "after": S.COMMIT_MESSAGE})
    with TransactionProducer(uniq("tpg"), node.namesrv_addr, listener, heartbeat_broker_interval=500) as p:
        p.send_message_in_transaction(Message(topic, b"never-decided", keys=["never"]))
        # transactionCheckMax=3: three check-backs, then the broker rolls the message back
        wait_until(lambda: listener.check_count("never") >= 3, timeout=30, what="three check-backs")
        wait_until(lambda: "transaction_check_exhausted_rolled_back" in node.log_tail(200_000), timeout=30,
                   what="the rollback after the last check")
        assert listener.check_count("never") == 3
        p.send_message_in_transaction(Message(topic, b"after", keys=["after"]))
        got = read_all(node, topic, 1)
        assert [m.body for m in got] == [b"after"]


def test_open_transaction_is_checked_after_restart(make_node):
    node = make_node(TXN_SETTINGS)
    topic = one_queue_topic(node)
    group = uniq("tpg")
    with TransactionProducer(group, node.namesrv_addr, Listener({"a": S.UNKNOW, "b": S.COMMIT_MESSAGE})) as p:
        p.send_message_in_transaction(Message(topic, b"open-across-restart", keys=["a"]))
        p.send_message_in_transaction(Message(topic, b"committed-before", keys=["b"]))
    node.restart()
    listener = Listener({}, checks={"a": S.COMMIT_MESSAGE})
    # a restarted producer that sends nothing is still asked about the open transaction
    with TransactionProducer(group, node.namesrv_addr, listener) as p:
        wait_until(lambda: max_offset(node, topic) == 2, timeout=30, what="the check-back commit after restart")
        got = read_all(node, topic, 2)
        assert [m.body for m in got] == [b"committed-before", b"open-across-restart"]
        assert listener.check_count("b") == 0


def test_bad_end_transaction_requests_are_refused(node):
    """END_TRANSACTION for no half message, a wrong group or a bad state code gets SYSTEM_ERROR
    with a reason; the connection keeps working."""
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R

    topic = one_queue_topic(node)
    listener = Listener({"x": S.UNKNOW})
    with TransactionProducer(uniq("tpg"), node.namesrv_addr, listener) as p:
        sent = p.send_message_in_transaction(Message(topic, b"x", keys=["x"]))
        from gateway_native.remoting.message_codec import decode_offset_msg_id
        _, _, phy = decode_offset_msg_id(sent.offset_msg_id)
        rt = p.runtime

        def end(**fields):
            base = {"producerGroup": p.group, "tranStateTableOffset": sent.queue_offset, "commitLogOffset": phy,
                    "commitOrRollback": 8, "fromTransactionCheck": False}
            base.update(fields)
            return rt.call(rt.invoke(node.broker_addr, rt.request(RC.END_TRANSACTION, base)))

        bad = end(commitLogOffset=phy + 999_999)
        assert bad.code == R.SYSTEM_ERROR and "no prepared (half) message" in bad.remark
        wrong_group = end(producerGroup="someone-else")
        assert wrong_group.code == R.SYSTEM_ERROR and "belongs to producer group" in wrong_group.remark
        wrong_offset = end(tranStateTableOffset=sent.queue_offset + 7)
        assert wrong_offset.code == R.SYSTEM_ERROR and "tranStateTableOffset" in wrong_offset.remark
        assert end(commitOrRollback=5).code == R.SYSTEM_ERROR
        # none of that resolved it: the rightful rollback still applies, and nothing reached the topic
        assert end(commitOrRollback=12).code == R.SUCCESS
        assert max_offset(node, topic) == 0
