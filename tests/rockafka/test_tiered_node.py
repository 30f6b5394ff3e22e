"""A tiered topic on a real node (``rockafka serve``) with a real S3 server (s3proxy).

More is written than the topic's local retention allows; the node uploads closed data in the
background, its disk keeps only the recent commitlog segments, and confluent-kafka still reads
every record from offset 0, byte for byte, the old ones served from the object store
(docs/design/tiered-storage.md).
"""

from __future__ import annotations

import time

import pytest

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for
from tests.support.node import RunningNode
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server

pytestmark = pytest.mark.timeout(180)

SEGMENT = 256 * 1024


def tiered_settings(server: S3Server, bucket: str) -> dict[str, object]:
    return {
        "mappedFileSizeCommitLog": SEGMENT,
        "fileReservedTime": 0,                          # closed segments may go as soon as allowed
        "deleteWhen": ";".join(f"{h:02d}" for h in range(24)),
        "cleanResourceInterval": 300,
        "tieredBackendServiceProvider": "s3",
        "objectStoreEndpoint": server.endpoint,
        "objectStoreBucket": bucket,
        "objectStoreAccessKey": ACCESS_KEY,
        "objectStoreSecretKey": SECRET_KEY,
        "tieredStoreGroupCommitSize": 64 * 1024,
        "tieredStoreUploadInterval": 200,
        "tieredStoreOpTimeout": 5000,
    }


def commitlog_files(node: RunningNode) -> list:
    return sorted((node.data_dir / "commitlog").glob("*"))


def list_offset(bootstrap: str, topic: str, which: int) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("lo")})
    try:
        return c.offsets_for_times([TopicPartition(topic, 0, which)], timeout=10)[0].offset
    finally:
        c.close()


def read_from_zero(bootstrap: str, topic: str, count: int, timeout: float = 60.0) -> list[tuple]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": unique("tier"), "enable.auto.commit": False,
                  "fetch.wait.max.ms": 200, "fetch.message.max.bytes": 256 * 1024})
    out: list[tuple] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None, m.error()
            out.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return out


def produce(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 16384})
    for k, v in records:
        p.produce(topic, key=k, value=v, partition=0)
        p.poll(0)
    assert p.flush(30) == 0


def test_a_tiered_topic_reads_from_offset_zero_after_its_old_segments_left_the_disk(tmp_path):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    from gateway_native.client import Admin, LitePullConsumer

    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, RunningNode(tmp_path / "data", settings=tiered_settings(server, bucket)) as node:
        topic = unique("orders")
        create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                      "local.retention.bytes": str(64 * 1024)})
        admin = AdminClient({"bootstrap.servers": node.kafka_bootstrap})
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)])
        entries = list(described.values())[0].result(20)
        assert entries["remote.storage.enable"].value == "true"
        assert entries["local.retention.bytes"].value == str(64 * 1024)
        plain = unique("plain")
        create_topic(node.kafka_bootstrap, plain, 1)
        res = ConfigResource(ConfigResource.Type.TOPIC, plain)
        res.add_incremental_config(ConfigEntry("remote.storage.enable", "true",
                                               incremental_operation=AlterConfigOpType.SET))
        admin.incremental_alter_configs([res])[res].result(20)          # tiered from now on
        res = ConfigResource(ConfigResource.Type.TOPIC, plain)
        res.add_incremental_config(ConfigEntry("remote.storage.enable", "false",
                                               incremental_operation=AlterConfigOpType.SET))
        with pytest.raises(KafkaException, match="remote.log.delete.on.disable"):
            admin.incremental_alter_configs([res])[res].result(20)
        for bad, why in (({"remote.storage.enable": "true", "cleanup.policy": "compact"}, "compacted"),
                         ({"remote.storage.enable": "true", "local.retention.ms": "600000",
                           "retention.ms": "60000"}, "larger than retention.ms")):
            name = unique("refused")
            with pytest.raises(KafkaException, match=why):
                admin.create_topics([NewTopic(name, 1, 1, config=bad)])[name].result(20)

        # ~1.6 MiB: six times the commitlog segment, 25 times the local retention; a point in
        # time between the halves for the search by time
        sent = [(b"order-%05d" % i, (b"%05d:" % i) + bytes((i + j) % 251 for j in range(400)))
                for i in range(4000)]
        produce(node.kafka_bootstrap, topic, sent[:2000])
        middle = int(time.time() * 1000) + 1
        wait_for(lambda: time.time() * 1000 > middle + 1, timeout=5, what="the clock to pass the middle")
        produce(node.kafka_bootstrap, topic, sent[2000:])

        # the node uploads and the store's retention frees the disk: the old data left it
        wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 2000, timeout=60,
                 what="the local start of the tiered partition to move up")
        wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60,
                 what="old commitlog segments to be deleted")
        assert list_offset(node.kafka_bootstrap, topic, -2) == 0        # earliest: the remote start
        assert list_offset(node.kafka_bootstrap, topic, -5) >= 1999     # latest tiered
        assert list_offset(node.kafka_bootstrap, topic, middle) == 2000  # by time, in the remote range
        assert sum(f.stat().st_size for f in commitlog_files(node)) <= 3 * SEGMENT

        got = read_from_zero(node.kafka_bootstrap, topic, len(sent))
        assert [o for o, _, _ in got] == list(range(len(sent)))
        assert [(k, v) for _, k, v in got] == sent                      # byte for byte
        assert list((server.data / bucket).rglob("*.log")), "no remote segment object in the bucket"
        operator_views_show_the_remote_tier(node, topic)

        # the native SDK: by key and by time, from the remote tier; mqadmin-style attributes
        with Admin(node.namesrv_addr) as native:
            native.create_topic(unique("NativeTiered"), 1, attributes={"remote.storage.enable": "true",
                                                                        "local.retention.ms": "60000"})
            for i in (0, 7, 1999, 2500):
                found = native.query_message_by_key(topic, sent[i][0].decode())
                assert [m.body for m in found] == [sent[i][1]], i
        with LitePullConsumer(unique("tier_lp"), node.namesrv_addr, auto_commit=False) as lp:
            mq = lp.fetch_message_queues(topic)[0]
            lp.assign([mq])
            assert lp.min_offset(mq) == 0
            assert lp.offset_for_timestamp(mq, middle) == 2000
            lp.seek(mq, 2000)
            msgs: list = []
            wait_for(lambda: msgs.extend(lp.poll(300)) or len(msgs) >= 300, timeout=30,
                     what="300 records pulled from the remote tier")
            assert [(m.queue_offset, m.keys[0].encode(), m.body) for m in msgs[:300]] == \
                [(2000 + i, k, v) for i, (k, v) in enumerate(sent[2000:2300])]

        # POP (RocketMQ 5's consumption, as gRPC receive uses it) from the first offset
        popped = pop_all(node, topic, 600)
        assert [(m.queue_offset, m.body) for m in popped] == [(i, v) for i, (_, v) in enumerate(sent[:len(popped)])]
        assert len(popped) >= 600


def operator_views_show_the_remote_tier(node: RunningNode, topic: str) -> None:
    """The CLI, the admin API and the console show the topic's remote tier (as /metrics does)."""
    import json
    import subprocess
    import urllib.request

    from tests.support.node import rockafka_command

    proc = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, "topics", "describe",
                                                topic, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [remote] = json.loads(proc.stdout)["remoteTier"]
    assert remote["remote_bytes"] > 1000 * 400 and remote["remote_segments"] >= 1, remote
    text = subprocess.run(rockafka_command() + ["admin", "--namesrv", node.namesrv_addr, "topics", "describe", topic],
                          capture_output=True, text=True, timeout=60).stdout
    assert "remote tier" in text and "remote_bytes" in text and "upload_lag_bytes" in text, text
    doc = json.loads(urllib.request.urlopen(f"{node.admin_url}/api/topics/{topic}", timeout=10).read())
    assert doc["remote_tier"]["remote_bytes"] > 1000 * 400
    assert doc["queues"][0]["log_start_offset"] == 0 < doc["queues"][0]["min_offset"]
    page = urllib.request.urlopen(f"{node.admin_url}/topics/{topic}", timeout=10).read().decode()
    assert "Remote tier" in page and "remote bytes" in page


def pop_all(node: RunningNode, topic: str, count: int) -> list:
    from engine.pop import INIT_MODE_MIN
    from gateway_native.remoting.codes import RequestCode as RC, ResponseCode as R
    from gateway_native.remoting.message_codec import decode_units
    from tests.support.failover import remoting_call

    group, out = unique("pop"), []
    deadline = time.monotonic() + 60
    while len(out) < count and time.monotonic() < deadline:
        resp = remoting_call(node.broker_addr, RC.POP_MESSAGE, {
            "consumerGroup": group, "topic": topic, "queueId": 0, "maxMsgNums": 32, "invisibleTime": 60000,
            "pollTime": 0, "bornTime": int(time.time() * 1000), "initMode": INIT_MODE_MIN, "expType": "TAG",
            "exp": "*"})
        if resp.code == R.SUCCESS:
            out += decode_units(bytes(resp.body))
    return out


def metric(node: RunningNode, name: str, topic: str) -> float | None:
    import urllib.request

    text = urllib.request.urlopen(f"{node.admin_url}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(f'{name}{{topic="{topic}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_stopped_object_store_delays_uploads_and_deletes_nothing_early(tmp_path):
    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    settings = dict(tiered_settings(server, bucket), tieredStoreOpTimeout=2000)
    with server, RunningNode(tmp_path / "data", settings=settings) as node:
        topic = unique("ledger")
        create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                      "local.retention.bytes": str(64 * 1024)})
        server.stop()                                  # the object store is down for a while
        sent = [(b"entry-%05d" % i, (b"%05d|" % i) + bytes((3 * i + j) % 253 for j in range(400)))
                for i in range(3000)]
        produce(node.kafka_bootstrap, topic, sent)     # produce keeps working on the local tier

        # passes fail and retention runs, yet nothing leaves the disk: no upload was recorded
        wait_for(lambda: (metric(node, "rockafka_tiered_upload_errors_total", topic) or 0) >= 2, timeout=60,
                 what="two failed upload passes")
        assert metric(node, "rockafka_tiered_remote_bytes", topic) == 0
        payload = sum(len(k) + len(v) for k, v in sent)
        assert payload < metric(node, "rockafka_tiered_upload_lag_bytes", topic) < 2 * payload   # each batch once
        assert list_offset(node.kafka_bootstrap, topic, -4) == 0
        assert len(commitlog_files(node)) >= 4          # the expired segments are all kept

        server.start()                                 # back on the same port and data: uploads resume
        wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 1500, timeout=90,
                 what="uploads to resume and the local start to move up")
        wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60, what="old commitlog segments to go")
        assert metric(node, "rockafka_tiered_remote_bytes", topic) > 1500 * 400
        assert list_offset(node.kafka_bootstrap, topic, -2) == 0

        # down again while a consumer reads offloaded offsets: it gets nothing (a retriable
        # error), never other bytes, and reads everything once the store is back
        from confluent_kafka import Consumer, TopicPartition

        server.stop()
        c = Consumer({"bootstrap.servers": node.kafka_bootstrap, "group.id": unique("down"),
                      "enable.auto.commit": False, "fetch.wait.max.ms": 200})
        got: list[tuple] = []
        try:
            c.assign([TopicPartition(topic, 0, 0)])

            def poll_once() -> bool:
                m = c.poll(0.2)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.key(), m.value()))
                return "tiered_read_failed" in node.log_events()
            wait_for(poll_once, timeout=60, what="a remote read to fail while the store is down")
            assert got == []
            server.start()
            deadline = time.monotonic() + 60
            while len(got) < len(sent) and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and m.error() is None:
                    got.append((m.offset(), m.key(), m.value()))
        finally:
            c.close()
        assert [o for o, _, _ in got] == list(range(len(sent)))
        assert [(k, v) for _, k, v in got] == sent


def test_a_node_killed_mid_upload_restarts_without_orphans_or_gaps(tmp_path):
    from tests.support.proxy import TcpProxy

    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, TcpProxy("127.0.0.1", server.port) as proxy:
        settings = dict(tiered_settings(server, bucket), objectStoreEndpoint=f"http://{proxy.address}",
                        tieredStoreOpTimeout=60_000)
        node = RunningNode(tmp_path / "data", settings=settings)
        with node:
            topic = unique("killed")
            create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                          "local.retention.bytes": str(64 * 1024)})
            proxy.hold_answers()            # the object store stores what it is sent; no answer returns
            sent = [(b"rec-%05d" % i, (b"%05d/" % i) + bytes((7 * i + j) % 241 for j in range(400)))
                    for i in range(3000)]
            produce(node.kafka_bootstrap, topic, sent)
            wait_for(lambda: list((server.data / bucket).rglob("*.log")), timeout=60,
                     what="an upload to reach the object store")
            node.kill()                     # mid-upload: the object is there, its commit record is not
            proxy.release()
            node.start()
            wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 1500, timeout=90,
                     what="uploads to be redone and the local start to move up")
            wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60, what="old commitlog segments to go")
            got = read_from_zero(node.kafka_bootstrap, topic, len(sent))
            assert [o for o, _, _ in got] == list(range(len(sent)))      # no gap
            assert [(k, v) for _, k, v in got] == sent
            wait_for(lambda: len({p.name.split("-")[0] for p in (server.data / bucket).rglob("*.log")})
                     == len(list((server.data / bucket).rglob("*.log"))), timeout=30,
                     what="the killed upload's object to be swept")
            logs, idxs = (sorted(p.name.split("-")[0] for p in (server.data / bucket).rglob(f"*.{ext}"))
                          for ext in ("log", "idx"))
            assert logs == idxs                                            # every object has its pair, once


def test_a_slave_serves_offloaded_offsets_with_its_master_down(tmp_path):
    from tests.rockafka.test_broker_group import pull_from_broker
    from tests.support.group import BrokerGroup

    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, BrokerGroup(tmp_path / "group", role="ASYNC_MASTER", slaves=1,
                             settings=tiered_settings(server, bucket)) as group:
        master, slave = group.master, group.slaves[0]
        topic = unique("replicated")
        create_topic(master.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                        "local.retention.bytes": str(64 * 1024)})
        sent = [(b"r-%05d" % i, (b"%05d~" % i) + bytes((5 * i + j) % 239 for j in range(400))) for i in range(3000)]
        produce(master.kafka_bootstrap, topic, sent)
        wait_for(lambda: list_offset(master.kafka_bootstrap, topic, -4) > 1500, timeout=60,
                 what="the master to upload and move the local start up")
        group.wait_caught_up(slave)
        # the slave frees its disk too, as far as the replicated manifest says is uploaded
        wait_for(lambda: len(commitlog_files(slave)) <= 3, timeout=60, what="the slave's old segments to go")
        master.kill()
        assert pull_from_broker(slave.broker_addr, topic, unique("from_slave")) == [v for _, v in sent]
