"""A failover while a tiered topic's old segments are remote (docs/design/tiered-storage.md):
the controller promotes a slave, which serves every record from offset 0 (the old ones from the
object store) and goes on uploading what is produced to it, next to the old master's segments."""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for
from tests.rockafka.test_tiered_node import commitlog_files, list_offset, produce, read_from_zero, tiered_settings
from tests.support.failover import FailoverGroup
from tests.support.s3_server import S3Server

pytestmark = pytest.mark.timeout(240)


def test_a_promoted_master_serves_and_extends_the_remote_tier(tmp_path):
    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, FailoverGroup(tmp_path / "group", members=2, role="ASYNC_MASTER",
                               settings=tiered_settings(server, bucket)) as group:
        master = group.wait_master()
        topic = unique("failover")
        create_topic(master.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                        "local.retention.bytes": str(64 * 1024)})
        sent = [(b"f-%05d" % i, (b"%05d=" % i) + bytes((13 * i + j) % 229 for j in range(400))) for i in range(3000)]
        produce(master.kafka_bootstrap, topic, sent[:2000])
        wait_for(lambda: list_offset(master.kafka_bootstrap, topic, -4) > 1000, timeout=60,
                 what="the master to upload and move the local start up")
        slave = next(b for b in group.brokers if b is not master)
        wait_for(lambda: len(commitlog_files(slave)) <= 3, timeout=60, what="the slave's old segments to go")
        uploaded = list_offset(master.kafka_bootstrap, topic, -5)

        master.kill()
        new = group.wait_master(timeout=60, not_=master)
        assert new is slave
        produce(new.kafka_bootstrap, topic, sent[2000:])
        wait_for(lambda: list_offset(new.kafka_bootstrap, topic, -5) > max(uploaded, 2000), timeout=60,
                 what="the new master to upload what was produced to it")
        assert list_offset(new.kafka_bootstrap, topic, -2) == 0
        got = read_from_zero(new.kafka_bootstrap, topic, len(sent))
        assert [o for o, _, _ in got] == list(range(len(sent)))
        assert [(k, v) for _, k, v in got] == sent
        bases = [p.name.split("-")[0] for p in (server.data / bucket).rglob("*.log")]
        assert len(bases) == len(set(bases))          # no range uploaded twice, no orphan left
