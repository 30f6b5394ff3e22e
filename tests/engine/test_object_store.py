"""The remote tier's object store (engine/tiered/object_store.py).

Round trips through the S3 client against a real S3 server (s3proxy on loopback, from
tests/support/s3_server.py), the server stopped and started again, the client against a
stopped endpoint, and the fault tests through the in-memory double, whose slowness, refusal
and silence the bounding layer under test must turn into clear, bounded errors.
"""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from engine.tiered.object_store import (ChecksumMismatch, ObjectNotFound, ObjectStoreTimeout,
                                        ObjectStoreUnavailable, S3ObjectStore)
from tests.support.fault_object_store import FaultObjectStore
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server


def run(coro):
    return asyncio.run(coro)


# -- the S3 client against a real S3 server ----------------------------------------------

@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def s3_store(server, bucket, **kw):
    server.make_bucket(bucket)
    return S3ObjectStore(endpoint=server.endpoint, bucket=bucket, access_key=ACCESS_KEY,
                         secret_key=SECRET_KEY, **kw)


def test_round_trip_on_a_real_server_keeps_every_byte(s3):
    store = s3_store(s3, "roundtrip", op_timeout_s=20.0)
    small = b"segment \x00\xff bytes" * 100
    big = bytes(range(256)) * (6 * 4096 + 3)  # > 5 MiB: the multipart path

    async def scenario():
        put_small = await store.put("t/0/00000000000000000000.log", small)
        put_big = await store.put("t/0/00000000000000001000.log", big)
        assert await store.get("t/0/00000000000000000000.log",
                               expected_crc32c=put_small.crc32c) == small
        assert await store.get("t/0/00000000000000001000.log",
                               expected_crc32c=put_big.crc32c) == big
        assert await store.get_range("t/0/00000000000000001000.log", 5_000_000, 5_000_100) \
            == big[5_000_000:5_000_100]
        assert (await store.head("t/0/00000000000000001000.log")).size == len(big)
        keys = {o.key for o in await store.list("t/0/") if o.etag is not None}
        assert keys == {"t/0/00000000000000000000.log", "t/0/00000000000000001000.log"}
        await store.delete("t/0/00000000000000000000.log")
        with pytest.raises(ObjectNotFound):
            await store.get("t/0/00000000000000000000.log")
        with pytest.raises(ChecksumMismatch):  # the manifest's sum disagrees: never served
            await store.get("t/0/00000000000000001000.log", expected_crc32c=put_big.crc32c ^ 1)
        await store.close()
    run(scenario())


def test_wrong_secret_is_refused_not_retried_forever(s3):
    s3.make_bucket("auth")
    store = S3ObjectStore(endpoint=s3.endpoint, bucket="auth", access_key=ACCESS_KEY,
                          secret_key="not-the-secret", op_timeout_s=10.0, max_retries=1)

    async def scenario():
        with pytest.raises(ObjectStoreUnavailable):
            await store.put("k", b"x")
    run(scenario())


def test_server_stopped_then_started_again_serves_what_it_kept(tmp_path):
    server = S3Server(tmp_path).start()
    try:
        store = s3_store(server, "restart", op_timeout_s=5.0, max_retries=1)

        async def before():
            return await store.put("t/1/00000000000000000000.log", b"kept across a restart")
        put = run(before())
        server.stop()

        async def while_down():
            with pytest.raises((ObjectStoreUnavailable, ObjectStoreTimeout)):
                await store.put("t/1/00000000000000000100.log", b"not now")
        run(while_down())
        server.start()

        async def after():
            assert await store.get("t/1/00000000000000000000.log",
                                   expected_crc32c=put.crc32c) == b"kept across a restart"
            await store.put("t/1/00000000000000000100.log", b"now")
            assert await store.get("t/1/00000000000000000100.log") == b"now"
        run(after())
    finally:
        server.stop()


# -- the S3 client, nothing listening ------------------------------------------------------

def test_stopped_server_is_a_clear_bounded_error(tmp_path):
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = S3ObjectStore(endpoint=f"http://127.0.0.1:{port}", bucket="b", access_key="k",
                          secret_key="s", op_timeout_s=5.0, max_retries=1)

    async def scenario():
        with pytest.raises((ObjectStoreUnavailable, ObjectStoreTimeout)) as err:
            await store.put("k", b"x")
        assert "put" in str(err.value) and "'k'" in str(err.value)
    run(scenario())


# -- faults, through the double ------------------------------------------------------------

def test_hung_store_times_out_every_operation():
    store = FaultObjectStore(op_timeout_s=0.3)

    async def scenario():
        await store.put("k", b"abc")
        store.hang = True
        for op in (store.put("k", b"x"), store.get("k"), store.get_range("k", 0, 1),
                   store.head("k"), store.list(""), store.delete("k")):
            with pytest.raises(ObjectStoreTimeout, match="no answer within 0.3s"):
                await op
        store.hang = False
        assert await store.get("k") == b"abc"  # nothing was changed by the timed-out calls
    deadline = time.monotonic() + 30
    run(scenario())
    assert time.monotonic() < deadline


def test_slow_store_within_deadline_answers_beyond_it_times_out():
    store = FaultObjectStore(op_timeout_s=1.0)

    async def scenario():
        store.delay_s = 0.05
        put = await store.put("k", b"payload")
        assert await store.get("k", expected_crc32c=put.crc32c) == b"payload"
        store.delay_s = 5.0
        with pytest.raises(ObjectStoreTimeout):
            await store.get("k")
    run(scenario())


def test_down_store_is_unavailable_and_recovers():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        store.down = True
        with pytest.raises(ObjectStoreUnavailable, match="connection refused"):
            await store.put("k", b"v")
        store.down = False
        await store.put("k", b"v")
        assert await store.get("k") == b"v"
    run(scenario())


def test_corrupted_read_is_refused_not_served():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        await store.put("k", b"segment bytes")
        store.corrupt_reads = True
        with pytest.raises(ChecksumMismatch, match="stored"):
            await store.get("k")
    run(scenario())


def test_short_range_answer_is_an_error():
    store = FaultObjectStore(op_timeout_s=5.0)

    async def scenario():
        await store.put("k", b"0123456789")
        with pytest.raises(ObjectStoreUnavailable, match="asked 5 bytes"):
            await store.get_range("k", 8, 13)  # the object ends at 10
        with pytest.raises(ValueError):
            await store.get_range("k", 4, 4)
    run(scenario())


# -- the broker's keys ---------------------------------------------------------------------

def test_broker_without_a_remote_tier_builds_no_object_store():
    from engine.config import load_node_config
    from engine.tiered import object_store_from_config
    assert object_store_from_config(load_node_config(overrides={}).store) is None


def test_rocketmq_tiered_store_keys_reach_a_working_store_and_the_secret_is_masked(s3):
    from engine.config import ConfigError, describe, load_node_config
    from engine.tiered import object_store_from_config
    s3.make_bucket("fromkeys")
    keys = {"tieredBackendServiceProvider": "s3", "objectStoreEndpoint": s3.endpoint,
            "objectStoreBucket": "fromkeys", "objectStoreAccessKey": ACCESS_KEY,
            "objectStoreSecretKey": SECRET_KEY, "tieredStoreFilePath": "cluster-a"}
    config = load_node_config(overrides=keys)
    shown = {row["key"]: row["value"] for row in describe(config)}
    assert shown["objectStoreSecretKey"] == "******" and shown["objectStoreBucket"] == "fromkeys"
    store = object_store_from_config(config.store)

    async def scenario():
        await store.put("orders/0/x.log", b"via the broker keys")
        assert await store.get("orders/0/x.log") == b"via the broker keys"
        await store.close()
    run(scenario())
    assert (s3.data / "fromkeys" / "cluster-a" / "orders" / "0" / "x.log").read_bytes() \
        == b"via the broker keys"   # the prefix is the key's first path segment in the bucket

    with pytest.raises(ConfigError, match="objectStoreEndpoint"):
        load_node_config(overrides={"tieredBackendServiceProvider": "s3", "objectStoreBucket": "b"})
    with pytest.raises(ConfigError, match="tieredBackendServiceProvider"):
        load_node_config(overrides={"tieredBackendServiceProvider": "hdfs"})
