"""The stock Apache Kafka Java client (kafka-clients 4.x) against a real ``rockafka serve``.

One JVM runs every scenario of ``compat/java`` (see ``KafkaRunner``) against the node's Kafka
listener; each test asserts that one scenario's checks all passed and prints the failed checks
(with the client's exception and stack) when not. The same runner passes all of these checks
against Apache Kafka 4.1 (``compat/bench/peers/kafka_peer.py``), so a failure here is a
Rockafka incompatibility.
"""

from __future__ import annotations

import pytest

from tests.compat import java_runner

SCENARIOS = ["producer", "consumer-group", "describe-cluster", "describe-topics", "list-offsets", "create-delete-topics",
             "transactions", "compression"]
# the fewest checks each scenario reports when it runs to completion
MIN_CHECKS = {"producer": 6, "consumer-group": 7, "describe-cluster": 3, "describe-topics": 7, "list-offsets": 9,
              "create-delete-topics": 6, "transactions": 7,
              "compression": 12}

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def kafka_run(node):
    java_runner.build(java_runner.KAFKA_DIR)
    return java_runner.run(java_runner.kafka_command(node.kafka_bootstrap, SCENARIOS), timeout=240)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_java_kafka_client(kafka_run, scenario):
    kafka_run.assert_passed(scenario, MIN_CHECKS[scenario])


def test_runner_reports_summary(kafka_run):
    assert kafka_run.summary is not None, kafka_run.stderr[-3000:]
    assert kafka_run.summary["scenarios"] == SCENARIOS


def test_java_producer_sends_produce_v13_by_topic_id(node, kafka_run):
    """kafka-clients 4.4 negotiates Produce v13 (topics named by id, KIP-516) from the node's
    ApiVersions and the producer scenario read back what it sent that way: the node counts the
    versions its clients sent (rockafka_kafka_request_versions_total)."""
    import urllib.request

    kafka_run.assert_passed("producer", MIN_CHECKS["producer"])
    text = urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10).read().decode()
    v13 = [ln for ln in text.splitlines()
           if ln.startswith('rockafka_kafka_request_versions_total{api="Produce",version="13"}')]
    assert v13 and float(v13[0].rsplit(" ", 1)[1]) > 0, [ln for ln in text.splitlines() if "Produce" in ln]
