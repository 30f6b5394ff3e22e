"""The remote tier of a store (engine/tiered/tier.py) against a real S3 server (s3proxy):
local retention moves a tiered queue's start only as far as the upload reached, reads below
it come from the object store with the local bytes, bytes changed in the bucket are never
served, remote retention deletes expired segments' objects, and a topic that stops being
tiered loses its remote data."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from engine.record_batch import Record, build_batch
from engine.tiered.object_store import ChecksumMismatch, S3ObjectStore
from engine.tiered.tier import RemoteTier
from engine.topic_config import TopicConfig
from tests.support.s3_server import ACCESS_KEY, SECRET_KEY, S3Server


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Server(tmp_path_factory.mktemp("s3")) as server:
        yield server


def tiered_store(make_store, attributes):
    store = make_store()       # 64 KiB commitlog segments
    store.topic_config.create_or_update(TopicConfig(
        "orders", read_queue_nums=1, write_queue_nums=1,
        attributes={"remote.storage.enable": "true", **attributes}))
    for b in range(60):        # ~130 KiB: two closed segments and the active one
        store.put_record_batch("orders", 0, build_batch(
            [Record(i, i, b"k%d" % (b * 10 + i), b"v%d-" % (b * 10 + i) + b"x" * 200, []) for i in range(10)]))
    return store


def new_tier(store, s3, bucket):
    s3.make_bucket(bucket)
    objects = S3ObjectStore(endpoint=s3.endpoint, bucket=bucket, access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, op_timeout_s=10.0, max_retries=0)
    tier = RemoteTier(store, objects, segment_bytes=16 * 1024, interval_s=0.05)
    tier.guard()
    tier.load()
    return tier


def local_units(store):
    out, o = {}, 0
    while o < store.get_max_offset_in_queue("orders", 0):
        res = store.get_message("", "orders", 0, o, 1)
        out[o] = bytes(res.messages[0])
        o = res.next_begin_offset
    return out


def test_local_retention_stops_at_the_upload_and_remote_reads_are_the_local_bytes(make_store, s3):
    store = tiered_store(make_store, {"local.retention.bytes": "0"})
    tier = new_tier(store, s3, "tier-local")
    before = local_units(store)
    assert tier.retention_floor() is not None
    tier.apply_local_retention()
    assert store.get_min_offset_in_queue("orders", 0) == 0      # nothing uploaded: nothing moves

    async def scenario():
        assert await tier.run_pass()
        end = tier.manifest.remote_end("orders", 0)
        assert 0 < end < store.get_max_offset_in_queue("orders", 0)   # the active segment stays
        assert store.get_min_offset_in_queue("orders", 0) == end      # local start = upload end
        assert tier.log_start("orders", 0) == 0
        for o, data in before.items():
            if o >= end:
                break
            units = await tier.read("orders", 0, o, 1)
            assert units[0].data == data and units[0].queue_offset == o
        assert [u for u in await tier.query_by_key("orders", "k17", 5, 0, 1 << 62)] == [before[10]]
        await tier.objects.close()

    asyncio.run(scenario())
    store.clean_expired_files(force=True, now_ms=(time.time() + 100 * 3600) * 1000)
    assert store.commitlog.min_offset > 0                        # the uploaded segments left the disk


def test_changed_remote_bytes_are_never_served(make_store, s3):
    store = tiered_store(make_store, {})
    tier = new_tier(store, s3, "tier-corrupt")

    async def scenario():
        assert await tier.run_pass()
        seg = tier.manifest.segments("orders", 0)[0]
        data = bytearray(await tier.objects.get(seg.log_key))
        data[len(data) // 2] ^= 0xFF                              # a flipped byte in a record body
        await tier.objects.put(seg.log_key, bytes(data))
        with pytest.raises(ChecksumMismatch):
            await tier.read("orders", 0, seg.base, seg.log_size)
        await tier.objects.close()

    asyncio.run(scenario())


def test_remote_retention_deletes_expired_segments_and_untiered_topics_lose_their_remote_data(make_store, s3):
    store = tiered_store(make_store, {"retention.ms": "3600000"})
    tier = new_tier(store, s3, "tier-retention")

    async def scenario():
        assert await tier.run_pass()
        segs = tier.manifest.segments("orders", 0)
        assert len(segs) >= 3
        later = (segs[-1].last_timestamp + 2 * 3_600_000)
        assert await tier.remote_retention(now_ms=later)
        left = tier.manifest.segments("orders", 0)
        assert left == segs[-1:]                                  # the newest stays: the upload resumes after it
        assert tier.log_start("orders", 0) == 0                   # still on the disk ...
        store.apply_topic_retention(now_ms=later)                 # ... until retention.ms moves the local start
        assert tier.log_start("orders", 0) == segs[-1].base
        names = {o.key for o in await tier.objects.list(f"{tier.uploader.group}/orders/0/") if o.etag is not None}
        assert names == {segs[-1].log_key, segs[-1].idx_key, segs[-1].keys_key}
        assert segs[-1].log_key.startswith(f"{store.broker_config.broker_name}/orders/0/")  # the group names its keys

        tc = store.topic_config.get("orders")
        store.topic_config.create_or_update(dataclasses.replace(
            tc, attributes={**tc.attributes, "remote.storage.enable": "false"}))
        assert await tier.remote_retention()
        assert tier.manifest.segments("orders", 0) == []
        assert [o for o in await tier.objects.list(f"{tier.uploader.group}/orders/0/") if o.etag is not None] == []
        await tier.objects.close()

    asyncio.run(scenario())


def test_uploads_are_paced_to_the_bandwidth_limit(make_store, s3):
    store = tiered_store(make_store, {})
    s3.make_bucket("tier-paced")
    objects = S3ObjectStore(endpoint=s3.endpoint, bucket="tier-paced", access_key=ACCESS_KEY,
                            secret_key=SECRET_KEY, op_timeout_s=10.0, max_retries=0)
    bandwidth = 256 * 1024
    tier = RemoteTier(store, objects, segment_bytes=16 * 1024, bandwidth=bandwidth)
    tier.guard()
    tier.load()

    async def scenario():
        started = time.monotonic()
        assert await tier.run_pass()
        elapsed = time.monotonic() - started
        segs = tier.manifest.segments("orders", 0)
        assert len(segs) >= 4
        # the last upload may start only once the link carried everything before it: a lower
        # bound that holds however loaded the machine is (waits only add to it)
        before_last = sum(s.log_size for s in segs[:-1])
        assert elapsed >= before_last / bandwidth
        assert tier.uploader.paced_s > 0
        await objects.close()

    asyncio.run(scenario())


def test_retention_bytes_counts_the_remote_and_the_local_bytes(make_store, s3):
    store = tiered_store(make_store, {"retention.bytes": str(60 * 1024)})
    tier = new_tier(store, s3, "tier-bytes")

    async def scenario():
        assert await tier.run_pass()    # uploads, then drops the oldest segments over the limit
        segs = tier.manifest.segments("orders", 0)
        remote = sum(s.log_size for s in segs)
        cq = store.find_consume_queue("orders", 0)
        local_past = sum(store.get_message("", "orders", 0, o, 1).units[0].size
                         for o in range(segs[-1].end, cq.max_offset, 10))   # one 10-record batch per unit
        whole = remote + local_past
        assert segs[0].base > 0                                  # the oldest segments went ...
        assert whole <= 60 * 1024 or len(segs) == 1              # ... until the partition fits ...
        assert whole > 60 * 1024 - 17 * 1024                     # ... and no more (a segment is <= ~16 KiB)
        await tier.objects.close()

    asyncio.run(scenario())


def test_a_sequential_remote_reader_finds_the_next_chunks_already_fetched(make_store, s3, monkeypatch):
    """A cold read of an offloaded segment also starts fetching the chunks after it; reading on
    through the segment returns the local bytes unit by unit, and a chunk asked for while its
    read-ahead is under way is fetched once, not twice."""
    import engine.tiered.tier as tier_module

    monkeypatch.setattr(tier_module, "CHUNK", 4096)   # 16 KiB segments of ~2 KiB units: 4 chunks each
    store = tiered_store(make_store, {"local.retention.bytes": "0"})
    tier = new_tier(store, s3, "tier-read-ahead")
    before = local_units(store)
    fetched: list[tuple[str, int]] = []
    real_get_range = tier.objects.get_range

    async def counting_get_range(key, start, end):
        fetched.append((key, start))
        if start:
            await asyncio.sleep(0.2)   # a slow store: the reader catches up with the read-ahead
        return await real_get_range(key, start, end)

    monkeypatch.setattr(tier.objects, "get_range", counting_get_range)

    async def scenario():
        assert await tier.run_pass()
        seg = tier.manifest.segments("orders", 0)[0]
        units = await tier.read("orders", 0, seg.base, 1)                    # one unit, cold
        assert units[0].data == before[seg.base]
        first_gets = [start for key, start in fetched if key == seg.log_key]
        assert len(first_gets) > 1 and 0 in first_gets                       # its chunk, and the next ones
        o, got = seg.base, {}                                                # on at once: races the read-ahead
        while o < seg.end:
            for u in await tier.read("orders", 0, o, 1):
                got[u.queue_offset] = u.data
                o = u.queue_offset + u.record_count
        assert got == {k: v for k, v in before.items() if seg.base <= k < seg.end}
        log_gets = [start for key, start in fetched if key == seg.log_key]
        assert sorted(log_gets) == sorted(set(log_gets))                     # no chunk fetched twice
        assert len(log_gets) == -(-seg.log_size // 4096)                     # every chunk, once
        await tier.objects.close()

    asyncio.run(scenario())
