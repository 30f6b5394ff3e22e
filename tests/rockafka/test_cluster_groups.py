"""A production-shaped cluster: three broker groups (a SYNC_MASTER and its slave each) behind three
independent NameServers, every node a real ``rockafka serve``, every client a real one.

- Kafka clients over a 12-partition topic spread on all groups: confluent-kafka and Java
  kafka-clients (Kafka's own console producer) produce, a consumer group of three reads every
  record exactly once, ``kafka-topics --describe`` shows leaders on three nodes, a Spark batch
  read returns every record.
- ``mqadmin wipeWritePerm`` drains a group (producers move to the others, native and Kafka
  consumers still read it, Kafka produce to it is refused), ``addWritePerm`` restores it.
- ``retryAnotherBrokerWhenNotStoreOK``: a group whose SYNC_MASTER lost its slave answers
  SLAVE_NOT_AVAILABLE, the producer sends again to another group.
- The seed's "two masters down" (seeds 004): both killed with SIGKILL, producers keep writing to
  the third group only, consumers read the dead groups' records from their slaves: native ones
  through the routes, Kafka consumer groups (confluent-kafka and Java kafka-clients) because
  Metadata names each dead group's slave the leader of its partitions.

One module-scoped cluster; the destructive test runs last.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from engine.record_batch import Record, build_batch
from gateway_kafka.protocol.errors import ErrorCode
from gateway_native.client import LitePullConsumer, Message, Producer as NativeProducer, SendStatus
from tests.compat import java_runner
from tests.compat.mqadmin import MQAdmin
from tests.gateway_kafka.kafka_helpers import RawKafka
from tests.support.group import TEST_SETTINGS, http_json, wait_until
from tests.support.node import ROOT, RunningNode, StandaloneNamesrv

pytestmark = [pytest.mark.timeout(600),
              pytest.mark.skipif(shutil.which("java") is None, reason="needs java (make test-deps)")]

KAFKA_TOOLS = ROOT / "compat" / "kafka-tools"
GROUPS = {"broker-a": 0, "broker-b": 100, "broker-c": 200}  # broker name -> the master's Kafka node id
NAMES = tuple(GROUPS)


class Cluster:
    def __init__(self, tmp_path):
        self.tmp_path = tmp_path
        self.namesrvs = [StandaloneNamesrv(tmp_path / f"ns{i}", start=False) for i in range(3)]
        self.namesrv_addr = ";".join(ns.addr for ns in self.namesrvs)
        self.masters: dict[str, RunningNode] = {}
        self.slaves: dict[str, RunningNode] = {}
        for name, node_id in GROUPS.items():
            common = dict(TEST_SETTINGS, brokerName=name, namesrvAddr=self.namesrv_addr,
                          mappedFileSizeCommitLog=64 << 20)
            self.masters[name] = RunningNode(tmp_path / f"{name}-m", settings=dict(
                common, brokerRole="SYNC_MASTER", kafka_node_id=node_id))
            self.slaves[name] = RunningNode(tmp_path / f"{name}-s", settings=dict(
                common, brokerRole="SLAVE", brokerId=1, kafka_node_id=node_id + 1))

    def nodes(self) -> list[RunningNode]:
        return [*self.masters.values(), *self.slaves.values()]

    def start(self) -> None:
        with ThreadPoolExecutor(6) as pool:
            list(pool.map(lambda ns: ns.start(), self.namesrvs))
            list(pool.map(lambda n: n.start(), self.nodes()))
        for name in NAMES:
            self.wait_in_sync(name)
        want = {nid + i for nid in GROUPS.values() for i in (0, 1)}
        for m in self.masters.values():
            wait_until(lambda: {b for b in AdminClient({"bootstrap.servers": m.kafka_bootstrap})
                                .list_topics(timeout=10).brokers} == want, 60, what="every group in the Kafka view")

    def wait_in_sync(self, name: str) -> None:
        wait_until(lambda: http_json(f"{self.masters[name].admin_url}/api/ha").get("inSyncSlaves") == 1, 60,
                   what=f"{name}'s slave in sync")

    def bootstrap(self, name: str) -> str:
        return self.masters[name].kafka_bootstrap

    def stop(self) -> None:
        for n in self.nodes():
            try:
                n.stop()
            except Exception:
                n.kill()
        for ns in self.namesrvs:
            ns.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("groups"))
    try:
        c.start()
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def mqadmin(cluster, tmp_path_factory):
    return MQAdmin.built(cluster.namesrv_addr, tmp_path_factory.mktemp("mqadmin-home"))


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_spread_topic(cluster: Cluster, partitions: int) -> tuple[str, dict[int, int]]:
    """A topic over the three groups (contiguous blocks of ids, cluster.md), seen by every master."""
    topic = unique("spread")
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap("broker-b")})
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=2)],
                        request_timeout=15)[topic].result(30)
    per = partitions // 3
    want = {p: GROUPS[NAMES[p // per]] for p in range(partitions)}
    # every node answers Metadata (clients ask slaves too): wait until each lists all partitions
    for node in cluster.nodes():
        wait_until(lambda: leaders(node.kafka_bootstrap, topic) == want, 30,
                   what=f"{node.data_dir.name}'s leaders of {topic}")
    return topic, want


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    t = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic]
    return {} if t.error is not None else {p: pm.leader for p, pm in t.partitions.items()}


def kafka_produce(bootstrap: str, topic: str, values_by_partition: dict[int, list[bytes]],
                  timeout_ms: int = 30000) -> dict[int, str]:
    """Produce; returns partition -> error name for the partitions whose records failed."""
    failed: dict[int, str] = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "message.timeout.ms": timeout_ms})
    for part, values in values_by_partition.items():
        for v in values:
            p.produce(topic, v, partition=part,
                      on_delivery=lambda err, msg: err and failed.setdefault(msg.partition(), err.name()))
    assert p.flush(timeout_ms / 1000 + 30) == 0
    return failed


def kafka_read(bootstrap: str, topic: str, partitions: list[int], total: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("reader"), "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < total and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append((m.partition(), m.value()))
    finally:
        c.close()
    return got


def native_read(namesrv: str, topic: str, total: int) -> list[tuple[str, bytes]]:
    """Every message of every queue, through the RocketMQ routes (from a slave when the group's
    master is gone)."""
    got: list[tuple[str, bytes]] = []
    with LitePullConsumer(unique("native-reader"), namesrv, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                          auto_commit=False) as lp:
        lp.assign(lp.fetch_message_queues(topic))
        wait_until(lambda: got.extend((m.broker_name, bytes(m.body)) for m in lp.poll(300)) or len(got) >= total, 60,
                   what=f"{total} messages of {topic} read natively")
    return got


def raw_produce(bootstrap: str, topic: str, partition: int) -> tuple[int, str | None]:
    batch = build_batch([Record(0, 0, None, b"raw", [])], base_timestamp=int(time.time() * 1000))
    with RawKafka(bootstrap) as raw:
        out = raw.request(0, 9, {"transactional_id": None, "acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]})
    p = out["responses"][0]["partition_responses"][0]
    return p["error_code"], p.get("error_message")


def live_coordinated_group(cluster: Cluster) -> str:
    """A fresh consumer group id whose coordinator is a live group (a group id hashing to a
    ``__consumer_offsets`` partition whose state lives on a dead group answers
    COORDINATOR_NOT_AVAILABLE until that group returns, as in Kafka)."""
    with RawKafka(cluster.bootstrap("broker-c")) as raw:
        for _ in range(50):
            group = unique("survivors")
            if raw.request(10, 3, {"key": group, "key_type": 0})["error_code"] == ErrorCode.NONE:
                return group
    raise AssertionError("no consumer group id coordinated by a live group")


def native_producer(cluster: Cluster, **kw) -> NativeProducer:
    return NativeProducer(unique("pg"), cluster.namesrv_addr, send_msg_timeout=10000, **kw).start()


def send_native(producer: NativeProducer, topic: str, prefix: str, count: int) -> list:
    return [producer.send(Message(topic, f"{prefix}-{i}".encode())) for i in range(count)]


# ----------------------------------------------------------------------------------------------

def test_kafka_and_spark_clients_over_twelve_partitions_on_three_groups(cluster, tmp_path):
    topic, want = create_spread_topic(cluster, 12)
    # confluent-kafka: 5 records into every partition, through broker-a's master
    sent = {p: [f"c-{p}-{i}".encode() for i in range(5)] for p in range(12)}
    assert kafka_produce(cluster.bootstrap("broker-a"), topic, sent) == {}
    # Java kafka-clients (Kafka 4.3's console producer, acks=all): 60 keyless records
    java_values = [f"j-{i}" for i in range(60)]
    out = subprocess.run(["java", "-Xmx256m", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.ConsoleProducer",
                          "--bootstrap-server", cluster.bootstrap("broker-c"), "--topic", topic,
                          "--command-property", "acks=all", "--command-property", "linger.ms=0"],
                         input="\n".join(java_values) + "\n", capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    every = sorted([v for vs in sent.values() for v in vs] + [v.encode() for v in java_values])

    # a consumer group of three, each member bootstrapped on another group's master
    group = unique("three")
    members = [Consumer({"bootstrap.servers": cluster.bootstrap(n), "group.id": group,
                         "auto.offset.reset": "earliest", "enable.auto.commit": False}) for n in NAMES]
    got: list[tuple[int, bytes]] = []
    try:
        for c in members:
            c.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(got) < len(every) and time.monotonic() < deadline:
            for c in members:
                m = c.poll(0.1)
                if m is not None and not m.error():
                    got.append((m.partition(), m.value()))
        assert sorted(v for _, v in got) == every  # each record exactly once over the three members
        assert {p for p, v in got if v.startswith(b"c-")} == set(range(12))
        for c in members:  # every member got a share of the partitions
            assert c.assignment(), [len(x.assignment()) for x in members]
    finally:
        for c in members:
            c.close()

    # Kafka's own kafka-topics: leaders on the three masters, each group's slave a replica
    subprocess.run(["bash", str(KAFKA_TOOLS / "build.sh")], check=True, timeout=900)
    out = subprocess.run(["java", "-Xmx256m", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.TopicCommand",
                          "--bootstrap-server", cluster.bootstrap("broker-b"), "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    described = {}
    for ln in out.stdout.splitlines():
        fields = dict(part.split(": ", 1) for part in ln.strip().split("\t") if ": " in part)
        if "Partition" in fields:
            described[int(fields["Partition"])] = (int(fields["Leader"]), fields["Replicas"])
    assert described == {p: (nid, f"{nid},{nid + 1}") for p, nid in want.items()}
    assert {leader for leader, _ in described.values()} == {0, 100, 200}

    # one Spark batch read of the whole topic through the stock Kafka connector
    from spark_examples.common import spark_session

    spark = spark_session("rockafka-cluster-groups", "local[1]")
    try:
        rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", cluster.bootstrap("broker-a"))
                .option("subscribe", topic).option("startingOffsets", "earliest").option("endingOffsets", "latest")
                .load().select("partition", "value").collect())
    finally:
        spark.stop()
    assert sorted(bytes(r.value) for r in rows) == every
    assert {r.partition for r in rows} == set(range(12))


def test_wipe_write_perm_drains_a_group_and_add_write_perm_restores_it(cluster, mqadmin):
    topic, want = create_spread_topic(cluster, 6)  # broker-b holds partitions 2 and 3
    producer = native_producer(cluster, poll_name_server_interval=500)
    try:
        before = send_native(producer, topic, "before", 12)
        assert {r.message_queue.broker_name for r in before} == set(NAMES)

        out = mqadmin("wipeWritePerm", "-b", "broker-b")
        for ns in cluster.namesrvs:  # mqadmin asks every NameServer of the list
            assert f"wipe write perm of broker[broker-b] in name server[{ns.addr}] OK" in out, out
        # the producer's route follows; its sends go to the other groups only
        wait_until(lambda: {q.broker_name for q in producer.fetch_publish_queues(topic)} == {"broker-a", "broker-c"},
                   30, what="broker-b gone from the producer's publish queues")
        during = send_native(producer, topic, "during", 12)
        assert all(r.status == SendStatus.SEND_OK for r in during)
        assert {r.message_queue.broker_name for r in during} == {"broker-a", "broker-c"}
        # Kafka: broker-b's partitions keep their leader (readable) but refuse writes, with the reason
        # (the node learns the wipe from the NameServer within its view refresh)
        raw_on_b = 0

        def refused():
            nonlocal raw_on_b
            code, message = raw_produce(cluster.bootstrap("broker-b"), topic, 2)
            raw_on_b += code == ErrorCode.NONE
            return None if code == ErrorCode.NONE else (code, message)
        code, message = wait_until(refused, 30, what="broker-b refusing Kafka writes")
        assert code == ErrorCode.NOT_LEADER_OR_FOLLOWER and "wipeWritePerm" in (message or ""), (code, message)
        assert raw_produce(cluster.bootstrap("broker-a"), topic, 0) == (ErrorCode.NONE, None)
        assert leaders(cluster.bootstrap("broker-a"), topic) == want
        # consumers drain it: native and Kafka readers get broker-b's messages
        on_b = sorted(f"before-{i}".encode() for i, r in enumerate(before) if r.message_queue.broker_name == "broker-b")
        native = native_read(cluster.namesrv_addr, topic, 12 + 12 + 1 + raw_on_b)
        assert sorted(body for b, body in native if b == "broker-b" and body != b"raw") == on_b
        kafka = kafka_read(cluster.bootstrap("broker-c"), topic, [2, 3], len(on_b) + raw_on_b)
        assert sorted(v for _, v in kafka if v != b"raw") == on_b

        out = mqadmin("addWritePerm", "-b", "broker-b")
        for ns in cluster.namesrvs:
            assert f"add write perm of broker[broker-b] in name server[{ns.addr}] OK" in out, out
        wait_until(lambda: {q.broker_name for q in producer.fetch_publish_queues(topic)} == set(NAMES), 30,
                   what="broker-b back in the producer's publish queues")
        after = send_native(producer, topic, "after", 12)
        assert "broker-b" in {r.message_queue.broker_name for r in after}
        wait_until(lambda: raw_produce(cluster.bootstrap("broker-b"), topic, 2)[0] == ErrorCode.NONE, 30,
                   what="broker-b taking Kafka writes again")
    finally:
        producer.shutdown()


def test_a_send_not_stored_ok_is_sent_again_to_another_group(cluster, tmp_path):
    """retryAnotherBrokerWhenNotStoreOK: broker-c's SYNC_MASTER without its slave stores a message
    but answers SLAVE_NOT_AVAILABLE; the producer sends it again to another group."""
    topic, _ = create_spread_topic(cluster, 3)
    cluster.slaves["broker-c"].kill()
    try:
        wait_until(lambda: http_json(f"{cluster.masters['broker-c'].admin_url}/api/ha").get("inSyncSlaves") == 0, 30,
                   what="broker-c's master noticing its slave is gone")
        plain = native_producer(cluster, send_latency_fault_enable=False)
        retrying = native_producer(cluster, retry_another_broker_when_not_store_ok=True, send_latency_fault_enable=False)
        try:
            results = send_native(plain, topic, "plain", 6)
            on_c = [r.status for r in results if r.message_queue.broker_name == "broker-c"]
            assert on_c and set(on_c) == {SendStatus.SLAVE_NOT_AVAILABLE}, results
            results = send_native(retrying, topic, "retry", 6)
            assert [r.status for r in results] == [SendStatus.SEND_OK] * 6
            assert {r.message_queue.broker_name for r in results} <= {"broker-a", "broker-b"}
        finally:
            plain.shutdown()
            retrying.shutdown()
        # the stock RocketMQ Java client (5.x) does the same against these groups
        java_runner.build(java_runner.ROCKETMQ_DIR)
        cmd = java_runner.rocketmq_command("5.x", cluster.namesrv_addr, "JSON", ["retry-another-broker"], tmp_path)
        cmd[-2:-2] = ["--messages", "12", "--timeout-s", "90"]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        java_runner.parse(cmd, out.returncode, out.stdout, out.stderr).assert_passed("retry-another-broker", 5)
    finally:
        cluster.slaves["broker-c"].start()
        cluster.wait_in_sync("broker-c")


def test_two_masters_down_producers_write_to_the_third_consumers_read_the_slaves(cluster):
    """Seeds 004, 2台全部下线: broker-a's and broker-b's masters die (SIGKILL)."""
    topic, want = create_spread_topic(cluster, 6)
    sent = {p: [f"k-{p}-{i}".encode() for i in range(4)] for p in range(6)}
    assert kafka_produce(cluster.bootstrap("broker-c"), topic, sent) == {}  # acks=all: on the slaves too
    producer = native_producer(cluster)  # its route names all three groups
    try:
        before = send_native(producer, topic, "n-before", 6)
        assert {r.message_queue.broker_name for r in before} == set(NAMES)
        cluster.masters["broker-a"].kill()
        cluster.masters["broker-b"].kill()

        # native: the cached route still names the dead groups; each send moves on to broker-c
        after = send_native(producer, topic, "n-after", 9)
        assert [r.status for r in after] == [SendStatus.SEND_OK] * 9
        assert {r.message_queue.broker_name for r in after} == {"broker-c"}
        # Kafka: each dead group's slave stands in as its partitions' leader (reads only); every
        # live node, the slaves included, names it (a producer may ask any of them for Metadata:
        # one whose view still lacks broker-c's partitions would make them UNKNOWN_PARTITION)
        stand_ins = {**want, 0: 1, 1: 1, 2: 101, 3: 101}
        for node in (cluster.masters["broker-c"], cluster.slaves["broker-a"], cluster.slaves["broker-b"],
                     cluster.slaves["broker-c"]):
            wait_until(lambda: leaders(node.kafka_bootstrap, topic) == stand_ins, 60,
                       what=f"{node.data_dir.name} names the dead groups' slaves leaders")
        # writes to a dead group fail (retried as NOT_LEADER_OR_FOLLOWER), broker-c's succeed
        assert raw_produce(cluster.slaves["broker-a"].kafka_bootstrap, topic, 0)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
        failed = kafka_produce(cluster.bootstrap("broker-c"), topic, {0: [b"lost"], 4: [b"k-4-new"]}, timeout_ms=3000)
        assert set(failed) == {0}, failed
        every = sorted([v for vs in sent.values() for v in vs] + [b"k-4-new"] +
                       [f"n-before-{i}".encode() for i in range(6)] + [f"n-after-{i}".encode() for i in range(9)])

        # Kafka consumer groups (coordinated by the live group) read every record, the dead
        # groups' from their slaves: confluent-kafka and Java kafka-clients side by side
        java_group, c_group = live_coordinated_group(cluster), live_coordinated_group(cluster)
        java = subprocess.Popen(
            ["java", "-Xmx256m", "-cp", str(KAFKA_TOOLS / "lib" / "*"), "org.apache.kafka.tools.consumer.ConsoleConsumer",
             "--bootstrap-server", cluster.bootstrap("broker-c"), "--topic", topic, "--group", java_group,
             "--from-beginning", "--max-messages", str(len(every)), "--timeout-ms", "60000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        consumer = Consumer({"bootstrap.servers": cluster.slaves["broker-a"].kafka_bootstrap, "group.id": c_group,
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        got: list[tuple[int, bytes]] = []
        try:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < len(every) and time.monotonic() < deadline:
                m = consumer.poll(0.5)
                if m is not None and not m.error():
                    got.append((m.partition(), m.value()))
        finally:
            consumer.close()
            out, err = java.communicate(timeout=90)
        assert sorted(v for _, v in got) == every
        assert {p for p, _ in got} == set(range(6))
        assert sorted(ln.encode() for ln in out.splitlines() if ln) == every, err[-3000:]

        # consumers read the dead groups' records from their slaves
        native = native_read(cluster.namesrv_addr, topic, 24 + 1 + 6 + 9)
        bodies = sorted(b for _, b in native)
        assert bodies == sorted([v for vs in sent.values() for v in vs] + [b"k-4-new"] +
                                [f"n-before-{i}".encode() for i in range(6)] +
                                [f"n-after-{i}".encode() for i in range(9)])

        # broker-a's master returns: it leads its partitions again and takes writes there
        cluster.masters["broker-a"].start()
        wait_until(lambda: leaders(cluster.bootstrap("broker-c"), topic) == {**stand_ins, 0: 0, 1: 0}, 60,
                   what="broker-a's master leading its partitions again")
        assert kafka_produce(cluster.bootstrap("broker-c"), topic, {0: [b"k-0-back"]}) == {}
        on_0 = sorted(v for p, v in got if p == 0)  # what partition 0 held, read from the slave
        back = kafka_read(cluster.bootstrap("broker-c"), topic, [0], len(on_0) + 1)
        assert sorted(v for _, v in back) == sorted(on_0 + [b"k-0-back"])
    finally:
        producer.shutdown()
