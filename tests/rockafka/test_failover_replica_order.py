"""Kafka Metadata lists a partition's replicas in the same order whichever node answers
(docs/design/failover.md, "What clients see"): the first replica is Kafka's preferred replica,
so it must not depend on the node asked, nor on which member registers as master after a
failover. Two SYNC_MASTER groups of two under a 3-node controller quorum, every node asked."""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import RawKafka
from tests.support.failover import FailoverGroup
from tests.support.group import wait_until
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(300)

TOPIC = "replica-order"
PARTITIONS = 4


def _replicas(node) -> dict[int, list[int]] | None:
    try:
        with RawKafka(node.kafka_bootstrap) as raw:
            resp = raw.request(3, 9, {"topics": [{"name": TOPIC}], "allow_auto_topic_creation": False,
                                      "include_cluster_authorized_operations": False,
                                      "include_topic_authorized_operations": False})
    except OSError:
        return None
    parts = resp["topics"][0]["partitions"]
    return {p["partition_index"]: list(p["replica_nodes"]) for p in parts}


def _agreed_membership(nodes) -> list[dict[int, list[int]]] | None:
    """Every node's answer once all list every partition with the same replica *sets*."""
    answers = [_replicas(n) for n in nodes]
    if any(a is None or len(a) != PARTITIONS for a in answers):
        return None
    sets = [{p: set(r) for p, r in a.items()} for a in answers]
    return answers if all(s == sets[0] for s in sets) else None


def test_every_node_lists_the_replicas_in_one_order_before_and_after_a_failover(tmp_path):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    group = FailoverGroup(tmp_path, members=2).start()
    others = [RunningNode(tmp_path / f"broker-b-{i}", settings=dict(group.brokers[0].settings,
                                                                     brokerName="broker-b", brokerId=i))
              for i in (1, 2)]
    try:
        for node in others:
            node.start()
        nodes = group.brokers + others
        admin = AdminClient({"bootstrap.servers": ",".join(n.kafka_bootstrap for n in nodes)})

        def created() -> bool:
            # a group whose second member started a moment ago has one live member in the view
            # of the node asked: replication factor 2 is refused (INVALID_REPLICATION_FACTOR)
            # until that member registered; asked again, the same request succeeds
            try:
                admin.create_topics([NewTopic(TOPIC, PARTITIONS, 2)], request_timeout=15)[TOPIC].result(30)
                return True
            except KafkaException as exc:
                if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    return True
                if exc.args[0].code() != KafkaError.INVALID_REPLICATION_FACTOR:
                    raise
                return False
        wait_until(created, 60, what="the topic to be created with two replicas")
        answers = wait_until(lambda: _agreed_membership(nodes), 60, what="every node listing every partition")
        assert {len(set(r)) for a in answers for r in a.values()} == {2}, answers
        for a in answers[1:]:
            assert a == answers[0], answers  # same replicas, same order, whoever answers
        before = answers[0]

        master = group.wait_settled()
        master.kill()
        group.wait_master(not_=master)
        live = [n for n in nodes if n is not master]
        answers = wait_until(lambda: _agreed_membership(live), 60, what="every live node after the failover")
        for a in answers[1:]:
            assert a == answers[0], answers
        assert answers[0] == before  # the preferred replica did not move with the master
    finally:
        for node in others:
            node.stop()
        group.stop()
