"""Compacted topics with confluent-kafka (librdkafka) on a node whose commitlog segments expire at
once (fileReservedTime=0, small segments, a retention pass every 300 ms): the superseded records
go with their segments, every key's latest value stays readable at its original offset (also after
a restart), an old tombstone goes, and a record without a key is refused with INVALID_RECORD."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.gateway_kafka.kafka_helpers import unique, wait_for
from tests.support.node import RunningNode

pytestmark = pytest.mark.timeout(180)

SETTINGS = {"mappedFileSizeCommitLog": 64 * 1024, "fileReservedTime": 0, "cleanResourceInterval": 300,
            "deleteWhen": ";".join(f"{h:02d}" for h in range(24))}


def produce(bs: str, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list:
    """(key, value) records in order; returns (offset or error, key, value) per record."""
    out: list = []
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0, "batch.size": 8192})  # batches well below a segment
    for key, value in records:
        p.produce(topic, value, key=key, partition=0,
                  on_delivery=lambda err, m, k=key, v=value: out.append((err or m.offset(), k, v)))
        p.poll(0)
    assert p.flush(30) == 0
    return out


def read_all(bs: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    c = Consumer({"bootstrap.servers": bs, "group.id": unique("cmp-r"), "enable.auto.commit": False,
                  "enable.partition.eof": True})
    got = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        eof = False
        while not eof:
            m = c.poll(10)
            assert m is not None, "no answer from the broker"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                eof = True
                continue
            got.append((m.offset(), m.key(), m.value()))
    finally:
        c.close()
    return got


def test_compacted_topic_keeps_every_keys_latest_value_past_retention(tmp_path):
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        bs = node.kafka_bootstrap
        compacted, plain = unique("cmp"), unique("plain")
        admin = AdminClient({"bootstrap.servers": bs})
        futures = admin.create_topics([
            NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact", "delete.retention.ms": "500"}),
            NewTopic(plain, 1, 1)])
        for f in futures.values():
            f.result(30)
        pad = b"." * 2000
        keys = [b"k%d" % i for i in range(8)]
        written = produce(bs, compacted, [(b"gone", b"x" + pad), (b"gone", None)])  # a tombstone, soon old
        for r in range(6):  # 6 versions of each key, ~100 KB: the early ones in segments that expire
            written += produce(bs, compacted, [(k, b"%s-v%d" % (k, r) + pad) for k in keys])
        written += produce(bs, compacted, [(b"k0", b"k0-final")])
        assert all(isinstance(o, int) for o, _, _ in written)
        latest = {k: (o, v) for o, k, v in written}
        expected = sorted((o, k, v) for k, (o, v) in latest.items() if k != b"gone")

        # a keyless record is refused, the partition goes on
        refused = produce(bs, compacted, [(None, b"no key")])
        assert isinstance(refused[0][0], KafkaError) and refused[0][0].code() == KafkaError.INVALID_RECORD

        # roll the log well past every record of the compacted topic: the retention pass deletes
        # the old segments (the plain topic loses its first records), compaction copies forward
        produce(bs, plain, [(None, b"p%d" % i + pad) for i in range(120)])

        def plain_start() -> int:
            c = Consumer({"bootstrap.servers": bs, "group.id": unique("cmp-w")})
            try:
                return c.get_watermark_offsets(TopicPartition(plain, 0), timeout=10)[0]
            finally:
                c.close()
        wait_for(lambda: plain_start() > 60, 60, what="retention deleting old segments")
        try:
            wait_for(lambda: read_all(bs, compacted) == expected, 30,
                     what="only the latest record of each key, at its original offset")
        except AssertionError:
            assert [(o, k, (v or b"")[:12]) for o, k, v in read_all(bs, compacted)] == \
                [(o, k, (v or b"")[:12]) for o, k, v in expected]

        node.restart()
        assert read_all(bs, compacted) == expected
        # new writes after the restart still get the next offsets
        after = produce(bs, compacted, [(b"k1", b"k1-after")])
        assert after[0][0] == written[-1][0] + 1  # the refused keyless record took no offset


def test_compacted_topic_written_in_transactions_reads_to_its_end_past_retention(tmp_path):
    """The partition's last offset is a commit marker; when its segment goes, the marker is
    copied forward like a live record: read_committed and read_uncommitted consumers reach the
    end of the partition (EOF at the high watermark) instead of stopping short of it."""
    with RunningNode(tmp_path / "data", settings=SETTINGS) as node:
        bs = node.kafka_bootstrap
        compacted, plain = unique("cmptx"), unique("plain")
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(compacted, 1, 1, config={"cleanup.policy": "compact"}),
                                      NewTopic(plain, 1, 1)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": bs, "transactional.id": unique("tx")})
        p.init_transactions(30)
        for r in range(3):
            p.begin_transaction()
            for k in range(3):
                p.produce(compacted, b"v%d" % r, key=b"k%d" % k, partition=0)
            p.commit_transaction(30)
        pad = b"." * 2000
        produce(bs, plain, [(None, b"p%d" % i + pad) for i in range(120)])

        def plain_start() -> int:
            c = Consumer({"bootstrap.servers": bs, "group.id": unique("cmp-w")})
            try:
                return c.get_watermark_offsets(TopicPartition(plain, 0), timeout=10)[0]
            finally:
                c.close()
        wait_for(lambda: plain_start() > 60, 60, what="retention deleting old segments")
        # offsets 0-2, 4-6, 8-10 data; 3, 7, 11 commit markers
        expected = [(8 + k, b"k%d" % k, b"v2") for k in range(3)]
        for isolation in ("read_committed", "read_uncommitted"):
            c = Consumer({"bootstrap.servers": bs, "group.id": unique("cmp-r"), "enable.auto.commit": False,
                          "enable.partition.eof": True, "isolation.level": isolation})
            got = []
            try:
                c.assign([TopicPartition(compacted, 0, 0)])
                while True:
                    m = c.poll(10)
                    assert m is not None, f"{isolation}: stopped short of the end after {got}"
                    if m.error() is not None:
                        assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                        assert m.offset() == 12
                        break
                    got.append((m.offset(), m.key(), m.value()))
            finally:
                c.close()
            assert got == expected, isolation


def test_internal_topics_keep_every_keys_latest_state_past_retention(tmp_path):
    """``__consumer_offsets`` and ``__transaction_state`` are compacted topics: once every segment
    that held a committed offset, a dynamic broker config and a transactional id's state has
    expired, the log alone still holds them (the checkpoint files are removed before the restart,
    as a slave that joins late has none), and so does the security log (a SCRAM user, in its
    snapshot). An aborted transactional offset commit never becomes its key's value."""
    import shutil

    from confluent_kafka import Consumer
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType,
                                       ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

    from tests.gateway_kafka.kafka_helpers import RawKafka

    settings = dict(SETTINGS, stateCheckpointInterval=300)
    with RunningNode(tmp_path / "data", settings=settings) as node:
        bs = node.kafka_bootstrap
        data, plain, group, txn_id = unique("data"), unique("plain"), unique("g"), unique("tx")
        admin = AdminClient({"bootstrap.servers": bs})
        for f in admin.create_topics([NewTopic(data, 1, 1), NewTopic(plain, 1, 1)]).values():
            f.result(30)
        produce(bs, data, [(b"k", b"v%d" % i) for i in range(10)])
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        try:
            for n in (3, 5, 7):   # the last commit of the key is what must stay
                c.commit(offsets=[TopicPartition(data, 0, n)], asynchronous=False)
        finally:
            c.close()
        # transactional offset commits: a committed one (4), then an aborted one (9) of the same key
        txn_group = unique("tg")
        tp = Producer({"bootstrap.servers": bs, "transactional.id": unique("tp")})
        tp.init_transactions(30)
        meta = Consumer({"bootstrap.servers": bs, "group.id": txn_group}).consumer_group_metadata()
        for offset, commit in ((4, True), (9, False)):
            tp.begin_transaction()
            tp.produce(data, b"t%d" % offset, key=b"t")
            tp.send_offsets_to_transaction([TopicPartition(data, 0, offset)], meta, 30)
            tp.commit_transaction(30) if commit else tp.abort_transaction(30)
        broker = str(next(iter(admin.list_topics(timeout=10).brokers)))
        res = ConfigResource(ResourceType.BROKER, broker, incremental_configs=[
            ConfigEntry("log.cleaner.threads", "3", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        upsert = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                              b"alice-secret")
        admin.alter_user_scram_credentials([upsert])["alice"].result(30)
        with RawKafka(bs) as raw:
            first = raw.request(22, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60_000,
                                        "producer_id": -1, "producer_epoch": -1})
        assert first["error_code"] == 0

        # roll the log far past all of that: the segments that held it expire and go
        produce(bs, plain, [(None, b"p%d" % i + b"." * 2000) for i in range(120)])
        # the security log keeps its last snapshot and what follows it; a start writes a new
        # snapshot (at the log's head) once the oldest record is due (half of fileReservedTime),
        # so the SCRAM record no longer pins the first segment
        node.restart()

        def plain_start() -> int:
            w = Consumer({"bootstrap.servers": bs, "group.id": unique("cmp-w")})
            try:
                return w.get_watermark_offsets(TopicPartition(plain, 0), timeout=10)[0]
            finally:
                w.close()
        wait_for(lambda: plain_start() > 60, 60, what="retention deleting old segments")
        node.stop()
        gone = [p for p in (node.data_dir / "config").iterdir()
                if p.name.startswith(("consumerOffset.json", "transactionState.json"))]
        assert gone, sorted(p.name for p in (node.data_dir / "config").iterdir())
        for p in gone:
            p.unlink()
        first_segment = node.data_dir / "commitlog" / "00000000000000000000"
        assert not first_segment.exists(), "the first commitlog segment was not deleted"
        node.start()

        c = Consumer({"bootstrap.servers": bs, "group.id": group, "enable.auto.commit": False})
        try:
            assert c.committed([TopicPartition(data, 0)], timeout=30)[0].offset == 7
        finally:
            c.close()
        c = Consumer({"bootstrap.servers": bs, "group.id": txn_group, "enable.auto.commit": False})
        try:   # the aborted commit was not made the key's value by compaction
            assert c.committed([TopicPartition(data, 0)], timeout=30)[0].offset == 4
        finally:
            c.close()
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, broker)])
        assert next(iter(described.values())).result(30)["log.cleaner.threads"].value == "3"
        users = admin.describe_user_scram_credentials(["alice"])
        assert users["alice"].result(30).scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256
        with RawKafka(bs) as raw:
            again = raw.request(22, 4, {"transactional_id": txn_id, "transaction_timeout_ms": 60_000,
                                        "producer_id": -1, "producer_epoch": -1})
        # the same producer id, fenced by a new epoch: the transactional id's state came back
        assert (again["error_code"], again["producer_id"], again["producer_epoch"]) == \
            (0, first["producer_id"], first["producer_epoch"] + 1)
