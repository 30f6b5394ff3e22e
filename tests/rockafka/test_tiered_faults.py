"""A slow object store under a running node (docs/design/tiered-storage.md, "A slow or stopped
object store"): the server gets the requests but its answers never come back in time (a proxy
swallows them), so every operation times out. Produce goes on, nothing leaves the disk, the
uploads left unfinished are swept as orphans, and once the store answers again the uploads
resume and every record reads back."""

from __future__ import annotations

import pytest

from tests.gateway_kafka.kafka_helpers import create_topic, unique, wait_for
from tests.rockafka.test_tiered_node import (commitlog_files, list_offset, metric, produce, read_from_zero,
                                             tiered_settings)
from tests.support.node import RunningNode
from tests.support.proxy import TcpProxy
from tests.support.s3_server import S3Server

pytestmark = pytest.mark.timeout(180)


def test_a_store_too_slow_to_answer_delays_uploads_and_leaves_no_orphan(tmp_path):
    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, TcpProxy("127.0.0.1", server.port) as proxy:
        settings = dict(tiered_settings(server, bucket), objectStoreEndpoint=f"http://{proxy.address}",
                        tieredStoreOpTimeout=1000)
        with RunningNode(tmp_path / "data", settings=settings) as node:
            topic = unique("slow")
            create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                          "local.retention.bytes": str(64 * 1024)})
            proxy.hold_answers()
            sent = [(b"s-%05d" % i, (b"%05d:" % i) + bytes((17 * i + j) % 227 for j in range(400)))
                    for i in range(3000)]
            produce(node.kafka_bootstrap, topic, sent)
            wait_for(lambda: (metric(node, "rockafka_tiered_upload_errors_total", topic) or 0) >= 2, timeout=60,
                     what="two upload passes to time out")
            assert metric(node, "rockafka_tiered_remote_bytes", topic) == 0   # nothing recorded
            assert list_offset(node.kafka_bootstrap, topic, -4) == 0 and len(commitlog_files(node)) >= 4

            proxy.release()
            wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 1500, timeout=90,
                     what="uploads to resume once the store answers")
            wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60, what="old commitlog segments to go")
            got = read_from_zero(node.kafka_bootstrap, topic, len(sent))
            assert [(k, v) for _, k, v in got] == sent
            assert "tiered_orphan_swept" in node.log_events()
            bases = [p.name.split("-")[0] for p in (server.data / bucket).rglob("*.log")]
            assert len(bases) == len(set(bases))          # the unanswered uploads' objects are gone


def test_a_store_answering_errors_delays_uploads_until_it_recovers(tmp_path):
    server = S3Server(tmp_path / "s3")
    bucket = server.make_bucket("tier")
    with server, RunningNode(tmp_path / "data", settings=tiered_settings(server, bucket)) as node:
        topic = unique("errors")
        create_topic(node.kafka_bootstrap, topic, 1, {"remote.storage.enable": "true",
                                                      "local.retention.bytes": str(64 * 1024)})
        moved = server.data / "tier-away"
        (server.data / bucket).rename(moved)       # the bucket is gone: every call answers an error
        sent = [(b"e-%05d" % i, (b"%05d;" % i) + bytes((19 * i + j) % 223 for j in range(400)))
                for i in range(3000)]
        produce(node.kafka_bootstrap, topic, sent)
        wait_for(lambda: (metric(node, "rockafka_tiered_upload_errors_total", topic) or 0) >= 2, timeout=60,
                 what="two upload passes answered with errors")
        assert metric(node, "rockafka_tiered_remote_bytes", topic) == 0
        assert list_offset(node.kafka_bootstrap, topic, -4) == 0 and len(commitlog_files(node)) >= 4

        moved.rename(server.data / bucket)         # the store answers again
        wait_for(lambda: list_offset(node.kafka_bootstrap, topic, -4) > 1500, timeout=90,
                 what="uploads to resume once the store answers")
        wait_for(lambda: len(commitlog_files(node)) <= 3, timeout=60, what="old commitlog segments to go")
        got = read_from_zero(node.kafka_bootstrap, topic, len(sent))
        assert [(k, v) for _, k, v in got] == sent
