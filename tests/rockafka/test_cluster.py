"""Several broker groups behind one NameServer look like one Kafka cluster (docs/design/cluster.md).

One module-scoped cluster: a standalone NameServer and three single-node groups (broker-a, -b,
-c, Kafka node ids 0, 100, 200), each a real ``rockafka serve``. Real clients: confluent-kafka
produces and consumes, Kafka's own ``kafka-topics`` describes, the project's RocketMQ admin
reads the native route and queue offsets, raw Kafka requests check the error a node answers for
a partition it does not lead. The last test restarts the whole cluster in another order.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from engine.record_batch import Record, build_batch
from gateway_kafka.protocol.errors import ErrorCode
from gateway_native.client.admin import Admin
from gateway_native.client.message import MessageQueue
from tests.gateway_kafka.kafka_helpers import RawKafka
from tests.support.group import TEST_SETTINGS, wait_until
from tests.support.node import ROOT, RunningNode, StandaloneNamesrv

pytestmark = pytest.mark.timeout(300)

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"
GROUPS = {"broker-a": 0, "broker-b": 100, "broker-c": 200}  # broker name -> Kafka node id


class Cluster:
    def __init__(self, tmp_path):
        self.namesrv = StandaloneNamesrv(tmp_path)
        self.nodes = {name: RunningNode(tmp_path / name, settings=dict(
            TEST_SETTINGS, brokerName=name, brokerRole="ASYNC_MASTER", namesrvAddr=self.namesrv.addr,
            kafka_node_id=node_id)) for name, node_id in GROUPS.items()}

    def bootstrap(self, name: str) -> str:
        return self.nodes[name].kafka_bootstrap

    def wait_view(self) -> None:
        for name in self.nodes:
            wait_until(lambda: {b for b in AdminClient({"bootstrap.servers": self.bootstrap(name)})
                                .list_topics(timeout=10).brokers} == set(GROUPS.values()),
                       60, what=f"{name} lists every group's broker")

    def stop(self) -> None:
        for n in self.nodes.values():
            try:
                n.stop()
            except Exception:
                n.kill()
        self.namesrv.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("cluster"))
    try:
        for n in c.nodes.values():
            n.start()
        c.wait_view()
        yield c
    finally:
        c.stop()


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                        request_timeout=15)[name].result(30)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=15)
    t = md.topics[topic]
    return {} if t.error is not None else {p: pm.leader for p, pm in t.partitions.items()}


def wait_leaders(cluster: Cluster, topic: str, want: dict[int, int]) -> None:
    for name in cluster.nodes:
        wait_until(lambda: leaders(cluster.bootstrap(name), topic) == want, 30,
                   what=f"{name}'s metadata of {topic} = {want}")


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> dict[int, list[bytes]]:
    sent: dict[int, list[bytes]] = {p: [f"{topic}-{p}-{i}".encode() for i in range(per_partition)]
                                    for p in range(partitions)}
    errors: list = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 30000})
    for part, values in sent.items():
        for v in values:
            p.produce(topic, v, partition=part,
                      on_delivery=lambda err, msg: err and errors.append((msg.partition(), err)))
    assert p.flush(30) == 0
    assert not errors, (errors[:3], {b: leaders(b, topic) for b in bootstraps(bootstrap)})
    return sent


def bootstraps(any_bootstrap: str) -> list[str]:
    md = AdminClient({"bootstrap.servers": any_bootstrap}).list_topics(timeout=10)
    return [f"{b.host}:{b.port}" for b in md.brokers.values()]


def consume_all(bootstrap: str, topic: str, partitions: list[int], total: int) -> dict[int, list[bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got: dict[int, list[bytes]] = {}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < total and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None or m.error():
                continue
            got.setdefault(m.partition(), []).append(m.value())
    finally:
        c.close()
    return got


def test_metadata_and_describe_cluster_list_every_group_on_every_node(cluster):
    for name in cluster.nodes:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(name)})
        want = {GROUPS[n]: cluster.nodes[n].kafka_port for n in GROUPS}
        # each node's view follows the NameServer's registrations (refreshed every second)
        deadline = time.monotonic() + 30
        while {b.id: b.port for b in admin.list_topics(timeout=10).brokers.values()} != want \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        md = admin.list_topics(timeout=10)
        assert {b.id: b.port for b in md.brokers.values()} == want
        described = admin.describe_cluster(request_timeout=10).result(20)
        assert sorted(n.id for n in described.nodes) == sorted(GROUPS.values())


def test_a_topic_spread_over_three_groups_is_produced_and_read_back_whole(cluster):
    topic = unique("spread")
    create_topic(cluster.bootstrap("broker-b"), topic, 12)  # through any master
    want = {p: GROUPS[("broker-a", "broker-b", "broker-c")[p // 4]] for p in range(12)}
    wait_leaders(cluster, topic, want)
    sent = produce(cluster.bootstrap("broker-a"), topic, 12, 10)
    got = consume_all(cluster.bootstrap("broker-c"), topic, list(range(12)), 120)
    assert got == sent  # every record, in order, in the partition it was sent to

    # native clients see the same queues in the same order, holding the same records
    with Admin(cluster.namesrv.addr) as admin:
        queues = admin.message_queues(topic)
        assert [(q.broker_name, q.queue_id) for q in queues] == [(f"broker-{c}", q) for c in "abc" for q in range(4)]
        assert [admin.max_offset(q) for q in queues] == [10] * 12


def test_a_node_answers_not_leader_for_partitions_of_other_groups(cluster):
    topic = unique("notleader")
    create_topic(cluster.bootstrap("broker-a"), topic, 3)
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    batch = build_batch([Record(0, 0, None, b"v", [])], base_timestamp=int(time.time() * 1000))
    with RawKafka(cluster.bootstrap("broker-a")) as raw:
        produced = raw.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": i, "records": batch} for i in (0, 1, 2, 3)]}]})
        codes = [p["error_code"] for p in produced["responses"][0]["partition_responses"]]
        assert codes == [ErrorCode.NONE, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                         ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        fetched = raw.request(1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                                      "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
            {"topic": topic, "partitions": [{"partition": i, "current_leader_epoch": -1, "fetch_offset": 0,
                                             "log_start_offset": -1, "partition_max_bytes": 1 << 20}
                                            for i in (0, 2)]}], "forgotten_topics_data": [], "rack_id": ""})
        parts = fetched["responses"][0]["partitions"]
        assert [(p["partition_index"], p["error_code"]) for p in parts] == \
            [(0, ErrorCode.NONE), (2, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
        assert parts[0]["records"]  # the record stored on broker-a


def test_create_partitions_on_the_least_loaded_or_the_chosen_group(cluster):
    topic = unique("grow")
    create_topic(cluster.bootstrap("broker-c"), topic, 2)  # broker-a: 0, broker-b: 1
    wait_leaders(cluster, topic, {0: 0, 1: 100})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap("broker-a")})
    admin.create_partitions([NewPartitions(topic, 3)], request_timeout=15)[topic].result(30)
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})  # broker-c held none
    admin.create_partitions([NewPartitions(topic, 5, replica_assignment=[[100], [100]])],
                            request_timeout=15)[topic].result(30)
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200, 3: 100, 4: 100})
    sent = produce(cluster.bootstrap("broker-b"), topic, 5, 4)
    assert consume_all(cluster.bootstrap("broker-a"), topic, list(range(5)), 20) == sent
    with Admin(cluster.namesrv.addr) as native:
        # broker-b's queue 1 and 2 are partitions 3 and 4
        assert native.max_offset(MessageQueue(topic, "broker-b", 2)) == 4


def coordinator_of(bootstrap: str, key: str, key_type: int = 0) -> int:
    with RawKafka(bootstrap) as raw:
        found = raw.request(10, 3, {"key": key, "key_type": key_type})
    assert found["error_code"] == ErrorCode.NONE, found
    return found["node_id"]


def test_coordinators_are_spread_over_groups_and_every_node_names_the_same(cluster):
    for key_type in (0, 1):
        keys = [unique("key") for _ in range(12)]
        placed = {k: {coordinator_of(cluster.bootstrap(n), k, key_type) for n in cluster.nodes} for k in keys}
        assert all(len(nodes) == 1 for nodes in placed.values()), placed  # one answer whoever is asked
        assert len({next(iter(nodes)) for nodes in placed.values()}) >= 2, placed  # not all on one group


def test_a_consumer_group_of_three_reads_a_spread_topic_exactly_once(cluster):
    topic, group = unique("members"), unique("group")
    create_topic(cluster.bootstrap("broker-a"), topic, 12)
    wait_leaders(cluster, topic, {p: GROUPS[("broker-a", "broker-b", "broker-c")[p // 4]] for p in range(12)})
    consumers = [Consumer({"bootstrap.servers": cluster.bootstrap(n), "group.id": group, "auto.offset.reset": "earliest",
                           "enable.auto.commit": False}) for n in cluster.nodes]
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while sorted(len(c.assignment()) for c in consumers) != [4, 4, 4]:
            assert time.monotonic() < deadline, [c.assignment() for c in consumers]
            for c in consumers:
                c.poll(0.1)
        sent = produce(cluster.bootstrap("broker-b"), topic, 12, 5)
        got: list[tuple[int, bytes]] = []
        while len(got) < 60 and time.monotonic() < deadline + 60:
            for c in consumers:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    got.append((m.partition(), m.value()))
        assert sorted(got) == sorted((p, v) for p, vs in sent.items() for v in vs)  # each record once
        for c in consumers:
            c.commit(asynchronous=False)
    finally:
        for c in consumers:
            c.close()
    # the offsets, committed through the group's coordinator, are there for partitions of every group
    check = Consumer({"bootstrap.servers": cluster.bootstrap("broker-c"), "group.id": group})
    try:
        committed = check.committed([TopicPartition(topic, p) for p in range(12)], timeout=30)
        assert [tp.offset for tp in committed] == [5] * 12
    finally:
        check.close()


@pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")
def test_kafka_topics_describe_shows_leaders_on_three_nodes(cluster):
    topic = unique("describe")
    create_topic(cluster.bootstrap("broker-a"), topic, 6)
    wait_leaders(cluster, topic, {p: GROUPS[("broker-a", "broker-b", "broker-c")[p // 2]] for p in range(6)})
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    out = subprocess.run(["java", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.TopicCommand",
                          "--bootstrap-server", cluster.bootstrap("broker-b"), "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = [ln for ln in out.stdout.splitlines() if "Partition:" in ln]
    found = {}
    for ln in lines:
        fields = dict(part.split(": ", 1) for part in ln.strip().split("\t") if ": " in part)
        found[int(fields["Partition"])] = (fields["Leader"], fields["Replicas"])
    assert found == {p: (str(GROUPS[n]), str(GROUPS[n])) for p, n in
                     enumerate(["broker-a", "broker-a", "broker-b", "broker-b", "broker-c", "broker-c"])}


def test_deleting_a_spread_topic_deletes_it_on_every_group(cluster):
    topic = unique("gone")
    create_topic(cluster.bootstrap("broker-a"), topic, 3)
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap("broker-a")})
    admin.delete_topics([topic], request_timeout=15)[topic].result(30)
    for name in cluster.nodes:
        wait_until(lambda: topic not in AdminClient({"bootstrap.servers": cluster.bootstrap(name)})
                   .list_topics(timeout=10).topics, 30, what=f"{topic} gone from {name}'s metadata")


def test_restarting_every_group_in_another_order_keeps_partition_ids_and_data(cluster):
    topic = unique("restart")
    create_topic(cluster.bootstrap("broker-a"), topic, 6)
    want = {p: GROUPS[("broker-a", "broker-b", "broker-c")[p // 2]] for p in range(6)}
    wait_leaders(cluster, topic, want)
    sent = produce(cluster.bootstrap("broker-a"), topic, 6, 5)
    cluster.nodes["broker-c"].stop()
    # a group that is down keeps its partitions: listed, without a leader, until it returns
    wait_until(lambda: leaders(cluster.bootstrap("broker-a"), topic) == {**want, 4: -1, 5: -1}, 30,
               what="broker-c's partitions listed leaderless")
    for n in cluster.nodes.values():
        n.stop()
    for name in ("broker-c", "broker-a", "broker-b"):  # not the order they first registered in
        cluster.nodes[name].start()
    cluster.wait_view()
    wait_leaders(cluster, topic, want)
    assert consume_all(cluster.bootstrap("broker-c"), topic, list(range(6)), 30) == sent


def test_a_topic_auto_created_on_one_group_is_not_created_again_on_another(cluster):
    """A producer auto-creates a topic through broker-a; a consumer asking broker-c right after
    gets the partitions the producer wrote to (not a second, empty copy on broker-c) and reads
    every record."""
    topic = unique("auto")
    p = Producer({"bootstrap.servers": cluster.bootstrap("broker-a"), "linger.ms": 5})
    for i in range(10):
        p.produce(topic, f"auto-{i}".encode())
    assert p.flush(30) == 0
    with RawKafka(cluster.bootstrap("broker-c")) as raw:
        md = raw.request(3, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": True,
                                "include_topic_authorized_operations": False})
    parts = md["topics"][0]["partitions"]
    assert md["topics"][0]["error_code"] == ErrorCode.NONE and parts
    with Admin(cluster.namesrv.addr) as admin:
        held_by = {q.broker_name for q in admin.message_queues(topic)}
    assert len(held_by) == 1, held_by  # one group holds it
    assert {p["leader_id"] for p in parts} == {GROUPS[g] for g in held_by}
    got = consume_all(cluster.bootstrap("broker-c"), topic, sorted(p["partition_index"] for p in parts), 10)
    assert sorted(v for vs in got.values() for v in vs) == sorted(f"auto-{i}".encode() for i in range(10))


def test_a_new_topic_asked_through_every_group_at_once_is_created_by_one_group_only(cluster):
    """Three clients ask the three groups for the same new topic at the same instant (Metadata
    with auto-creation, as a producer does). Each topic ends up held by one group and every node
    names the same leader: two groups each creating a copy of partition 0 would let a producer
    write to one copy while a consumer is led to the other and reads nothing."""
    names = [unique("race") for _ in range(6)]
    with contextlib.ExitStack() as stack:
        raws = [stack.enter_context(RawKafka(cluster.bootstrap(g))) for g in GROUPS]
        for name in names:
            ask = {"topics": [{"name": name}], "allow_auto_topic_creation": True,
                   "include_topic_authorized_operations": False}
            start = threading.Barrier(len(raws))

            def asked(raw: RawKafka, ask=ask, start=start) -> int:
                start.wait(10)
                return raw.request(3, 9, ask)["topics"][0]["error_code"]
            with ThreadPoolExecutor(len(raws)) as pool:
                codes = list(pool.map(asked, raws))
            assert set(codes) <= {ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE}, codes

        def led(raw: RawKafka, name: str) -> set[int]:
            t = raw.request(3, 9, {"topics": [{"name": name}], "allow_auto_topic_creation": False,
                                   "include_topic_authorized_operations": False})["topics"][0]
            return {p["leader_id"] for p in t["partitions"]} if t["error_code"] == ErrorCode.NONE else set()
        admin = stack.enter_context(Admin(cluster.namesrv.addr))
        for name in names:
            wait_until(lambda: all(led(raw, name) for raw in raws), 30, what=f"every node listing {name}")
            held_by = {q.broker_name for q in admin.message_queues(name)}
            assert len(held_by) == 1, (name, held_by)
            assert [led(raw, name) for raw in raws] == [{GROUPS[g] for g in held_by}] * len(raws), name


def test_every_group_hands_out_producer_ids_of_its_own_space(cluster):
    """Idempotent producers asking different groups for an id never get the same one (they may
    write to the same partition: equal ids would mix their sequences there)."""
    ids = {}
    for name in cluster.nodes:
        with RawKafka(cluster.bootstrap(name)) as raw:
            for _ in range(2):
                got = raw.request(22, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                          "producer_id": -1, "producer_epoch": -1})
                assert got["error_code"] == ErrorCode.NONE, got
                ids.setdefault(name, []).append(got["producer_id"])
    every = [pid for pids in ids.values() for pid in pids]
    assert len(set(every)) == len(every), ids
    assert {name: {pid >> 40 for pid in pids} for name, pids in ids.items()} == \
        {name: {node_id // 100} for name, node_id in GROUPS.items()}
    # and the two groups' idempotent producers write one partition side by side
    topic = unique("pids")
    create_topic(cluster.bootstrap("broker-a"), topic, 1)
    wait_leaders(cluster, topic, {0: 0})
    producers = [Producer({"bootstrap.servers": cluster.bootstrap(n), "enable.idempotence": True, "linger.ms": 5})
                 for n in ("broker-b", "broker-c")]
    for i in range(20):
        for k, p in enumerate(producers):
            p.produce(topic, f"p{k}-{i}".encode(), partition=0)
    assert all(p.flush(30) == 0 for p in producers)
    got = consume_all(cluster.bootstrap("broker-a"), topic, [0], 40)
    assert sorted(got[0]) == sorted(f"p{k}-{i}".encode() for k in range(2) for i in range(20))


def test_once_create_topics_answers_every_node_lists_every_partition(cluster):
    """No node answers a part of a new spread topic (librdkafka, asking any broker, would fail
    records of the partitions it does not see yet with UNKNOWN_PARTITION)."""
    topic = unique("visible")
    create_topic(cluster.bootstrap("broker-a"), topic, 6)
    for name in cluster.nodes:  # at once: no waiting for the views to refresh
        assert leaders(cluster.bootstrap(name), topic) == {p: GROUPS[("broker-a", "broker-b", "broker-c")[p // 2]]
                                                          for p in range(6)}, name


def read_committed(bootstrap: str, topic: str, partitions: list[int], want: int, settle: float = 1.0) -> list[bytes]:
    """What a read_committed consumer reads of ``partitions`` from the beginning: until ``want``
    values came (bounded), then ``settle`` seconds more (nothing else may follow)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("rc"), "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in partitions])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 60
        while len(got) < want and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        end = time.monotonic() + settle
        while time.monotonic() < end:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def stable_offset(bootstrap: str, topic: str, partition: int) -> int:
    """ListOffsets(latest, read_committed) of one partition: its last stable offset."""
    with RawKafka(bootstrap) as raw:
        got = raw.request(2, 5, {"replica_id": -1, "isolation_level": 1, "topics": [
            {"name": topic, "partitions": [{"partition_index": partition, "current_leader_epoch": -1,
                                            "timestamp": -1}]}]})
    part = got["topics"][0]["partitions"][0]
    return part["offset"] if part["error_code"] == ErrorCode.NONE else -1


def test_a_transaction_spanning_three_groups_commits_everywhere_and_an_aborted_one_stays_invisible(cluster):
    topic, tid = unique("txn"), unique("tid")
    create_topic(cluster.bootstrap("broker-a"), topic, 3)  # one partition on each group
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    p = Producer({"bootstrap.servers": cluster.bootstrap("broker-a"), "transactional.id": tid})
    p.init_transactions(30)
    for outcome in ("commit-1", "abort", "commit-2"):
        p.begin_transaction()
        for part in range(3):
            for i in range(3):
                p.produce(topic, f"{outcome}-{part}-{i}".encode(), partition=part)
        p.flush(30)
        if outcome == "abort":
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    want = sorted(f"{o}-{part}-{i}".encode() for o in ("commit-1", "commit-2") for part in range(3) for i in range(3))
    for name in ("broker-b", "broker-c"):
        got = read_committed(cluster.bootstrap(name), topic, [0, 1, 2], len(want))
        assert sorted(got) == want, name  # every group's commit, none of the aborted records


def test_java_kafka_clients_transactions_over_two_groups(cluster):
    """The stock Java client's transaction scenario (compat/java KafkaRunner: a committed and an
    aborted transaction over a 2-partition topic, which the cluster places on two groups)."""
    from tests.compat import java_runner

    before = set(AdminClient({"bootstrap.servers": cluster.bootstrap("broker-a")}).list_topics(timeout=10).topics)
    java_runner.build(java_runner.KAFKA_DIR)
    run = java_runner.run(java_runner.kafka_command(cluster.bootstrap("broker-a"), ["transactions"]), timeout=180)
    run.assert_passed("transactions", 7)
    made = [t for t in AdminClient({"bootstrap.servers": cluster.bootstrap("broker-a")}).list_topics(timeout=10).topics
            if t.startswith("java-txn-") and t not in before]
    assert len(made) == 1 and len(set(leaders(cluster.bootstrap("broker-a"), made[0]).values())) == 2, made


def test_consume_transform_produce_commits_offsets_on_another_groups_coordinator_exactly_once(cluster):
    """The consumer group's coordinator is not the transaction's: its offsets commit with the
    transaction (the marker reaches the group coordinator's broker group by WriteTxnMarkers)."""
    src, dst = unique("ctp-in"), unique("ctp-out")
    for t in (src, dst):
        create_topic(cluster.bootstrap("broker-a"), t, 3)
        wait_leaders(cluster, t, {0: 0, 1: 100, 2: 200})
    tid = unique("ctp-tid")
    txn_coordinator = coordinator_of(cluster.bootstrap("broker-a"), tid, 1)
    group = next(g for g in (unique("ctp-group") for _ in range(50))
                 if coordinator_of(cluster.bootstrap("broker-a"), g, 0) != txn_coordinator)
    inputs = produce(cluster.bootstrap("broker-a"), src, 3, 10)
    c = Consumer({"bootstrap.servers": cluster.bootstrap("broker-b"), "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    p = Producer({"bootstrap.servers": cluster.bootstrap("broker-c"), "transactional.id": tid})
    p.init_transactions(30)
    c.subscribe([src])
    seen = 0
    aborted_once = False
    deadline = time.monotonic() + 90
    try:
        while seen < 30 and time.monotonic() < deadline:
            msgs = [m for m in c.consume(10, 1.0) if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, b"out-" + m.value(), partition=m.partition())
            p.send_offsets_to_transaction([tp for tp in c.position(c.assignment()) if tp.offset >= 0],
                                          c.consumer_group_metadata(), 30)
            if not aborted_once:  # the first batch once aborted: neither output nor offsets count
                aborted_once = True
                p.abort_transaction(30)
                for tp in c.committed(c.assignment(), 30):  # back to what is committed
                    c.seek(TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
                continue
            p.commit_transaction(30)
            seen += len(msgs)
    finally:
        c.close()
    assert seen == 30
    want = sorted(b"out-" + v for vs in inputs.values() for v in vs)
    assert sorted(read_committed(cluster.bootstrap("broker-a"), dst, [0, 1, 2], 30)) == want  # exactly once
    probe = Consumer({"bootstrap.servers": cluster.bootstrap("broker-a"), "group.id": group})
    try:
        committed = probe.committed([TopicPartition(src, part) for part in range(3)], 30)
    finally:
        probe.close()
    assert {tp.partition: tp.offset for tp in committed} == {part: len(inputs[part]) for part in range(3)}


def settled_coordinator(cluster: Cluster, tid: str) -> str:
    """The group every node names as the coordinator of ``tid`` (a node just restarted names
    itself until its view of the other groups arrives)."""
    names = {node_id: name for name, node_id in GROUPS.items()}
    cluster.wait_view()

    def agreed() -> str | None:
        try:
            ids = {coordinator_of(cluster.bootstrap(n), tid, 1) for n in cluster.nodes}
        except AssertionError:  # COORDINATOR_NOT_AVAILABLE meanwhile
            return None
        return names[ids.pop()] if len(ids) == 1 else None

    return wait_until(agreed, 30, interval=0.2, what=f"every node names one coordinator of {tid}")


def test_a_leader_group_killed_before_its_markers_gets_them_when_it_returns(cluster):
    """EndTxn is answered once the commit is logged; a leader group whose master is down (SIGKILL)
    gets its marker when it is back: its records of the committed transaction become visible (none
    lost), and until then read_committed readers were held at the last stable offset."""
    topic, tid = unique("txn-kill"), unique("tid-kill")
    create_topic(cluster.bootstrap("broker-a"), topic, 3)  # partition k on group k
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    coordinator = settled_coordinator(cluster, tid)
    victim = next(n for n in ("broker-b", "broker-c", "broker-a") if n != coordinator)
    victim_part = GROUPS[victim] // 100
    alive = next(n for n in GROUPS if n not in (coordinator, victim))
    p = Producer({"bootstrap.servers": cluster.bootstrap(coordinator), "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    want = sorted(f"kill-{part}-{i}".encode() for part in range(3) for i in range(4))
    for v in want:
        p.produce(topic, v, partition=int(v.split(b"-")[1]))
    assert p.flush(30) == 0  # every record acknowledged by its leader group
    assert stable_offset(cluster.bootstrap(victim), topic, victim_part) == 0  # open: readers held at 0
    cluster.nodes[victim].kill()
    p.commit_transaction(60)  # answered: the commit is logged, the victim's marker waits
    others = [part for part in range(3) if part != victim_part]
    assert sorted(read_committed(cluster.bootstrap(alive), topic, others, 8, settle=0.2)) == \
        [v for v in want if int(v.split(b"-")[1]) != victim_part]
    cluster.nodes[victim].start()
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    wait_until(lambda: stable_offset(cluster.bootstrap(victim), topic, victim_part) >= 4, 60,
               what="the returning group's last stable offset passes the committed records")
    assert sorted(read_committed(cluster.bootstrap(alive), topic, [0, 1, 2], 12)) == want
    p.begin_transaction()  # and the producer goes on
    p.produce(topic, b"after", partition=victim_part)
    p.commit_transaction(60)
    assert read_committed(cluster.bootstrap(victim), topic, [victim_part], 5)[-1] == b"after"


def test_a_coordinator_restarted_while_a_marker_waits_resumes_it_from_its_log(cluster):
    """The commit is logged, one leader group is down; the coordinator's master is SIGKILLed and
    restarted (its memory of acknowledged markers gone): from its log it sends the missing
    marker once the group is back, and aborts nothing of the committed transaction meanwhile."""
    topic, tid = unique("txn-coord"), unique("tid-coord")
    create_topic(cluster.bootstrap("broker-a"), topic, 3)
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    coordinator = settled_coordinator(cluster, tid)
    victim = next(n for n in ("broker-c", "broker-b", "broker-a") if n != coordinator)
    alive = next(n for n in GROUPS if n not in (coordinator, victim))
    p = Producer({"bootstrap.servers": cluster.bootstrap(alive), "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    want = sorted(f"coord-{part}-{i}".encode() for part in range(3) for i in range(3))
    for v in want:
        p.produce(topic, v, partition=int(v.split(b"-")[1]))
    assert p.flush(30) == 0
    cluster.nodes[victim].kill()
    p.commit_transaction(60)
    cluster.nodes[coordinator].kill()
    cluster.nodes[coordinator].start()
    cluster.nodes[victim].start()
    wait_leaders(cluster, topic, {0: 0, 1: 100, 2: 200})
    assert sorted(read_committed(cluster.bootstrap(alive), topic, [0, 1, 2], 9)) == want
