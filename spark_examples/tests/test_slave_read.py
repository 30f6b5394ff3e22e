"""The ``rockafka`` source reads a broker group whose master is down: a real master and slave
(SYNC_MASTER, two ``rockafka serve`` processes and a standalone NameServer), the master killed
with SIGKILL, then batch reads planned and run with Spark through the cluster's routes — every
message the master acknowledged comes back exactly once from the slave, and pushed filters (tag,
key) still hold there.
"""

from __future__ import annotations

from collections import Counter

import pytest

from spark_examples.tests.helpers import unique
from tests.support.group import BrokerGroup, wait_until

pytestmark = pytest.mark.timeout(300)

N = 200


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    g = BrokerGroup(tmp_path_factory.mktemp("slave-read"), role="SYNC_MASTER").start()
    yield g
    g.stop()


@pytest.fixture(scope="module")
def rockafka(spark):
    import rockafka_spark

    rockafka_spark.register(spark)
    return spark


def test_batch_read_after_the_master_is_killed_returns_every_acknowledged_message_once(group, rockafka):
    from gateway_native.client import Admin, Message, Producer
    from gateway_native.client.message import SendStatus

    topic = unique("slave-read")
    with Admin(group.namesrv_addr) as admin:
        admin.create_topic(topic, 4)
    acked = []
    with Producer(unique("pg"), group.namesrv_addr, retry_times_when_send_failed=0) as p:
        for i in range(N):
            r = p.send(Message(topic, f"m{i}".encode(), tags=f"T{i % 4}", keys=[f"k{i}"]))
            if r.status == SendStatus.SEND_OK:  # stored on the master and on the slave
                acked.append(f"m{i}")
    assert len(acked) == N
    group.master.kill()  # SIGKILL: no goodbye to the NameServer or the clients
    # the route the reader plans with is the NameServer's; whether it still lists the dead master
    # or not, the read must go to the slave
    df = (rockafka.read.format("rockafka").option("namesrv", group.namesrv_addr).option("topic", topic)
          .option("group", unique("g")).option("maxOffsetsPerPartition", "64").load())
    bodies = Counter(r.body.decode() for r in df.select("body").collect())
    assert set(bodies) == set(acked), f"missing {sorted(set(acked) - set(bodies))[:5]}"
    assert max(bodies.values()) == 1, f"duplicates: {[b for b, n in bodies.items() if n > 1][:5]}"

    # once the NameServer has dropped the master, its route names only the slave (brokerId 1)
    def route_ids():
        with Admin(group.namesrv_addr) as a:
            a.message_queues(topic)
            return set(a.runtime.broker_addrs.get("broker-a", {})) == {1}
    wait_until(route_ids, 60, what="the route lists only the slave")

    # pushed filters are answered by the slave's indexes too
    tagged = (rockafka.read.format("rockafka").option("namesrv", group.namesrv_addr).option("topic", topic)
              .option("group", unique("g")).load().where("tags = 'T1'"))
    assert sorted(r.body.decode() for r in tagged.select("body").collect()) == sorted(
        f"m{i}" for i in range(N) if i % 4 == 1)
    keyed = (rockafka.read.format("rockafka").option("namesrv", group.namesrv_addr).option("topic", topic)
             .option("group", unique("g")).load().where("key = 'k7'"))
    assert [r.body for r in keyed.select("body").collect()] == [b"m7"]
