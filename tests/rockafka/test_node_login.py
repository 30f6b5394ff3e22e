"""Node-to-node Kafka requests log in as the node (``KafkaGateway.connect_node``): on a SASL
listener a slave's InitProducerId relay to its master authenticates with the inner credentials,
so an idempotent producer that asks the slave gets a producer id from the master's space.

Real processes: a master and a slave (SASL_PLAINTEXT Kafka listener, PLAIN users), raw Kafka
requests after a SASL PLAIN login as a client would send them."""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import RawKafka
from tests.support.group import BrokerGroup, wait_until

pytestmark = pytest.mark.timeout(180)

SASL = {"sasl_enabled_mechanisms": "PLAIN", "sasl_plain_users": "alice:alice-secret",
        "innerClientAuthenticationCredentials": "rockafka-node:inner-secret"}


def login(raw: RawKafka, user: str, password: str) -> None:
    assert raw.request(17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
    resp = raw.request(36, 1, {"auth_bytes": b"\0" + user.encode() + b"\0" + password.encode()})
    assert resp["error_code"] == 0, resp


def test_a_slave_relays_init_producer_id_to_its_master_logged_in_as_the_node(tmp_path):
    group = BrokerGroup(tmp_path, role="ASYNC_MASTER", settings=SASL,
                        namesrv_settings={"innerClientAuthenticationCredentials": SASL["innerClientAuthenticationCredentials"]})
    try:
        group.start()
        slave = group.slaves[0]

        def ask_slave() -> dict:
            with RawKafka(slave.kafka_bootstrap) as raw:
                login(raw, "alice", "alice-secret")
                return raw.request(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        got = wait_until(lambda: (r := ask_slave())["error_code"] == 0 and r, 30,
                         what="a producer id through the slave")
        assert got["producer_id"] >= 0 and got["producer_epoch"] == 0
        with RawKafka(group.master.kafka_bootstrap) as raw:   # the master hands out the next one
            login(raw, "alice", "alice-secret")
            nxt = raw.request(22, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
        assert nxt["error_code"] == 0 and nxt["producer_id"] > got["producer_id"]
    finally:
        group.stop()
